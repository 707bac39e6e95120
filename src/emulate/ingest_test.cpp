#include "emulate/ingest.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/file_util.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/jit_code.h"
#include "trace/trace_dir.h"

namespace ptsnap::emulate {
namespace {

using ::ptsnap::testing::TempDir;

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(work());
    trace::Manifest m;
    m.source = trace::Source::kEmulated;
    auto w = trace::TraceWriter::Create(tmp_.path() / "trace", m);
    ASSERT_TRUE(w) << w.error().ToString();
    writer_.emplace(std::move(*w));
  }
  [[nodiscard]] std::filesystem::path work() const { return tmp_.path() / "work"; }
  void Append(const std::string& log, std::string_view text) const {
    std::ofstream(work() / log, std::ios::app) << text;
  }
  void Pt(const std::string& name, std::string_view bytes) const {
    std::ofstream(work() / name) << bytes;
  }
  trace::Manifest Reread() const {
    auto r = trace::TraceReader::Open(tmp_.path() / "trace");
    EXPECT_TRUE(r) << r.error().ToString();
    return r ? r->manifest() : trace::Manifest{};
  }

  TempDir tmp_;
  std::optional<trace::TraceWriter> writer_;
};

// The plugin's JIT code capture moves into the trace directory's jit/ as
// soon as it appears, and what the plugin appends after the move (through
// its open descriptor) lands there too.
TEST_F(IngestTest, JitCodeMovesIntoTheTraceDirectoryAndKeepsGrowing) {
  PluginIngest ingest(work(), *writer_);
  const std::string header = trace::JitCodeHeader();
  const std::string rec = trace::FormatJitCodeRecord({.time = 5, .addr = 0x1000, .code = "\xc3"});
  Append("jit-code.10", header);
  std::ofstream plugin(work() / "jit-code.10", std::ios::app | std::ios::binary);
  Append("events.10", "comm 0 10 10 1 prog\n");
  ASSERT_TRUE(ingest.Poll());
  const auto moved = trace::JitCodePath(tmp_.path() / "trace", 10);
  EXPECT_FALSE(std::filesystem::exists(work() / "jit-code.10"));
  ASSERT_TRUE(std::filesystem::exists(moved));
  plugin << rec;
  plugin.close();
  auto text = base::ReadFile(moved);
  ASSERT_TRUE(text);
  auto f = trace::ParseJitCode(*text);
  ASSERT_TRUE(f) << f.error().ToString();
  ASSERT_EQ(f->loads.size(), 1u);
  EXPECT_EQ(f->loads[0].addr, 0x1000u);
}

TEST_F(IngestTest, ASnapshotIsInTheTraceDirectoryOnceItsLineIsRead) {
  PluginIngest ingest(work(), *writer_);
  Append("events.10", "comm 0 10 10 1 prog\nmmap2 5 10 10 4194304 8192 0 254 0 77 5 2 /bin/prog\n");
  Pt("pt-10-10-1.pt", "PTBYTES");
  // The stream line and a torn snapshot line: nothing is listed yet.
  Append("events.10", "stream 1 10 10 1 1234 99 0 0 pt-10-10-1.pt\nsnapshot 1 100 10 trig");
  auto added = ingest.Poll();
  ASSERT_TRUE(added) << added.error().ToString();
  EXPECT_TRUE(added->empty());
  EXPECT_TRUE(Reread().snapshots.empty());

  Append("events.10", "ger fib\n");
  added = ingest.Poll();
  ASSERT_TRUE(added) << added.error().ToString();
  ASSERT_EQ(added->size(), 1u);
  EXPECT_EQ((*added)[0].seq, 1u);
  EXPECT_EQ((*added)[0].reason, trace::SnapshotReason::kTrigger);
  EXPECT_EQ((*added)[0].detail, "fib");
  // Listed on disk at once, its stream copied and the work file gone.
  trace::Manifest m = Reread();
  ASSERT_EQ(m.snapshots.size(), 1u);
  ASSERT_EQ(m.streams.size(), 1u);
  EXPECT_EQ(m.streams[0].snapshot, 1u);
  EXPECT_EQ(m.streams[0].size, 7u);
  EXPECT_TRUE(m.streams[0].wrapped);
  EXPECT_FALSE(std::filesystem::exists(work() / "pt-10-10-1.pt"));
  ASSERT_EQ(ingest.records().size(), 2u);
  ASSERT_EQ(ingest.stream_stats().size(), 1u);
  EXPECT_EQ(ingest.stream_stats()[0].insns, 1234u);
  EXPECT_EQ(ingest.stream_stats()[0].hash, 99u);
  EXPECT_FALSE(ingest.done());
}

TEST_F(IngestTest, ASlowCallSnapshotCarriesTheCallsBeginAndLength) {
  PluginIngest ingest(work(), *writer_);
  Pt("pt-10-10-1.pt", "PT");
  Append("events.10",
         "stream 1 10 10 0 1 1 0 0 pt-10-10-1.pt\nslowcall 1 2000 5000\n"
         "snapshot 1 7000 10 slow-call work took 5.000 us (from +2.000 us, thread 10)\n");
  auto added = ingest.Poll();
  ASSERT_TRUE(added) << added.error().ToString();
  ASSERT_EQ(added->size(), 1u);
  trace::Manifest m = Reread();
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kSlowCall);
  EXPECT_EQ(m.snapshots[0].call_begin, 2000u);
  EXPECT_EQ(m.snapshots[0].call_ns, 5000u);
  EXPECT_EQ(m.snapshots[0].time, 7000u);
  EXPECT_EQ(m.snapshots[0].detail, "work took 5.000 us (from +2.000 us, thread 10)");
}

TEST_F(IngestTest, NumbersSnapshotsOfEveryProcessInTheOrderRead) {
  PluginIngest ingest(work(), *writer_);
  ingest.Asked("from the agent");
  Pt("pt-10-10-1.pt", "A");
  Pt("pt-11-11-1.pt", "B");
  Append("events.11", "stream 1 11 11 0 1 1 0 0 pt-11-11-1.pt\nsnapshot 1 50 0 signal\n");
  ASSERT_TRUE(ingest.Poll());
  Append("events.10", "stream 1 10 10 0 1 1 0 0 pt-10-10-1.pt\nsnapshot 1 60 10 exit status=0\n");
  auto added = ingest.Poll();
  ASSERT_TRUE(added) << added.error().ToString();
  ASSERT_EQ(added->size(), 1u);
  EXPECT_EQ((*added)[0].seq, 2u);
  trace::Manifest m = Reread();
  ASSERT_EQ(m.snapshots.size(), 2u);
  // The driver's words for the snapshot it asked for.
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kSignal);
  EXPECT_EQ(m.snapshots[0].detail, "from the agent");
  ASSERT_EQ(m.streams.size(), 2u);
  EXPECT_EQ(m.streams[0].tid, 11);
  EXPECT_EQ(m.streams[0].snapshot, 1u);
  EXPECT_EQ(m.streams[1].tid, 10);
  EXPECT_EQ(m.streams[1].snapshot, 2u);
}

TEST_F(IngestTest, FinishAddsFullStreamsOnceAndKeepsStreamsOfACutShortSnapshot) {
  PluginIngest ingest(work(), *writer_);
  Pt("pt-10-10.pt", "FULL");
  Pt("pt-10-12-3.pt", "CUT");
  Append("events.10",
         "stream 0 10 10 0 5 5 0 0 pt-10-10.pt\n"
         "stream 0 10 10 0 9 9 0 0 pt-10-10.pt\n"  // described again: the last wins
         "stream 3 10 12 0 1 1 0 0 pt-10-12-3.pt\n"
         "done 120\n");
  auto added = ingest.Finish();
  ASSERT_TRUE(added) << added.error().ToString();
  EXPECT_TRUE(added->empty());
  EXPECT_TRUE(ingest.done());
  trace::Manifest m = Reread();
  ASSERT_EQ(m.streams.size(), 2u);
  EXPECT_EQ(m.streams[0].size, 4u);
  EXPECT_EQ(m.streams[0].snapshot, 0u);
  EXPECT_EQ(m.streams[1].tid, 12);
  EXPECT_EQ(m.streams[1].snapshot, 0u);
  ASSERT_EQ(ingest.stream_stats().size(), 2u);
  EXPECT_EQ(ingest.stream_stats()[0].insns, 9u);
}

// A stream the plugin wrote as what the thread's ring gained since its
// snapshot 1 is listed as following the stream ptsnap listed for that one
// (another process's snapshot in between takes the trace's number 2), and
// reads back as the whole ring. A line naming a snapshot whose stream was
// not listed, or a ring smaller than the file, is an error.
TEST_F(IngestTest, AStreamThatContinuesAnotherFollowsItsStream) {
  PluginIngest ingest(work(), *writer_);
  Pt("pt-10-10-1.pt", "abcdef");
  Pt("pt-11-11-1.pt", "other");
  Pt("pt-10-10-2.pt", "gh");
  Append("events.10", "stream 1 10 10 0 1 1 0 6 pt-10-10-1.pt\nsnapshot 1 50 10 signal\n");
  Append("events.11", "stream 1 11 11 0 1 1 0 5 pt-11-11-1.pt\nsnapshot 1 55 11 signal\n");
  ASSERT_TRUE(ingest.Poll());
  Append("events.10", "stream 2 10 10 1 2 2 1 7 pt-10-10-2.pt\nsnapshot 2 60 10 signal\n");
  auto added = ingest.Poll();
  ASSERT_TRUE(added) << added.error().ToString();
  ASSERT_EQ(added->size(), 1u);
  auto reader = trace::TraceReader::Open(tmp_.path() / "trace");
  ASSERT_TRUE(reader) << reader.error().ToString();
  const trace::Manifest& m = reader->manifest();
  ASSERT_EQ(m.streams.size(), 3u);
  EXPECT_EQ(m.streams[0].tid, 10);
  EXPECT_FALSE(m.streams[0].follows.has_value());
  EXPECT_EQ(m.streams[2].snapshot, 3u);
  EXPECT_EQ(m.streams[2].follows, std::optional<uint32_t>(m.streams[0].id));
  EXPECT_EQ(m.streams[2].ring_bytes, 7u);
  EXPECT_EQ(m.streams[2].size, 2u);
  EXPECT_TRUE(m.streams[2].wrapped);
  auto bytes = reader->ReadStream(m.streams[2]);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  EXPECT_EQ(*bytes, "bcdefgh");

  Pt("pt-10-10-4.pt", "ij");
  Append("events.10", "stream 4 10 10 0 3 3 3 9 pt-10-10-4.pt\nsnapshot 4 70 10 signal\n");
  added = ingest.Poll();
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error().ToString(),
            "the emulator's plugin wrote pt-10-10-4.pt as the continuation of thread 10's stream "
            "of its snapshot 3, which ptsnap has not listed");
}

TEST_F(IngestTest, AStreamLargerThanItsRingIsAnError) {
  PluginIngest ingest(work(), *writer_);
  Pt("pt-10-10-1.pt", "abcdef");
  Pt("pt-10-10-2.pt", "ghij");
  Append("events.10",
         "stream 1 10 10 0 1 1 0 6 pt-10-10-1.pt\nsnapshot 1 50 10 signal\n"
         "stream 2 10 10 0 1 1 1 3 pt-10-10-2.pt\nsnapshot 2 60 10 signal\n");
  auto added = ingest.Poll();
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error().ToString(),
            "the emulator's plugin wrote 4 bytes to pt-10-10-2.pt but says its ring held 3");
}

TEST_F(IngestTest, AMalformedLineIsAnErrorNamingTheLog) {
  PluginIngest ingest(work(), *writer_);
  Append("events.10", "bogus line\n");
  auto added = ingest.Poll();
  ASSERT_FALSE(added);
  EXPECT_NE(added.error().ToString().find("events.10"), std::string::npos)
      << added.error().ToString();
}

}  // namespace
}  // namespace ptsnap::emulate
