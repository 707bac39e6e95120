#include "decode/image_view.h"

#include <algorithm>

namespace ptsnap::decode {

void ImageViews::Section(int isid, uint64_t vaddr, uint64_t size, const std::string& file,
                         uint64_t offset) {
  const std::string id = file + "@" + std::to_string(offset) + "+" + std::to_string(size);
  const uint64_t section = sections_.emplace(id, sections_.size() + 1).first->second;
  isids_[isid] = Sec{isid, vaddr, size, section};
}

void ImageViews::Add(const struct pt_image* image, int isid) {
  auto it = isids_.find(isid);
  if (it == isids_.end()) return;
  std::vector<Sec>& v = views_[image].sections;
  // libipt keeps an identical section where it is.
  if (std::any_of(v.begin(), v.end(), [&](const Sec& s) { return s.isid == isid; })) return;
  v.push_back(it->second);
}

void ImageViews::Copy(const struct pt_image* dst, const struct pt_image* src) {
  auto it = views_.find(src);
  if (it == views_.end()) return;
  const std::vector<Sec> from = it->second.sections;  // dst may rehash views_
  for (const Sec& s : from) Add(dst, s.isid);
}

void ImageViews::SetJit(const struct pt_image* image, const JitMemory* jit) {
  views_[image].jit = jit;
}

const ImageViews::Sec* ImageViews::Serving(const View& view, uint64_t ip, uint64_t* from,
                                           uint64_t* to) {
  const std::vector<Sec>& v = view.sections;
  for (size_t i = v.size(); i-- > 0;) {
    const Sec& s = v[i];
    if (ip < s.vaddr || ip - s.vaddr >= s.size) continue;
    // The later sections win where they lie: this one serves up to the
    // next of them above `ip` and from the last of them below it.
    *from = s.vaddr;
    *to = s.vaddr + s.size;
    for (size_t j = i + 1; j < v.size(); ++j) {
      const uint64_t a = v[j].vaddr, b = v[j].vaddr + v[j].size;
      if (a > ip && a < *to) *to = a;
      if (b <= ip && b > *from) *from = b;
    }
    return &s;
  }
  return nullptr;
}

size_t ImageViews::Read(const struct pt_image* image, uint64_t ip, uint8_t* buf,
                        size_t size) const {
  auto it = views_.find(image);
  if (it == views_.end()) return 0;
  uint64_t from = 0, to = 0;
  if (const Sec* s = Serving(it->second, ip, &from, &to)) {
    const auto want = static_cast<size_t>(std::min<uint64_t>(size, to - ip));
    const int r = pt_iscache_read(iscache_, buf, want, s->isid, ip);
    return r > 0 ? static_cast<size_t>(r) : 0;
  }
  return it->second.jit != nullptr ? it->second.jit->Read(buf, size, ip) : 0;
}

bool ImageViews::CacheKey(const struct pt_image* image, uint64_t ip, uint64_t* key, uint64_t* lo,
                          uint64_t* hi) const {
  auto it = views_.find(image);
  if (it == views_.end()) return false;
  const Sec* s = Serving(it->second, ip, lo, hi);
  if (s == nullptr) return false;
  // Offsets stay below 2^40 (a section is a mapping of a file).
  *key = (s->section << 40) | ((ip - s->vaddr) & ((uint64_t{1} << 40) - 1));
  return true;
}

}  // namespace ptsnap::decode
