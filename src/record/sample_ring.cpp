#include "record/sample_ring.h"

#include <algorithm>
#include <cstring>

namespace ptsnap::record {

SampleRing::SampleRing(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void SampleRing::Push(std::span<const std::byte> record) {
  const size_t cap = capacity_;
  if (record.size() > cap) {
    ++dropped_;
    return;
  }
  // Grown as records come (doubling, at least 64 KiB), so that a thread
  // that samples little costs little: a ring of 1,000 idle threads is not
  // 1,000 times the snapshot size. Until it reaches `cap` nothing was
  // dropped, so start_ is 0 and the records lie at [0, used_).
  if (buf_.size() < cap && used_ + record.size() > buf_.size()) {
    constexpr size_t kMinGrowth = size_t{64} << 10;
    const size_t want = std::max({used_ + record.size(), buf_.size() * 2, kMinGrowth});
    buf_.resize(used_ + record.size() > cap ? cap : std::min(want, cap));
  }
  while (used_ + record.size() > cap) {
    start_ = (start_ + sizes_.front()) % cap;
    used_ -= sizes_.front();
    sizes_.pop_front();
    ++dropped_;
  }
  const size_t at = (start_ + used_) % cap;
  const size_t first = std::min(record.size(), cap - at);
  std::memcpy(buf_.data() + at, record.data(), first);
  std::memcpy(buf_.data(), record.data() + first, record.size() - first);
  sizes_.push_back(record.size());
  used_ += record.size();
}

std::vector<std::byte> SampleRing::Copy() const {
  std::vector<std::byte> out(used_);
  // While growing, start_ is 0 and nothing wraps.
  const size_t cap = buf_.size();
  const size_t first = std::min(used_, cap - start_);
  std::memcpy(out.data(), buf_.data() + start_, first);
  std::memcpy(out.data() + first, buf_.data(), used_ - first);
  return out;
}

}  // namespace ptsnap::record
