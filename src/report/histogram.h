// DurationHistogram: call durations in log-linear buckets (32 per power of
// two), so percentiles come from bounded memory, each within 1/32 (3.1%)
// of the true value, and never outside [min, max], which are exact.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace ptsnap::report {

class DurationHistogram {
 public:
  static constexpr int kSubBits = 5;  // 32 sub-buckets per power of two

  void Add(uint64_t ns);
  void Merge(const DurationHistogram& other);
  [[nodiscard]] uint64_t count() const { return count_; }
  [[nodiscard]] uint64_t min() const { return count_ == 0 ? 0 : min_; }
  [[nodiscard]] uint64_t max() const { return max_; }
  // The duration at or below which a fraction `q` (0..1) of the calls lie:
  // the upper bound of the bucket holding that rank, clamped to [min, max].
  [[nodiscard]] uint64_t Quantile(double q) const;

  // Counts per power-of-two range [2^k, 2^(k+1)) ({k, count}, ascending;
  // k = -1 for zero-length calls): the terminal histogram's rows.
  [[nodiscard]] std::vector<std::pair<int, uint64_t>> Octaves() const;
  // The range [lo, hi) an Octaves() row `k` counts ([0, 1) for k = -1; the
  // top octave ends at UINT64_MAX, its largest value).
  static std::pair<uint64_t, uint64_t> OctaveRange(int k) {
    return {k < 0 ? 0 : uint64_t{1} << k, k < 0     ? 1
                                          : k >= 63 ? UINT64_MAX
                                                    : uint64_t{1} << (k + 1)};
  }

  // The bucket of `ns` and the largest value in it (exposed for tests).
  static uint32_t Bucket(uint64_t ns);
  static uint64_t BucketMax(uint32_t bucket);

 private:
  std::map<uint32_t, uint64_t> buckets_;
  uint64_t count_ = 0, min_ = UINT64_MAX, max_ = 0;
};

}  // namespace ptsnap::report
