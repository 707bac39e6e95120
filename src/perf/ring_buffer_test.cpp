#include "perf/ring_buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "tests/support/result_matchers.h"

namespace ptsnap::perf {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasValue;

// A fake kernel writing into a heap ring the way ring_buffer.c does.
struct FakeRing {
  explicit FakeRing(size_t size) : data(size) { header = std::make_unique<perf_event_mmap_page>(); }
  std::unique_ptr<perf_event_mmap_page> header;
  std::vector<std::byte> data;

  // Writes a record of `type` whose body is `body_size` bytes of `fill`.
  void Write(uint32_t type, size_t body_size, uint8_t fill) {
    std::vector<std::byte> rec(sizeof(perf_event_header) + body_size, std::byte{fill});
    perf_event_header h{type, 0, static_cast<uint16_t>(rec.size())};
    std::memcpy(rec.data(), &h, sizeof(h));
    WriteRaw(rec);
  }
  void WriteRaw(const std::vector<std::byte>& rec) {
    uint64_t head = header->data_head;
    for (size_t i = 0; i < rec.size(); ++i) data[(head + i) % data.size()] = rec[i];
    header->data_head = head + rec.size();
  }
};

struct Seen {
  uint32_t type;
  size_t size;
  uint8_t first_body_byte;
};

std::vector<Seen> DrainAll(DataRingReader& r, size_t* count = nullptr) {
  std::vector<Seen> seen;
  auto n = r.Drain([&](std::span<const std::byte> rec) {
    perf_event_header h;
    std::memcpy(&h, rec.data(), sizeof(h));
    seen.push_back(
        {h.type, rec.size(),
         rec.size() > sizeof(h) ? std::to_integer<uint8_t>(rec[sizeof(h)]) : uint8_t{0}});
  });
  EXPECT_THAT(n, HasValue());
  if (count != nullptr && n) *count = *n;
  return seen;
}

TEST(DataRingReader, ReadsRecordsAndAdvancesTail) {
  FakeRing ring(256);
  ring.Write(PERF_RECORD_COMM, 24, 0xaa);
  ring.Write(PERF_RECORD_EXIT, 40, 0xbb);
  DataRingReader reader(ring.header.get(), ring.data);
  EXPECT_EQ(reader.Pending(), 32u + 48u);
  auto seen = DrainAll(reader);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].type, PERF_RECORD_COMM);
  EXPECT_EQ(seen[0].size, 32u);
  EXPECT_EQ(seen[0].first_body_byte, 0xaa);
  EXPECT_EQ(seen[1].type, PERF_RECORD_EXIT);
  EXPECT_EQ(ring.header->data_tail, 80u);
  EXPECT_EQ(reader.Pending(), 0u);
  EXPECT_TRUE(DrainAll(reader).empty());
}

TEST(DataRingReader, RecordStraddlingTheWrapIsContiguous) {
  FakeRing ring(128);
  DataRingReader reader(ring.header.get(), ring.data);
  ring.Write(PERF_RECORD_MMAP2, 88, 0x11);  // 96 bytes
  ASSERT_EQ(DrainAll(reader).size(), 1u);
  // Next record starts at 96 and runs to 96+64 = 160 > 128: it straddles.
  std::vector<std::byte> rec(64);
  perf_event_header h{PERF_RECORD_MMAP2, 0, 64};
  std::memcpy(rec.data(), &h, sizeof(h));
  for (size_t i = 8; i < rec.size(); ++i) rec[i] = std::byte(i);
  ring.WriteRaw(rec);
  std::vector<std::byte> got;
  auto n = reader.Drain([&](std::span<const std::byte> r) { got.assign(r.begin(), r.end()); });
  ASSERT_THAT(n, HasValue());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(got, rec);
  EXPECT_EQ(ring.header->data_tail, 160u);
}

TEST(DataRingReader, ManyLapsKeepOrder) {
  FakeRing ring(64);
  DataRingReader reader(ring.header.get(), ring.data);
  for (int lap = 0; lap < 20; ++lap) {
    ring.Write(PERF_RECORD_COMM, 16, static_cast<uint8_t>(lap));
    ring.Write(PERF_RECORD_FORK, 8, static_cast<uint8_t>(lap + 100));
    auto seen = DrainAll(reader);
    ASSERT_EQ(seen.size(), 2u) << "lap " << lap;
    EXPECT_EQ(seen[0].first_body_byte, lap);
    EXPECT_EQ(seen[1].first_body_byte, lap + 100);
  }
  EXPECT_EQ(ring.header->data_tail, 20u * 40u);
}

TEST(DataRingReader, CorruptSizeIsAnErrorAndDropsTheRest) {
  FakeRing ring(128);
  std::vector<std::byte> rec(16);
  perf_event_header h{PERF_RECORD_COMM, 0, 4};  // smaller than a header
  std::memcpy(rec.data(), &h, sizeof(h));
  ring.WriteRaw(rec);
  DataRingReader reader(ring.header.get(), ring.data);
  EXPECT_THAT(reader.Drain([](auto) {}), HasError());
  EXPECT_EQ(ring.header->data_tail, ring.header->data_head);
}

std::vector<std::byte> AuxRecord(uint64_t offset, uint64_t size, uint64_t flags) {
  std::vector<std::byte> rec(8 + 24);
  perf_event_header h{PERF_RECORD_AUX, 0, 32};
  std::memcpy(rec.data(), &h, 8);
  std::memcpy(rec.data() + 8, &offset, 8);
  std::memcpy(rec.data() + 16, &size, 8);
  std::memcpy(rec.data() + 24, &flags, 8);
  return rec;
}

TEST(AccountRecord, TruncatedAuxAsksForReenable) {
  RingStats stats;
  EXPECT_TRUE(AccountRecord(AuxRecord(0, 4096, PERF_AUX_FLAG_TRUNCATED), stats));
  EXPECT_FALSE(AccountRecord(AuxRecord(4096, 4096, 0), stats));
  EXPECT_FALSE(AccountRecord(AuxRecord(8192, 10, PERF_AUX_FLAG_PARTIAL), stats));
  EXPECT_EQ(stats.aux_records, 3u);
  EXPECT_EQ(stats.aux_truncated, 1u);
  EXPECT_EQ(stats.aux_partial, 1u);
}

TEST(AccountRecord, LostRecordsAreSummed) {
  RingStats stats;
  for (uint64_t lost : {5u, 7u}) {
    std::vector<std::byte> rec(8 + 16);
    perf_event_header h{PERF_RECORD_LOST, 0, 24};
    uint64_t id = 1;
    std::memcpy(rec.data(), &h, 8);
    std::memcpy(rec.data() + 8, &id, 8);
    std::memcpy(rec.data() + 16, &lost, 8);
    EXPECT_FALSE(AccountRecord(rec, stats));
  }
  EXPECT_EQ(stats.lost_records, 12u);
  EXPECT_EQ(stats.lost_events, 2u);
  EXPECT_FALSE(AccountRecord(std::vector<std::byte>(4), stats));  // too short: ignored
}

TEST(DataRingReader, TruncatedAndLostThroughTheRing) {
  FakeRing ring(256);
  ring.WriteRaw(AuxRecord(0, 100, PERF_AUX_FLAG_TRUNCATED));
  std::vector<std::byte> lost(24);
  perf_event_header h{PERF_RECORD_LOST, 0, 24};
  uint64_t n = 3;
  std::memcpy(lost.data(), &h, 8);
  std::memcpy(lost.data() + 16, &n, 8);
  ring.WriteRaw(lost);
  DataRingReader reader(ring.header.get(), ring.data);
  RingStats stats;
  int reenable = 0;
  ASSERT_THAT(
      reader.Drain([&](std::span<const std::byte> r) { reenable += AccountRecord(r, stats); }),
      HasValue());
  EXPECT_EQ(reenable, 1);
  EXPECT_EQ(stats.lost_records, 3u);
}

// AUX snapshot mode.
struct FakeAux {
  explicit FakeAux(size_t size) : data(size) { header = std::make_unique<perf_event_mmap_page>(); }
  std::unique_ptr<perf_event_mmap_page> header;
  std::vector<std::byte> data;
  uint64_t written = 0;  // total bytes the "hardware" wrote
  // Hardware writes `n` bytes valued by position, in overwrite mode.
  void Produce(size_t n) {
    for (size_t i = 0; i < n; ++i, ++written)
      data[written % data.size()] = std::byte(static_cast<uint8_t>(written % 251 + 1));
    header->aux_head = written % data.size();  // an offset, as pt.c publishes on stop
  }
};

TEST(AuxSnapshotReader, UnwrappedCopiesFromZeroToHead) {
  FakeAux aux(16384);
  aux.Produce(1000);
  AuxSnapshotReader reader(aux.header.get(), aux.data);
  AuxSnapshot snap = reader.Copy();
  EXPECT_FALSE(snap.wrapped);
  ASSERT_EQ(snap.bytes.size(), 1000u);
  EXPECT_EQ(snap.bytes[0], std::byte{1});
  EXPECT_EQ(snap.bytes[999], std::byte(static_cast<uint8_t>(999 % 251 + 1)));
}

TEST(AuxSnapshotReader, WrappedCopiesOldestFirstAndStaysWrapped) {
  FakeAux aux(16384);
  aux.Produce(16384 + 5000);
  AuxSnapshotReader reader(aux.header.get(), aux.data);
  AuxSnapshot snap = reader.Copy();
  EXPECT_TRUE(snap.wrapped);
  ASSERT_EQ(snap.bytes.size(), 16384u);
  // The oldest byte is the one written 16384 bytes before the newest.
  for (size_t i = 0; i < snap.bytes.size(); i += 997) {
    uint64_t pos = 5000 + i;
    EXPECT_EQ(snap.bytes[i], std::byte(static_cast<uint8_t>(pos % 251 + 1))) << i;
  }
  EXPECT_EQ(snap.bytes.back(), std::byte(static_cast<uint8_t>((16384 + 4999) % 251 + 1)));
  // Sticky: even if the last page is zeroed later, the reader knows it wrapped.
  std::fill(aux.data.end() - 4096, aux.data.end(), std::byte{0});
  EXPECT_TRUE(reader.Copy().wrapped);
}

TEST(AuxSnapshotReader, HeadExactlyAtEndIsWrapDetectedByContent) {
  FakeAux aux(8192);
  aux.Produce(8192);  // head back to offset 0, last page full
  AuxSnapshotReader reader(aux.header.get(), aux.data);
  AuxSnapshot snap = reader.Copy();
  EXPECT_TRUE(snap.wrapped);
  EXPECT_EQ(snap.bytes.size(), 8192u);
  EXPECT_EQ(snap.bytes[0], std::byte{1});
}

// Full-execution mode.
TEST(AuxFullReader, DrainsAcrossTheWrapAndAdvancesTail) {
  FakeAux aux(8192);
  AuxFullReader reader(aux.header.get(), aux.data);
  std::vector<std::byte> out;
  auto sink = [&](std::span<const std::byte> c) { out.insert(out.end(), c.begin(), c.end()); };
  auto produce = [&](size_t n) {  // full mode: aux_head is monotonic
    for (size_t i = 0; i < n; ++i, ++aux.written)
      aux.data[aux.written % aux.data.size()] = std::byte(static_cast<uint8_t>(aux.written % 251));
    aux.header->aux_head = aux.written;
  };
  produce(6000);
  EXPECT_EQ(reader.Drain(sink), 6000u);
  EXPECT_EQ(aux.header->aux_tail, 6000u);
  produce(5000);  // 6000..11000 straddles 8192
  int chunks = 0;
  EXPECT_EQ(reader.Drain([&](std::span<const std::byte> c) {
    ++chunks;
    sink(c);
  }),
            5000u);
  EXPECT_EQ(chunks, 2);
  EXPECT_EQ(aux.header->aux_tail, 11000u);
  ASSERT_EQ(out.size(), 11000u);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], std::byte(static_cast<uint8_t>(i % 251))) << i;
  EXPECT_EQ(reader.Drain(sink), 0u);
  EXPECT_EQ(reader.overrun_bytes(), 0u);
}

TEST(AuxFullReader, MoreThanOneBufferPendingKeepsTheNewestAndCountsTheRest) {
  FakeAux aux(8192);
  AuxFullReader reader(aux.header.get(), aux.data);
  for (size_t i = 0; i < 10000; ++i, ++aux.written)
    aux.data[aux.written % aux.data.size()] = std::byte(static_cast<uint8_t>(aux.written % 251));
  aux.header->aux_head = aux.written;
  std::vector<std::byte> out;
  EXPECT_EQ(reader.Drain(
                [&](std::span<const std::byte> c) { out.insert(out.end(), c.begin(), c.end()); }),
            8192u);
  EXPECT_EQ(reader.overrun_bytes(), 10000u - 8192u);
  ASSERT_EQ(out.size(), 8192u);
  EXPECT_EQ(out[0], std::byte(static_cast<uint8_t>((10000 - 8192) % 251)));
  EXPECT_EQ(aux.header->aux_tail, 10000u);
}

}  // namespace
}  // namespace ptsnap::perf
