#include "decode/event_times.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ptsnap::decode {
namespace {

// Queues an event of `kind` at `pos`; returns its index.
size_t Queue(EventTimes& t, uint64_t pos, BranchKind kind = BranchKind::kJump, bool gap = false,
             uint64_t lower = 0, bool tx = false) {
  t.Pend(pos, gap, lower, tx).kind = kind;
  return t.events().size() - 1;
}

std::vector<uint64_t> Times(EventTimes& t) {
  std::vector<uint64_t> out;
  for (const BranchEvent& e : t.events()) out.push_back(e.time);
  return out;
}

TEST(EventTimesTest, EventsBetweenTwoAnchorsArePlacedByTheirInstructions) {
  EventTimes t(/*hardware_clock=*/true, /*cycle_accurate=*/true, 0);
  EXPECT_FALSE(t.Anchor(0, 1000));
  Queue(t, 10);
  Queue(t, 30);
  Queue(t, 40);
  EXPECT_FALSE(t.Anchor(40, 1400));  // 400 ns over 40 instructions
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{1100, 1300, 1400}));
  t.Clear();
  // A later anchor earlier in time (a coarse packet) does not go back.
  Queue(t, 50);
  t.Anchor(60, 1200);
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{1400}));
}

TEST(EventTimesTest, WhereTracingStopsTheSegmentsRateSaysWhen) {
  EventTimes t(true, true, 0);
  t.Anchor(0, 0);
  t.Anchor(100, 1000);  // 10 ns per instruction
  t.Clear();
  Queue(t, 120);
  Queue(t, 150, BranchKind::kDisable, /*gap=*/true, /*lower=*/0);
  Queue(t, 160);  // after tracing resumed
  t.Anchor(200, 1'000'000);
  // Not spread over the millisecond away from the trace: the stop is where
  // 50 instructions at the measured rate lead, and what follows it is
  // placed between there and the next anchor.
  const std::vector<uint64_t> times = Times(t);
  EXPECT_EQ(times[0], 1200u);
  EXPECT_EQ(times[1], 1500u);
  EXPECT_EQ(times[2], 1500 + (1'000'000 - 1500) * 10 / 50);
  // The stop's lower bound wins where it is later.
  t.Clear();
  Queue(t, 250, BranchKind::kDisable, true, /*lower=*/5'000'000);
  t.Anchor(300, 9'000'000);
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{5'000'000}));
}

TEST(EventTimesTest, BeforeAnyRateIsMeasuredItIsOneInstructionPerCycleAtTheCbr) {
  EventTimes hw(true, true, 0);
  EXPECT_EQ(hw.Rate(), 0.0);  // no CBR: unknown
  hw.set_cbr(20);             // 2 GHz
  EXPECT_DOUBLE_EQ(hw.Rate(), 0.5);
  EventTimes emulated(false, true, 0);
  EXPECT_DOUBLE_EQ(emulated.Rate(), 1.0);  // the emulator's tick per instruction

  // Without an anchor after it, the stream's end extrapolates.
  hw.Anchor(0, 1000);
  Queue(hw, 100);
  Queue(hw, 400);
  hw.Place(0, /*have_next=*/false);
  EXPECT_EQ(Times(hw), (std::vector<uint64_t>{1050, 1200}));
}

TEST(EventTimesTest, ASegmentsRateIsItsOwn) {
  EventTimes t(true, true, 0);
  t.set_cbr(10);  // 1 ns per instruction before a measurement
  t.Anchor(0, 0);
  t.Anchor(100, 5000);  // 50 ns per instruction in the first segment
  EXPECT_DOUBLE_EQ(t.Rate(), 50.0);
  t.NewSegment();
  EXPECT_DOUBLE_EQ(t.Rate(), 1.0);
  t.Anchor(200, 6000);
  Queue(t, 300, BranchKind::kDisable, true, 0);
  t.Place(0, false);
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{6000 + 100 * 10}));
}

TEST(EventTimesTest, RestoreKeepsTheErrorsAndGoesBackToTheSavedAnchor) {
  EventTimes t(true, true, 0);
  t.set_cbr(10);
  t.Anchor(0, 1000);
  const EventTimes::Saved at_psb = t.Save();
  t.Anchor(100, 900'000);  // a damaged stretch's time
  Queue(t, 150);
  Queue(t, 160, BranchKind::kError, true, 0);
  t.Restore(at_psb, 170);
  ASSERT_EQ(t.events().size(), 1u);
  EXPECT_EQ(t.events()[0].kind, BranchKind::kError);
  EXPECT_EQ(t.anchor_time(), 1000u);
  EXPECT_DOUBLE_EQ(t.Rate(), 1.0);  // the damaged stretch measured nothing
  Queue(t, 180);
  t.Anchor(200, 2000);
  // The error (a stop) was kept, so the interval is no rate, and the events
  // are placed from the saved anchor at its instruction count.
  EXPECT_DOUBLE_EQ(t.Rate(), 1.0);
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{1000, 1500}));
}

TEST(EventTimesTest, AnAbortedTransactionsEventsGoACommittedOnesStay) {
  EventTimes t(false, true, 0);
  t.Anchor(0, 0);
  Queue(t, 10);
  Queue(t, 20, BranchKind::kJump, false, 0, /*tx=*/true);
  Queue(t, 30, BranchKind::kJump, false, 0, /*tx=*/true);
  t.DropTransaction();
  ASSERT_EQ(t.events().size(), 1u);
  Queue(t, 40, BranchKind::kJump, false, 0, /*tx=*/true);
  t.CommitTransaction();
  EXPECT_FALSE(t.Anchor(50, 50));  // nothing speculative is left
  EXPECT_EQ(Times(t), (std::vector<uint64_t>{10, 40}));
  t.Clear();
  Queue(t, 60, BranchKind::kJump, false, 0, /*tx=*/true);
  EXPECT_TRUE(t.Anchor(70, 70));
}

TEST(EventTimesTest, ATicksBranchLiesWithinOneMtcPeriodAfterIt) {
  EventTimes mtc(true, /*cycle_accurate=*/false, /*mtc_period_ns=*/100);
  mtc.Anchor(0, 0);
  mtc.Anchor(100, 1000);                      // 10 ns per instruction
  EXPECT_EQ(mtc.TickTime(1000, 130), 1099u);  // the rate leads to 1300: clamped
  EXPECT_EQ(mtc.TickTime(1000, 105), 1050u);
  EXPECT_EQ(mtc.TickTime(2000, 105), 2000u);
  EventTimes cyc(true, /*cycle_accurate=*/true, 100);
  cyc.Anchor(0, 0);
  EXPECT_EQ(cyc.TickTime(1000, 130), 1000u);  // CYC: the tick's own time
}

}  // namespace
}  // namespace ptsnap::decode
