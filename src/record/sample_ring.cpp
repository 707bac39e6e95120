#include "record/sample_ring.h"

#include <algorithm>
#include <cstring>

namespace ptsnap::record {

SampleRing::SampleRing(size_t capacity) : buf_(std::max<size_t>(capacity, 1)) {}

void SampleRing::Push(std::span<const std::byte> record) {
  const size_t cap = buf_.size();
  if (record.size() > cap) {
    ++dropped_;
    return;
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
  const size_t cap = buf_.size();
  const size_t first = std::min(used_, cap - start_);
  std::memcpy(out.data(), buf_.data() + start_, first);
  std::memcpy(out.data() + first, buf_.data(), used_ - first);
  return out;
}

}  // namespace ptsnap::record
