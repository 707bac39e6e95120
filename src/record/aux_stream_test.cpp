// AuxStreamer on heap memory: full-execution AUX data reaches the stream file
// at every drain (not at the end), across the ring's wrap, and the loss
// figures (truncated, lost_bytes) reach the manifest.
#include "record/aux_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

// The "hardware" of a full-mode AUX area: aux_head grows monotonically.
struct FullAux {
  explicit FullAux(size_t size) : data(size), header(std::make_unique<perf_event_mmap_page>()) {}
  std::vector<std::byte> data;
  std::unique_ptr<perf_event_mmap_page> header;
  uint64_t written = 0;
  static std::byte At(uint64_t pos) { return std::byte(static_cast<uint8_t>(pos % 253)); }
  void Produce(size_t n) {
    for (size_t i = 0; i < n; ++i, ++written) data[written % data.size()] = At(written);
    header->aux_head = written;
  }
};

trace::Manifest Initial() {
  trace::Manifest m;
  m.mode = trace::Mode::kFull;
  return m;
}

uint64_t FileSize(const std::filesystem::path& p) {
  std::error_code ec;
  auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : n;
}

TEST(AuxStreamer, EveryDrainLandsInTheStreamFile) {
  TempDir tmp;
  auto w = trace::TraceWriter::Create(tmp.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  FullAux aux(16384);
  trace::Stream info;
  info.cpu = 3;
  AuxStreamer s(aux.header.get(), aux.data, info);

  // Nothing produced: no empty stream appears.
  ASSERT_THAT(s.Drain(*w), HasValue());
  EXPECT_TRUE(w->manifest().streams.empty());

  aux.Produce(10000);
  auto n = s.Drain(*w);
  ASSERT_THAT(n, HasValue());
  EXPECT_EQ(*n, 10000u);
  ASSERT_EQ(w->manifest().streams.size(), 1u);
  const std::filesystem::path file = tmp.path() / "t" / w->manifest().streams[0].file;
  // On disk already, while recording; aux_tail released to the kernel.
  EXPECT_EQ(FileSize(file), 10000u);
  EXPECT_EQ(aux.header->aux_tail, 10000u);

  // Three more laps' worth, drained in pieces across the wrap: the file
  // grows, memory does not (the ring is the only buffer).
  for (int i = 0; i < 6; ++i) {
    aux.Produce(9000);
    ASSERT_THAT(s.Drain(*w), HasValue());
    EXPECT_EQ(FileSize(file), 10000u + 9000u * static_cast<uint64_t>(i + 1));
  }
  EXPECT_EQ(s.bytes(), 64000u);
  EXPECT_EQ(w->manifest().streams[0].size, 64000u);
  EXPECT_EQ(w->manifest().streams[0].cpu, 3);
  EXPECT_EQ(w->manifest().streams[0].tid, -1);
  EXPECT_EQ(w->manifest().streams[0].lost_bytes, 0u);
  ASSERT_THAT(w->Finish(), HasValue());

  auto r = trace::TraceReader::Open(tmp.path() / "t");
  ASSERT_THAT(r, HasValue());
  auto bytes = r->ReadStream(r->manifest().streams[0]);
  ASSERT_THAT(bytes, HasValue());
  ASSERT_EQ(bytes->size(), 64000u);
  for (size_t i = 0; i < bytes->size(); ++i)
    ASSERT_EQ(static_cast<std::byte>((*bytes)[i]), FullAux::At(i)) << i;
}

TEST(AuxStreamer, TruncatedAndSkippedBytesReachTheManifest) {
  TempDir tmp;
  auto w = trace::TraceWriter::Create(tmp.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  FullAux aux(8192);
  trace::Stream info;
  info.pid = 42;
  info.tid = 43;
  AuxStreamer s(aux.header.get(), aux.data, info);

  // The buffer filled: the kernel wrote 8192 bytes, flagged TRUNCATED and
  // stopped PT until ptsnap drains and re-enables it.
  aux.Produce(8192);
  s.NoteAux(trace::Aux{0, 8192, PERF_AUX_FLAG_TRUNCATED}, *w);
  ASSERT_THAT(s.Drain(*w), HasValue());
  ASSERT_EQ(w->manifest().streams.size(), 1u);
  EXPECT_EQ(w->manifest().streams[0].truncated, 1u);
  EXPECT_EQ(w->manifest().streams[0].lost_bytes, 0u);

  // The next chunk starts 100 bytes later than the last one ended: skipped.
  aux.Produce(100);
  aux.Produce(1000);
  s.NoteAux(trace::Aux{8292, 1000, 0}, *w);
  // More than a buffer pending at once: only the newest 8192 bytes exist.
  aux.Produce(9000);
  ASSERT_THAT(s.Drain(*w), HasValue());
  EXPECT_EQ(s.truncated(), 1u);
  EXPECT_EQ(s.lost_bytes(), 100u + (1100u + 9000u - 8192u));
  EXPECT_EQ(w->manifest().streams[0].lost_bytes, s.lost_bytes());
  EXPECT_EQ(w->manifest().streams[0].size, 8192u + 8192u);
  EXPECT_EQ(w->manifest().streams[0].tid, 43);

  // Survives the manifest round trip.
  ASSERT_THAT(w->Finish(), HasValue());
  auto r = trace::TraceReader::Open(tmp.path() / "t");
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->manifest().streams[0].truncated, 1u);
  EXPECT_EQ(r->manifest().streams[0].lost_bytes, s.lost_bytes());
}

// The disk fills during a drain: the chunk the disk cannot take whole is
// written a page at a time, so the stream keeps every byte there was room
// for (before, the whole drain was dropped: up to a full AUX buffer of
// trace). Drain reports the full disk; lost_bytes counts only what did not
// fit; the file holds the bytes in order and matches the manifest.
TEST(AuxStreamer, AFullDiskKeepsTheBytesThatFit) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir tmp;
  const ::ptsnap::testing::SmallTmpfs small(tmp.path() / "small", "1m");
  ASSERT_TRUE(small.mounted()) << "mount -t tmpfs failed as root";
  auto w = trace::TraceWriter::Create(small.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  FullAux aux(512 << 10);
  AuxStreamer s(aux.header.get(), aux.data, trace::Stream{});

  aux.Produce(400 << 10);
  ASSERT_THAT(s.Drain(*w), HasValue());
  // The 1 MiB less the 256 KiB .reserve and this 400 KiB leave less room
  // than the next 400 KiB.
  aux.Produce(400 << 10);
  auto full = s.Drain(*w);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().errnum(), ENOSPC) << full.error().ToString();
  const uint64_t kept = w->manifest().streams[0].size;
  EXPECT_GT(kept, (400u << 10) + (256u << 10)) << "the second drain's bytes that fit";
  EXPECT_LT(kept, 800u << 10);
  EXPECT_EQ(s.bytes(), kept);
  EXPECT_EQ(s.lost_bytes(), (800u << 10) - kept);
  EXPECT_EQ(w->manifest().streams[0].lost_bytes, s.lost_bytes());

  ASSERT_THAT(w->Finish(trace::State::kInterrupted, "disk full"), HasValue());
  auto r = trace::TraceReader::Open(small.path() / "t");
  ASSERT_THAT(r, HasValue());
  auto bytes = r->ReadStream(r->manifest().streams[0]);
  ASSERT_THAT(bytes, HasValue());
  ASSERT_EQ(bytes->size(), kept);
  for (size_t i = 0; i < bytes->size(); ++i)
    ASSERT_EQ(static_cast<std::byte>((*bytes)[i]), FullAux::At(i)) << i;
}

}  // namespace
}  // namespace ptsnap::record
