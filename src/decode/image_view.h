// What libipt's images hold, for ptsnap's own flow decoder (src/flow): a
// mirror of every section added to a pt_image (pt_image_add_cached,
// pt_image_copy) and of its read callback (JIT memory), so the flow
// decoder reads exactly the bytes libipt's pt_image_read would: at an
// address, the section added last that covers it (libipt splits older
// sections under a new one), up to where it ends or a later section
// starts; where no section maps it, the image's JIT memory.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/jit_memory.h"

namespace ptsnap::decode {

class ImageViews {
 public:
  explicit ImageViews(struct pt_image_section_cache* iscache) : iscache_(iscache) {}

  // After pt_iscache_add_file returned `isid` for [vaddr, vaddr + size) of
  // `file` at `offset`. libipt shares one section, and so one block cache,
  // among the isids of the same file, offset and size (at any address).
  void Section(int isid, uint64_t vaddr, uint64_t size, const std::string& file, uint64_t offset);
  // After pt_image_add_cached(image, iscache, isid).
  void Add(const struct pt_image* image, int isid);
  // After pt_image_copy(dst, src).
  void Copy(const struct pt_image* dst, const struct pt_image* src);
  // After pt_image_set_callback(image, ReadJitMemory, jit).
  void SetJit(const struct pt_image* image, const JitMemory* jit);

  // Up to `size` bytes of `image` at `ip` into `buf`; 0 where nothing maps it.
  size_t Read(const struct pt_image* image, uint64_t ip, uint8_t* buf, size_t size) const;
  // Where libipt's block cache for `image` would hold `ip`
  // (flow::CodeReader::LibiptCacheKey): the section that serves `ip` (the
  // one Read reads) and the offset in it, with [*lo, *hi), the addresses
  // that section serves around `ip`. False where no section serves it (the
  // callback's JIT memory, or nothing): no block cache.
  bool CacheKey(const struct pt_image* image, uint64_t ip, uint64_t* key, uint64_t* lo,
                uint64_t* hi) const;

 private:
  struct Sec {
    int isid = 0;
    uint64_t vaddr = 0, size = 0;
    uint64_t section = 0;  // libipt's section: one per file, offset and size
  };
  struct View {
    std::vector<Sec> sections;  // in the order added: later ones win
    const JitMemory* jit = nullptr;
  };
  // The section Read reads `ip` from (null: none), and [*from, *to), the
  // addresses around `ip` it serves.
  static const Sec* Serving(const View& view, uint64_t ip, uint64_t* from, uint64_t* to);
  struct pt_image_section_cache* iscache_;
  std::unordered_map<int, Sec> isids_;
  std::unordered_map<std::string, uint64_t> sections_;  // "file@offset+size" -> Sec::section
  std::unordered_map<const struct pt_image*, View> views_;
};

}  // namespace ptsnap::decode
