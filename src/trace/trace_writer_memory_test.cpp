// The trace writer's memory does not grow with the streams and snapshots it
// lists (issue #18, the soak): what is listed lives on disk, and compacting
// manifest.journal into manifest.json streams it from there.
//
// The heap is measured by counting what operator new hands out and delete
// takes back (through malloc_usable_size, so the figure is the allocator's,
// also under ASan): this test binary replaces the global operator new and
// delete for that.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace {

std::atomic<int64_t> g_live_heap_bytes{0};

void* CountedAlloc(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  g_live_heap_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)),
                              std::memory_order_relaxed);
  return p;
}

void CountedFree(void* p) noexcept {
  if (p == nullptr) return;
  g_live_heap_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)),
                              std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

// The replaceable forms without alignment (those with one keep the
// library's own, which pairs them with its own delete). The nothrow news
// too: std::stable_sort's buffer comes from new(nothrow) and goes back
// through plain delete, which ASan reports as a mismatch unless both are ours.
void* operator new(size_t n) { return CountedAlloc(n); }
void* operator new[](size_t n) { return CountedAlloc(n); }
void* operator new(size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return CountedAlloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return CountedAlloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept { CountedFree(p); }
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept { CountedFree(p); }
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, size_t /*n*/) noexcept { CountedFree(p); }
void operator delete[](void* p, size_t /*n*/) noexcept { CountedFree(p); }

namespace ptsnap::trace {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

std::span<const std::byte> Span(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A snapshot of `per_snapshot` streams (as a sampling or hardware source
// writes them), then the snapshot itself: one Flush.
void RecordSnapshot(TraceWriter& w, uint32_t seq, uint32_t per_snapshot) {
  for (uint32_t i = 0; i < per_snapshot; ++i) {
    ASSERT_THAT(
        w.AddStreamUnlisted(
            Stream{.pid = 42, .tid = static_cast<int32_t>(1000 + i), .snapshot = seq, .size = 0},
            Span("PTDATA")),
        HasValue());
  }
  ASSERT_THAT(w.AddSnapshot(Snapshot{.seq = seq,
                                     .reason = SnapshotReason::kSignal,
                                     .detail = "SIGUSR2",
                                     .time = 1'000'000ull * seq,
                                     .tid = 1000}),
              HasValue());
}

TEST(TraceWriterMemoryTest, HeapDoesNotGrowWithTheStreamsListed) {
  // 20,000 stream files, each synced: on tmpfs when there is one, so that
  // the test takes seconds, not minutes, on a disk.
  std::unique_ptr<TempDir> tmp;
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    const char* before = std::getenv("TMPDIR");
    const std::string saved = before != nullptr ? before : "";
    ::setenv("TMPDIR", "/dev/shm", 1);
    tmp = std::make_unique<TempDir>();
    if (before != nullptr) {
      ::setenv("TMPDIR", saved.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  } else {
    tmp = std::make_unique<TempDir>();
  }
  const fs::path dir = tmp->path() / "t";
  Manifest initial;
  initial.source = Source::kEmulated;
  initial.command = {"/bin/true"};
  initial.pids = {42};

  constexpr uint32_t kPerSnapshot = 10;
  constexpr uint32_t kWarmup = 200;      // 2,000 streams: past the first compactions
  constexpr uint32_t kSnapshots = 2000;  // 20,000 streams in all
  int64_t at_warmup = 0, peak_after = 0;
  {
    auto w = TraceWriter::Create(dir, std::move(initial));
    ASSERT_THAT(w, HasValue());
    for (uint32_t seq = 1; seq <= kWarmup; ++seq) RecordSnapshot(*w, seq, kPerSnapshot);
    at_warmup = g_live_heap_bytes.load();
    for (uint32_t seq = kWarmup + 1; seq <= kSnapshots; ++seq) {
      RecordSnapshot(*w, seq, kPerSnapshot);
      if (::testing::Test::HasFatalFailure()) return;
      peak_after = std::max(peak_after, g_live_heap_bytes.load());
    }
    const int64_t at_end = g_live_heap_bytes.load();
    EXPECT_EQ(w->stream_count(), kSnapshots * kPerSnapshot);
    EXPECT_EQ(w->snapshot_count(), kSnapshots);
    std::printf(
        "live heap: %lld B after 2,000 streams, %lld B after 20,000 (peak between calls %lld B; "
        "%llu manifest bytes written)\n",
        static_cast<long long>(at_warmup), static_cast<long long>(at_end),
        static_cast<long long>(peak_after),
        static_cast<unsigned long long>(w->manifest_bytes_written()));
    // Keeping the 18,000 streams listed since would take over 5 MB (about
    // 300 B each, as before): the writer keeps none of them.
    EXPECT_LT(at_end - at_warmup, 16 << 10);
    EXPECT_LT(peak_after - at_warmup, 64 << 10);
    ASSERT_THAT(w->Finish(), HasValue());
  }
  // Everything listed is on disk, in order, once.
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  const Manifest& m = r->manifest();
  ASSERT_EQ(m.streams.size(), kSnapshots * kPerSnapshot);
  ASSERT_EQ(m.snapshots.size(), kSnapshots);
  for (uint32_t k = 0; k < m.streams.size(); ++k) {
    ASSERT_EQ(m.streams[k].id, k);
    ASSERT_EQ(m.streams[k].snapshot, k / kPerSnapshot + 1);
    ASSERT_EQ(m.streams[k].size, 6u);
  }
  for (uint32_t k = 0; k < m.snapshots.size(); ++k) ASSERT_EQ(m.snapshots[k].seq, k + 1);
  EXPECT_EQ(m.state, State::kComplete);
}

}  // namespace
}  // namespace ptsnap::trace
