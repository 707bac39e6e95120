#include "decode/jit_memory.h"

#include <algorithm>

namespace ptsnap::decode {

bool JitMemory::Conflicts(uint64_t addr, std::span<const uint8_t> code) const {
  for (size_t i = 0; i < code.size();) {
    const uint64_t a = addr + i;
    const uint64_t off = a % kPage;
    const size_t n = std::min<size_t>(code.size() - i, kPage - off);
    auto it = pages_.find(a / kPage);
    if (it != pages_.end()) {
      const Page& p = *it->second;
      for (size_t k = 0; k < n; ++k) {
        const uint64_t o = off + k;
        if ((p.valid[o / 64] >> (o % 64) & 1) != 0 && p.bytes[o] != code[i + k]) return true;
      }
    }
    i += n;
  }
  return false;
}

void JitMemory::Write(uint64_t addr, std::span<const uint8_t> code) {
  for (size_t i = 0; i < code.size();) {
    const uint64_t a = addr + i;
    const uint64_t off = a % kPage;
    const size_t n = std::min<size_t>(code.size() - i, kPage - off);
    std::shared_ptr<Page>& p = pages_[a / kPage];
    if (!p) {
      p = std::make_shared<Page>();
    } else if (p.use_count() > 1) {
      p = std::make_shared<Page>(*p);  // shared with a copy of this memory
    }
    for (size_t k = 0; k < n; ++k) {
      const uint64_t o = off + k;
      uint64_t& word = p->valid[o / 64];
      const uint64_t bit = uint64_t{1} << (o % 64);
      if ((word & bit) == 0) ++bytes_;
      word |= bit;
      p->bytes[o] = code[i + k];
    }
    i += n;
  }
}

size_t JitMemory::Read(uint8_t* out, size_t size, uint64_t addr) const {
  size_t done = 0;
  while (done < size) {
    const uint64_t a = addr + done;
    auto it = pages_.find(a / kPage);
    if (it == pages_.end()) break;
    const Page& p = *it->second;
    uint64_t o = a % kPage;
    while (done < size && o < kPage && (p.valid[o / 64] >> (o % 64) & 1) != 0)
      out[done++] = p.bytes[o++];
    if (o < kPage) break;  // a byte not held
  }
  return done;
}

int ReadJitMemory(uint8_t* buffer, size_t size, const struct pt_asid* /*asid*/, uint64_t ip,
                  void* context) {
  const auto* mem = static_cast<const JitMemory*>(context);
  const size_t n = mem->Read(buffer, size, ip);
  return n == 0 ? -pte_nomap : static_cast<int>(n);
}

}  // namespace ptsnap::decode
