#include "record/slow_calls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include "base/file_util.h"
#include "ptsnap/stop_indicator.h"
#include "record/options.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;

ProbeHit Entry(uint32_t tid, uint64_t time, uint64_t sp = 0) { return {false, 1, tid, time, sp}; }
ProbeHit Return(uint32_t tid, uint64_t time, uint64_t sp = 0) { return {true, 1, tid, time, sp}; }

TEST(SlowCallTracker, ThresholdIsInclusive) {
  SlowCallTracker t(1000, false);
  EXPECT_FALSE(t.Feed(Entry(7, 100)));
  EXPECT_FALSE(t.Feed(Return(7, 1099)));  // 999 ns: below
  EXPECT_FALSE(t.Feed(Entry(7, 2000)));
  auto at = t.Feed(Return(7, 3000));  // exactly 1000 ns: slow
  ASSERT_TRUE(at);
  EXPECT_EQ(at->tid, 7u);
  EXPECT_EQ(at->begin, 2000u);
  EXPECT_EQ(at->end, 3000u);
  EXPECT_FALSE(t.Feed(Entry(7, 4000)));
  EXPECT_TRUE(t.Feed(Return(7, 9000)));  // above
  EXPECT_EQ(t.calls(), 3u);
}

TEST(SlowCallTracker, RecursionPairsInnermostFirst) {
  SlowCallTracker t(500, false);
  t.Feed(Entry(1, 0));
  t.Feed(Entry(1, 100));
  EXPECT_FALSE(t.Feed(Return(1, 200)));  // the inner call: 100 ns
  EXPECT_EQ(t.depth(1), 1u);
  auto outer = t.Feed(Return(1, 1000));
  ASSERT_TRUE(outer);
  EXPECT_EQ(outer->begin, 0u);
  EXPECT_EQ(t.depth(1), 0u);
}

TEST(SlowCallTracker, ThreadsArePairedSeparately) {
  SlowCallTracker t(500, false);
  t.Feed(Entry(1, 0));
  t.Feed(Entry(2, 10));
  EXPECT_FALSE(t.Feed(Return(2, 100)));  // thread 2's own call: 90 ns
  auto slow = t.Feed(Return(1, 600));
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->tid, 1u);
  EXPECT_EQ(slow->begin, 0u);
}

TEST(SlowCallTracker, AReturnWithoutEntryIsCountedAndIgnored) {
  SlowCallTracker t(1, false);
  EXPECT_FALSE(t.Feed(Return(3, 100)));
  EXPECT_EQ(t.unmatched_returns(), 1u);
  EXPECT_EQ(t.calls(), 0u);
}

TEST(SlowCallTracker, AnEntryReadBeforeAnEarlierReturnStaysOpen) {
  // Entry 1.0, (its return at 2.0 not read yet), entry 3.0 read, then the
  // return at 2.0 and the one at 4.0.
  SlowCallTracker t(1, false);
  t.Feed(Entry(1, 1000));
  t.Feed(Entry(1, 3000));
  auto first = t.Feed(Return(1, 2000));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->begin, 1000u);
  auto second = t.Feed(Return(1, 4000));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->begin, 3000u);
}

TEST(SlowCallTracker, StackPointersDropFramesThatWereUnwound) {
  // The outer call (sp 0x1000) calls itself (sp 0xf00), which longjmps out;
  // the outer one returns with sp 0x1008.
  SlowCallTracker t(1, false);
  t.Feed(Entry(1, 0, 0x1000));
  t.Feed(Entry(1, 10, 0xf00));
  auto r = t.Feed(Return(1, 100, 0x1008));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->begin, 0u);
  EXPECT_EQ(t.unwound(), 1u);
  EXPECT_EQ(t.depth(1), 0u);
}

TEST(SlowCallTracker, RateLimitSkipsSlowCallsWithinTheGapPerThread) {
  const uint64_t gap = SlowCallGapNs(1000);  // 10 ms
  SlowCallTracker t(1000, true);
  t.Feed(Entry(1, 0));
  EXPECT_TRUE(t.Feed(Return(1, 5000)));
  t.Feed(Entry(1, 6000));
  EXPECT_FALSE(t.Feed(Return(1, 8000)));  // within the gap: skipped
  EXPECT_EQ(t.skipped(), 1u);
  t.Feed(Entry(2, 6000));
  EXPECT_TRUE(t.Feed(Return(2, 8000)));  // another thread: its own limit
  t.Feed(Entry(1, gap));
  auto later = t.Feed(Return(1, gap + 5000));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->skipped_before, 1u);
}

TEST(FileOffsetOf, MapsAnAddressThroughItsLoadSegment) {
  // The test binary itself: a function's link-time address maps into the
  // file where its bytes are.
  auto head = base::ReadFileHead("/proc/self/exe", 1 << 20);
  ASSERT_TRUE(head);
  auto off = FileOffsetOf(*head, 0);
  // Address 0 is in the first PT_LOAD of a PIE (vaddr 0, offset 0).
  if (off) {
    EXPECT_EQ(*off, 0u);
  }
  EXPECT_THAT(FileOffsetOf(*head, ~uint64_t{0} - 16), HasErrorContaining("no loadable segment"));
  EXPECT_FALSE(FileOffsetOf("not an elf", 0));
}

TEST(ResolveProbeTarget, FindsAFunctionOfTheExecutableAtItsFileOffset) {
  auto t = ResolveProbeTarget("main", ::getpid());
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(t->symbol, "main");
  EXPECT_GT(t->offset, 0u);
  EXPECT_THAT(ResolveProbeTarget("no_such_function_here", ::getpid()),
              HasErrorContaining("no function named 'no_such_function_here'"));
}

TEST(ResolveProbeTarget, FindsAFunctionOfAMappedLibrary) {
  auto t = ResolveProbeTarget("getpid", ::getpid());
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_THAT(t->file.string(), ::testing::HasSubstr("libc"));
}

// The header's in-app form compiles as C++ and snapshots only when slow.
TEST(StopIndicator, TakeSnapshotIfSlowerNeedsAMarkAndTheDuration) {
  EXPECT_EQ(ptsnap_take_snapshot_if_slower(0), 0);  // no mark on this thread yet
  ptsnap_mark_start();
  EXPECT_EQ(ptsnap_take_snapshot_if_slower(uint64_t{3600} * 1'000'000'000), 0);
  EXPECT_EQ(ptsnap_take_snapshot_if_slower(0), 1);
}

}  // namespace
}  // namespace ptsnap::record
