#include "emulate/jit_shadow.h"

namespace ptsnap::emulate {

JitShadow::Change JitShadow::Compare(uint64_t addr, std::span<const uint8_t> code) const {
  bool all_known = true;
  const Page* page = nullptr;
  uint64_t page_no = ~uint64_t{0};
  for (size_t i = 0; i < code.size(); ++i) {
    const uint64_t a = addr + i;
    if (a / kPage != page_no) {
      page_no = a / kPage;
      auto it = pages_.find(page_no);
      page = it == pages_.end() ? nullptr : it->second.get();
    }
    const uint64_t off = a % kPage;
    if (page == nullptr || (page->valid[off / 64] >> (off % 64) & 1) == 0) {
      all_known = false;
      continue;
    }
    if (page->bytes[off] != code[i]) return Change::kReplaces;
  }
  return all_known ? Change::kSame : Change::kNew;
}

JitShadow::Change JitShadow::Update(uint64_t addr, std::span<const uint8_t> code) {
  const Change change = Compare(addr, code);
  if (change == Change::kSame) return change;
  Page* page = nullptr;
  uint64_t page_no = ~uint64_t{0};
  for (size_t i = 0; i < code.size(); ++i) {
    const uint64_t a = addr + i;
    if (a / kPage != page_no) {
      page_no = a / kPage;
      std::unique_ptr<Page>& p = pages_[page_no];
      if (!p) p = std::make_unique<Page>();
      page = p.get();
    }
    const uint64_t off = a % kPage;
    page->bytes[off] = code[i];
    page->valid[off / 64] |= uint64_t{1} << (off % 64);
  }
  return change;
}

}  // namespace ptsnap::emulate
