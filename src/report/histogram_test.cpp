#include "report/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ptsnap::report {
namespace {

TEST(DurationHistogram, BucketsHoldTheirValuesWithinOneThirtySecond) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    const uint32_t b = DurationHistogram::Bucket(v);
    const uint64_t hi = DurationHistogram::BucketMax(b);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - v), static_cast<double>(v) / 32.0 + 1.0) << v;
    if (b > 0) {
      ASSERT_LT(DurationHistogram::BucketMax(b - 1), v) << v;  // buckets are ordered
    }
  }
  EXPECT_EQ(DurationHistogram::BucketMax(DurationHistogram::Bucket(UINT64_MAX)), UINT64_MAX);
}

TEST(DurationHistogram, QuantilesAreWithinTheBucketErrorOfTheExactOnes) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> d(10.0, 2.0);
  std::vector<uint64_t> values;
  DurationHistogram h;
  for (int i = 0; i < 50000; ++i) {
    auto v = static_cast<uint64_t>(d(rng));
    values.push_back(v);
    h.Add(v);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(h.count(), values.size());
  EXPECT_EQ(h.min(), values.front());
  EXPECT_EQ(h.max(), values.back());
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const auto rank = std::max<size_t>(1, static_cast<size_t>(std::ceil(q * values.size())));
    const uint64_t exact = values[rank - 1];
    const uint64_t got = h.Quantile(q);
    EXPECT_GE(got, exact) << q;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * (1 + 1.0 / 32) + 1) << q;
  }
}

TEST(DurationHistogram, OctavesCountEveryCallOnce) {
  DurationHistogram h;
  for (uint64_t v : {0, 1, 3, 1000, 1023, 1024, 5000}) h.Add(v);
  auto rows = h.Octaves();
  uint64_t total = 0;
  for (const auto& [k, n] : rows) total += n;
  EXPECT_EQ(total, 7u);
  ASSERT_GE(rows.size(), 5u);
  EXPECT_EQ(rows.front().first, -1);  // the zero-length call
  EXPECT_EQ(rows[3].first, 9);        // 1000 and 1023 in [512, 1024)
  EXPECT_EQ(rows[3].second, 2u);

  DurationHistogram other;
  other.Add(2);
  other.Merge(h);
  EXPECT_EQ(other.count(), 8u);
  EXPECT_EQ(other.max(), 5000u);
  EXPECT_EQ(other.min(), 0u);
}

}  // namespace
}  // namespace ptsnap::report
