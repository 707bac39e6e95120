// libipt's handles and configuration for the decoder.
//
// Owners: each libipt handle type ptsnap uses has a move-only owner, a
// std::unique_ptr whose deleter is libipt's own free function, so no handle
// is freed by hand. The New* allocators return owners that are never null:
// libipt allocates only its small structures there, and a null is out of
// memory (PTSNAP_CHECK), except for a block decoder, which libipt also
// refuses for a configuration it does not accept (a returned Error).
//
// Configuration: MakePtConfig turns a trace's manifest into pt_config. Pure.
#pragma once

#include <intel-pt.h>

#include <memory>
#include <string>
#include <string_view>

#include "ptsnap/result.h"
#include "trace/manifest.h"

namespace ptsnap::decode {

namespace internal {
struct ImageFree {
  void operator()(struct pt_image* p) const { pt_image_free(p); }
};
struct IscacheFree {
  void operator()(struct pt_image_section_cache* p) const { pt_iscache_free(p); }
};
struct BlockDecoderFree {
  void operator()(struct pt_block_decoder* p) const { pt_blk_free_decoder(p); }
};
}  // namespace internal

// A traced memory image: sections (from an iscache) at virtual addresses.
using UniqueImage = std::unique_ptr<struct pt_image, internal::ImageFree>;
// The section cache images share; it must outlive every image that holds
// one of its sections and every decoder reading through it.
using UniqueIscache = std::unique_ptr<struct pt_image_section_cache, internal::IscacheFree>;
// A block decoder over one stream's bytes (which it does not own: they must
// outlive it), reading code from the image set on it (not owned either).
using UniqueBlockDecoder = std::unique_ptr<struct pt_block_decoder, internal::BlockDecoderFree>;

// `name` may be null (libipt copies it).
UniqueImage NewImage(const char* name);
UniqueIscache NewIscache(const char* name);
// An error when libipt refuses `config` (its begin/end set by the caller).
Result<UniqueBlockDecoder> NewBlockDecoder(const struct pt_config& config);

// libipt's message for a negative status ("no memory mapped at this address").
std::string LibiptError(int status);

// Builds libipt's pt_config from the manifest (cpu + errata, cpuid 0x15,
// mtc_freq, nom_freq, ADDR0 filter, end_on_call/end_on_jump, tick events).
// Pure; begin/end are left for the caller.
struct pt_config MakePtConfig(const trace::Manifest& m);

}  // namespace ptsnap::decode
