#include "decode/interpolate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace ptsnap::decode {
namespace {

// Every event of an interval placed by the carried quotient is where a
// division of its own puts it: intervals of one ns per instruction (the
// emulator's), fewer ns than instructions (hardware at more than one
// instruction per ns) and more, steps of 0 to far beyond c / a, and
// numbers past 32 bits, where it divides again.
TEST(InterpolatorTest, EqualsMulDivForEveryEvent) {
  std::mt19937_64 rng(14);
  uint64_t checked = 0;
  const std::vector<uint64_t> scales = {1, 3, 1000, 1ull << 31, 1ull << 33, 1ull << 40};
  for (int round = 0; round < 20000; ++round) {
    const uint64_t sa = scales[rng() % scales.size()];
    const uint64_t sc = scales[rng() % scales.size()];
    const uint64_t c = 1 + rng() % sc;
    const uint64_t a = round % 7 == 0 ? c : rng() % sa;
    Interpolator in(a, c);
    uint64_t b = 0;
    for (int k = 0; k < 40; ++k) {
      const uint64_t step = rng() % 4 == 0 ? rng() % (c + 1) : rng() % 8;
      b += step;
      ASSERT_EQ(in.At(b), MulDiv(a, b, c)) << "a=" << a << " b=" << b << " c=" << c;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 20000u * 40u);
}

TEST(InterpolatorTest, StepsBackwardsStartOver) {
  Interpolator in(7, 10);
  EXPECT_EQ(in.At(9), 6u);
  EXPECT_EQ(in.At(3), 2u);
  EXPECT_EQ(in.At(3), 2u);
  EXPECT_EQ(in.At(10), 7u);
}

}  // namespace
}  // namespace ptsnap::decode
