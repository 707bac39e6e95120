// The kernel's code for the decoder: the kcore copy's text segments (one
// libipt image, copied into every address space's image), kallsyms for the
// Symbolizer, and the kernel text changes recorded as TEXT_POKE (one
// section per poke, in a memfd). Owns that image, the pokes' sections'
// files and the poked pages; the section cache it adds to is the caller's.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/unique_fd.h"
#include "decode/image_view.h"
#include "decode/libipt.h"
#include "decode/stats.h"
#include "decode/symbols.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::decode {

class KernelImage {
 public:
  // An image without sections, adding to `iscache` (which must outlive it).
  // `views` (optional, must outlive it) mirrors its sections (image_view.h).
  explicit KernelImage(struct pt_image_section_cache* iscache, ImageViews* views = nullptr);

  // When the manifest says the kcore was copied: kallsyms from `dir`'s
  // kcore directory go to `symbolizer`, and the kcore copy's kernel text
  // segments become this image's sections. What cannot be read is a
  // warning in `stats` (that code is then not decoded or named).
  void Load(const std::filesystem::path& dir, const trace::Manifest& m, Symbolizer& symbolizer,
            DecodeStats& stats);

  // PERF_RECORD_TEXT_POKE at `time`, in time order: the patched pages, with
  // every poke so far applied, become poke PokeCount()'s section. Pokes
  // outside the kcore text (no kcore, BPF JIT) are ignored; unreadable text
  // or no memory for the copy is a warning in `stats`.
  void AddTextPoke(uint64_t time, const trace::TextPoke& poke, DecodeStats& stats);

  // The kcore sections (none before Load, or without kcore). Pokes are not
  // in it: an address space's image version k lays sections PokeIsid(0..k-1)
  // over it (AddressSpaces::Image).
  [[nodiscard]] const struct pt_image* image() const { return image_.get(); }
  [[nodiscard]] struct pt_image* image() { return image_.get(); }

  // Kernel text changes in time order. The kcore copy holds the text as it
  // was when recording started; version k of an image has the first k
  // pokes applied, from PokeTime(k - 1) on.
  [[nodiscard]] size_t PokeCount() const { return pokes_.size(); }
  [[nodiscard]] uint64_t PokeTime(size_t i) const { return pokes_[i].time; }
  [[nodiscard]] int PokeIsid(size_t i) const { return pokes_[i].isid; }

 private:
  struct pt_image_section_cache* iscache_;
  ImageViews* views_;
  UniqueImage image_;
  struct KcoreSegment {
    uint64_t vaddr = 0, size = 0;
    int isid = 0;
  };
  std::vector<KcoreSegment> kcore_segments_;
  // One section per poke: the pages it touched, with every poke so far
  // applied, in a memfd (libipt sections are files: /proc/self/fd/N).
  struct Poke {
    uint64_t time = 0;  // perf clock ns
    int isid = 0;
  };
  std::vector<Poke> pokes_;
  std::vector<base::UniqueFd> poke_fds_;
  std::unordered_map<uint64_t, std::string> poked_pages_;  // page address -> current bytes
};

}  // namespace ptsnap::decode
