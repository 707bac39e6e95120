#include "report/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ptsnap::report {

namespace {
constexpr uint64_t kSub = uint64_t{1} << DurationHistogram::kSubBits;
}  // namespace

// Values below 2 * kSub have a bucket each; above, bucket = (octave,
// the kSubBits bits after the leading one).
uint32_t DurationHistogram::Bucket(uint64_t ns) {
  if (ns < 2 * kSub) return static_cast<uint32_t>(ns);
  const int msb = 63 - std::countl_zero(ns);
  const int shift = msb - kSubBits;
  const uint64_t sub = (ns >> shift) & (kSub - 1);
  return static_cast<uint32_t>(2 * kSub + (static_cast<uint64_t>(shift - 1) << kSubBits) + sub);
}

uint64_t DurationHistogram::BucketMax(uint32_t bucket) {
  if (bucket < 2 * kSub) return bucket;
  const uint64_t rel = bucket - 2 * kSub;
  const int shift = static_cast<int>(rel >> kSubBits) + 1;
  const uint64_t sub = rel & (kSub - 1);
  const uint64_t low = (kSub | sub) << shift;
  return low + ((uint64_t{1} << shift) - 1);
}

void DurationHistogram::Add(uint64_t ns) {
  ++buckets_[Bucket(ns)];
  ++count_;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
}

void DurationHistogram::Merge(const DurationHistogram& other) {
  for (const auto& [bucket, n] : other.buckets_) buckets_[bucket] += n;
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

uint64_t DurationHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank (1-based) of the q-quantile: the smallest value with at least
  // q of the calls at or below it.
  const auto rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (const auto& [bucket, n] : buckets_) {
    seen += n;
    if (seen >= rank) return std::clamp(BucketMax(bucket), min(), max_);
  }
  return max_;
}

std::vector<std::pair<int, uint64_t>> DurationHistogram::Octaves() const {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& [bucket, n] : buckets_) {
    const uint64_t v = BucketMax(bucket);
    const int k = v == 0 ? -1 : 63 - std::countl_zero(v);
    if (out.empty() || out.back().first != k) {
      out.emplace_back(k, n);
    } else {
      out.back().second += n;
    }
  }
  return out;
}

}  // namespace ptsnap::report
