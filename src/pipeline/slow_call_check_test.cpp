#include "pipeline/slow_call_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/parallel.h"
#include "pipeline/snapshot_markers.h"

namespace ptsnap::pipeline {
namespace {

using ::testing::ElementsAre;

trace::Snapshot SlowCall(uint32_t seq, uint32_t tid, uint64_t begin, uint64_t ns) {
  return {.seq = seq,
          .reason = trace::SnapshotReason::kSlowCall,
          .detail = "handle",
          .time = begin + ns,
          .tid = tid,
          .call_begin = begin,
          .call_ns = ns};
}

TEST(SlowCallCheck, WarnsWhereTheSnapshotBeganAfterTheCall) {
  const std::vector<trace::Snapshot> snaps = {
      SlowCall(1, 7, 4'711'000'000'000, 5'000'000),
      SlowCall(2, 7, 4'800'000'000'000, 1'000),
      {.seq = 3, .reason = trace::SnapshotReason::kTrigger, .time = 5'000'000'000'000}};
  SlowCallCheck check(snaps);
  check.Watch(1);
  check.OnEvent(8, 4'710'000'000'000);  // another thread: not looked at
  check.OnEvent(7, 0);                  // before the first timing packet: not looked at
  check.OnEvent(7, 4'711'000'123'456);
  check.OnEvent(7, 4'711'000'200'000);
  check.Watch(2);
  check.OnEvent(7, 4'799'999'999'000);  // the ring reached back before the call
  check.Watch(3);                       // no slow call: nothing watched
  check.OnEvent(7, 1);
  EXPECT_EQ(check.FirstSeen(1), 4'711'000'123'456u);
  EXPECT_EQ(check.FirstSeen(2), 4'799'999'999'000u);
  EXPECT_EQ(check.FirstSeen(3), UINT64_MAX);
  EXPECT_THAT(check.Warnings(1 << 20),
              ElementsAre("snapshot 1: the slow call began at 4711.000000000 s, the snapshot "
                          "starts at 4711.000123456 s (123.456 us later): the call's start is not "
                          "in the trace; use a bigger --snapshot-size (this recording's: 1 MiB per "
                          "thread)"));
}

TEST(SnapshotMarkers, EndMarkerNamesTheSnapshotTheMarkAndWhatTheRingLost) {
  trace::Snapshot sn = SlowCall(4, 7, 1'000'000, 2'000'000);
  EXPECT_EQ(SnapshotEndMarker(sn, "", UINT64_MAX), "[snapshot 4: slow-call handle]");
  EXPECT_EQ(SnapshotEndMarker(sn, "[mark 0x2a]", 1'000'000),
            "[snapshot 4: slow-call handle; mark in force [mark 0x2a]]");
  EXPECT_EQ(SnapshotEndMarker(sn, "", 1'250'000),
            "[snapshot 4: slow-call handle; it began 250.000 us before the snapshot starts: use "
            "a bigger --snapshot-size]");
  const trace::Snapshot trigger = {.seq = 2, .reason = trace::SnapshotReason::kTrigger};
  // Only a slow call's snapshot names the mark.
  EXPECT_EQ(SnapshotEndMarker(trigger, "[mark 0x2a]", UINT64_MAX), "[snapshot 2: trigger]");
}

TEST(SnapshotMarkers, SignalMarkerEndsTheKilledThreadOnly) {
  trace::Snapshot sn = {
      .seq = 1, .reason = trace::SnapshotReason::kFatalSignal, .detail = "SIGSEGV", .tid = 12};
  EXPECT_EQ(SignalMarker(sn, 10, 12), "[signal SIGSEGV]");
  EXPECT_EQ(SignalMarker(sn, 10, 10), "");
  sn.tid = 0;  // unknown: the main thread
  EXPECT_EQ(SignalMarker(sn, 10, 10), "[signal SIGSEGV]");
  EXPECT_EQ(SignalMarker(sn, 10, 12), "");
  sn.reason = trace::SnapshotReason::kExit;
  EXPECT_EQ(SignalMarker(sn, 10, 10), "");
}

TEST(PlanThreads, OneMoreThreadWhereItGains) {
  const ThreadPlan one = PlanThreads(1, "fxt", "out.fxt");
  EXPECT_FALSE(one.decode_thread || one.writer_thread);
  EXPECT_EQ(one.deflate_threads, 0u);
  EXPECT_TRUE(PlanThreads(2, "fxt", "out.fxt").decode_thread);
  EXPECT_TRUE(PlanThreads(2, "", "").decode_thread);  // a caller's sink only
  const ThreadPlan json = PlanThreads(4, "json", "out.json");
  EXPECT_TRUE(json.writer_thread);
  EXPECT_FALSE(json.decode_thread);
  const ThreadPlan gz2 = PlanThreads(2, "fxt", "out.fxt.gz");
  EXPECT_EQ(gz2.deflate_threads, 1u);
  EXPECT_FALSE(gz2.decode_thread || gz2.writer_thread);
  EXPECT_EQ(PlanThreads(8, "json", "out.json.gz").deflate_threads, 7u);
  EXPECT_FALSE(PlanThreads(8, "json", "out.json.gz").writer_thread);
}

}  // namespace
}  // namespace ptsnap::pipeline
