#include "record/sample_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <cstring>

namespace ptsnap::record {
namespace {

// A perf record of `size` bytes (a multiple of 8) whose body is `tag`.
std::vector<std::byte> Rec(uint16_t size, uint8_t tag) {
  std::vector<std::byte> r(size, std::byte{tag});
  perf_event_header h{PERF_RECORD_SAMPLE, 0, size};
  std::memcpy(r.data(), &h, sizeof(h));
  return r;
}

// The tags of the records in `bytes`, walking their headers.
std::vector<int> Tags(const std::vector<std::byte>& bytes) {
  std::vector<int> tags;
  for (size_t off = 0; off + sizeof(perf_event_header) <= bytes.size();) {
    perf_event_header h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    EXPECT_EQ(h.type, PERF_RECORD_SAMPLE) << "torn record at " << off;
    if (h.size < sizeof(h) || off + h.size > bytes.size()) {
      ADD_FAILURE() << "record at " << off << " runs past the end";
      break;
    }
    tags.push_back(static_cast<int>(bytes[off + h.size - 1]));
    off += h.size;
  }
  return tags;
}

TEST(SampleRing, KeepsEverythingUntilFull) {
  SampleRing ring(100);
  ring.Push(Rec(32, 1));
  ring.Push(Rec(40, 2));
  EXPECT_EQ(ring.bytes(), 72u);
  EXPECT_FALSE(ring.wrapped());
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAre(1, 2));
}

TEST(SampleRing, DropsTheOldestWholeRecordsAndSaysSo) {
  SampleRing ring(100);
  for (uint8_t i = 1; i <= 7; ++i) ring.Push(Rec(24, i));
  // 4 records of 24 fit in 100 bytes; the three oldest went.
  EXPECT_EQ(ring.records(), 4u);
  EXPECT_EQ(ring.bytes(), 96u);
  EXPECT_TRUE(ring.wrapped());
  EXPECT_EQ(ring.dropped(), 3u);
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAre(4, 5, 6, 7));
}

TEST(SampleRing, RecordsStraddlingTheEndComeBackWhole) {
  SampleRing ring(64);
  ring.Push(Rec(40, 1));
  ring.Push(Rec(16, 2));
  ring.Push(Rec(32, 3));  // drops 1; written across the end of the buffer
  ring.Push(Rec(16, 4));
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAre(2, 3, 4));
  EXPECT_LE(ring.bytes(), ring.capacity());
}

TEST(SampleRing, ARecordLargerThanTheRingIsDroppedAlone) {
  SampleRing ring(32);
  ring.Push(Rec(24, 1));
  ring.Push(Rec(40, 2));
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAre(1));
  EXPECT_TRUE(ring.wrapped());
}

TEST(SampleRing, ACopyLeavesTheRingAsItWas) {
  SampleRing ring(64);
  ring.Push(Rec(24, 1));
  EXPECT_EQ(ring.Copy(), ring.Copy());
  ring.Push(Rec(24, 2));
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAre(1, 2));
}

TEST(SampleRing, MemoryGrowsWithTheSamplesNotTheSnapshotSize) {
  // 1,000 threads that hardly run must not cost 1,000 snapshot sizes
  // (64 MiB: 64 GiB before the ring grew on demand).
  SampleRing idle(size_t{64} << 20);
  idle.Push(Rec(600, 1));
  EXPECT_LE(idle.allocated(), size_t{64} << 10);
  EXPECT_EQ(idle.capacity(), size_t{64} << 20);

  // Growth keeps every record, in order, and stops at the capacity; the
  // ring then wraps as before.
  constexpr size_t kCap = 200000;
  SampleRing ring(kCap);
  for (int i = 0; i < 190; ++i) {
    ring.Push(Rec(1000, static_cast<uint8_t>(i)));
    EXPECT_LE(ring.allocated(), std::max<size_t>(2 * ring.bytes(), size_t{64} << 10));
  }
  EXPECT_FALSE(ring.wrapped());
  EXPECT_EQ(ring.records(), 190u);
  for (int i = 190; i < 450; ++i) ring.Push(Rec(1000, static_cast<uint8_t>(i)));
  EXPECT_EQ(ring.allocated(), kCap);
  EXPECT_TRUE(ring.wrapped());
  std::vector<int> want;
  for (int i = 250; i < 450; ++i) want.push_back(i % 256);
  EXPECT_THAT(Tags(ring.Copy()), ::testing::ElementsAreArray(want));
}

}  // namespace
}  // namespace ptsnap::record
