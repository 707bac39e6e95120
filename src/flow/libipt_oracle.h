// libipt as the flow decoder's oracle (test, fuzz and benchmark support; not
// linked into ptsnap itself): the same driving loop as src/decode's
// StreamDecoder over libipt's block decoder, turned into flow::Items
// (flow_decoder.h says what they hold and when two runs are equal), a code
// image both decoders read from, and the comparison.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flow/flow_decoder.h"
#include "flow/libipt_config.h"
#include "ptsnap/result.h"

namespace ptsnap::flow {

// Code from files at virtual addresses: a CodeReader for the flow decoder
// and the equivalent libipt image (sections in a section cache, as
// src/decode builds them).
class CodeImage : public CodeReader {
 public:
  CodeImage();
  ~CodeImage() override;
  CodeImage(const CodeImage&) = delete;
  CodeImage& operator=(const CodeImage&) = delete;

  // `size` bytes of `path` from `offset`, at `vaddr`. Errors: unreadable file.
  Result<void> AddFile(const std::string& path, uint64_t offset, uint64_t size, uint64_t vaddr);
  size_t Read(uint64_t ip, uint8_t* buf, size_t size) override;
  // A fresh libipt image over the same sections (owned by this object), so
  // each libipt run starts with cold block caches, as ours does.
  struct pt_image* NewLibiptImage();
  // Frees every image NewLibiptImage made (none may be in use).
  void FreeLibiptImages();

 private:
  struct Region {
    uint64_t vaddr = 0;
    std::string bytes;
    std::string path;
    uint64_t offset = 0;
  };
  std::vector<Region> regions_;
  std::vector<struct pt_image*> images_;
  std::vector<struct pt_image_section_cache*> caches_;
};

// libipt's block decoder over `cfg` (begin/end set) and `image`, driven by
// StreamDecoder's loop.
std::vector<Item> DecodeWithLibipt(const struct pt_config& cfg, struct pt_image* image);
// Ours over the same bytes and configuration.
std::vector<Item> DecodeWithFlow(const struct pt_config& cfg, CodeReader* code);

// One line per item ("block 0x401000-0x401010 n=5 cond", "event tick ...").
std::string ToString(const Item& item);

struct Comparison {
  bool equal = false;        // the contract: equal up to the first error and the resync after it
  bool all_equal = false;    // and everything after it too
  bool unsupported = false;  // ours stopped at a packet it does not decode (equal up to there)
  size_t index = 0;          // the first differing item
  size_t items = 0, errors = 0;
  std::string message;  // what differs, with context
};
Comparison Compare(const std::vector<Item>& libipt, const std::vector<Item>& ours);

}  // namespace ptsnap::flow
