#include "flow/timing.h"

#include <gtest/gtest.h>

namespace ptsnap::flow {
namespace {

TEST(TimingTest, NoTimeBeforeTheFirstTsc) {
  Timing t;
  EXPECT_FALSE(t.have_tsc());
  TimingConfig c;
  EXPECT_EQ(t.Tsc(1000, true, c), 0);
  EXPECT_TRUE(t.have_tsc());
  EXPECT_EQ(t.tsc(), 1000u);
}

TEST(TimingTest, MtcAdvancesByCtcTicksAfterTma) {
  TimingConfig c;
  c.cpuid_15_eax = 1;
  c.cpuid_15_ebx = 100;  // 100 TSC ticks per CTC tick
  c.mtc_freq = 0;
  Timing t;
  ASSERT_EQ(t.Tsc(10000, true, c), 0);
  ASSERT_EQ(t.Tma(0x10, 5, c), 0);  // CTC 0x10, 5 TSC ticks since it
  ASSERT_EQ(t.Mtc(0x11, c), 0);     // one CTC tick later
  EXPECT_EQ(t.tsc(), 10000u - 5 + 100);
}

TEST(TimingTest, CycNeedsACalibration) {
  TimingConfig c;
  Timing t;
  ASSERT_EQ(t.Tsc(10000, true, c), 0);
  ASSERT_EQ(t.Cyc(50, c), 0);
  EXPECT_EQ(t.tsc(), 10000u);  // no ratio yet: the cycles are lost
  c.nom_freq = 2;
  ASSERT_EQ(t.Cbr(1, true, c), 0);  // fast counter = 2 x core cycles
  ASSERT_EQ(t.Cyc(50, c), 0);
  EXPECT_EQ(t.tsc(), 10100u);
}

}  // namespace
}  // namespace ptsnap::flow
