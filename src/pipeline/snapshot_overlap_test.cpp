#include "pipeline/snapshot_overlap.h"

#include <gtest/gtest.h>

namespace ptsnap::pipeline {
namespace {

// Feeds one thread's event times; returns which were kept ('k'), skipped
// ('s') or kept after a gap ('g').
std::string Feed(SnapshotOverlap& f, std::initializer_list<uint64_t> times, int32_t tid = 7) {
  std::string out;
  for (uint64_t t : times) {
    const SnapshotOverlap::Verdict v = f.OnEvent(1, tid, t);
    out += v.skip ? 's' : v.gap ? 'g' : 'k';
  }
  return out;
}

TEST(SnapshotOverlap, OutsideSnapshotModeEverythingIsKept) {
  SnapshotOverlap f(false);
  f.BeginStream(false);
  EXPECT_EQ(Feed(f, {100, 200}), "kk");
  f.EndSegment();
  f.BeginStream(false);
  EXPECT_EQ(Feed(f, {0, 100, 200, 300}), "kkkk");
  EXPECT_EQ(f.skipped(), 0u);
}

TEST(SnapshotOverlap, ALaterSnapshotRepeatingTheEarlierOneIsSkippedUpToWhereItEnded) {
  SnapshotOverlap f(true);
  f.BeginStream(true);
  EXPECT_EQ(Feed(f, {100, 200, 300}), "kkk");
  f.EndSegment();
  f.BeginStream(true);
  // Time 0 (before the first timing packet), then the repeat up to 300, then new.
  EXPECT_EQ(Feed(f, {0, 200, 300, 301, 400}), "ssskk");
  EXPECT_EQ(f.skipped(), 3u);
  EXPECT_EQ(f.gaps(), 0u);
  // Another thread has no earlier snapshot: nothing of it is skipped.
  EXPECT_EQ(Feed(f, {50, 60}, 8), "kk");
}

TEST(SnapshotOverlap, AtTheCoveredTimeOnlyAsManyEventsAsWereDecodedThereAreSkipped) {
  SnapshotOverlap f(true);
  f.BeginStream(true);
  EXPECT_EQ(Feed(f, {100, 300, 300}), "kkk");  // the snapshot ends between two events at 300
  f.EndSegment();
  f.BeginStream(true);
  EXPECT_EQ(Feed(f, {300, 300, 300, 300}), "sskk");
  EXPECT_EQ(f.skipped(), 2u);
}

TEST(SnapshotOverlap, AStitchedSnapshotRepeatingNothingOpensAGapFromTheCoveredTime) {
  SnapshotOverlap f(true);
  f.BeginStream(true);
  EXPECT_EQ(Feed(f, {100, 200}), "kk");
  f.EndSegment();
  f.BeginStream(true);
  const SnapshotOverlap::Verdict v = f.OnEvent(1, 7, 5000);
  EXPECT_FALSE(v.skip);
  EXPECT_TRUE(v.gap);
  EXPECT_EQ(v.gap_from, 200u);
  EXPECT_EQ(Feed(f, {5001}), "k");  // only the stream's first new event
  EXPECT_EQ(f.gaps(), 1u);
  // Not stitched (per-CPU streams): no gap, though nothing repeats.
  f.EndSegment();
  f.BeginStream(false);
  EXPECT_EQ(Feed(f, {9000}), "k");
  EXPECT_EQ(f.gaps(), 1u);
}

TEST(SnapshotOverlap, TimeZeroIsKeptWhenNotStitched) {
  SnapshotOverlap f(true);
  f.BeginStream(false);
  EXPECT_EQ(Feed(f, {100}), "k");
  f.EndSegment();
  f.BeginStream(false);
  EXPECT_EQ(Feed(f, {0, 50, 150}), "ksk");
}

}  // namespace
}  // namespace ptsnap::pipeline
