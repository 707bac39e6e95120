// Runs the built `ptsnap info` (PTSNAP_BIN) on trace directories made with
// TraceWriter and checks what a user sees: output, error lines, exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file_util.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/temp_dir.h"
#include "trace/decode_verdict.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using Outcome = ptsnap::testing::PtsnapRun;

Outcome Ptsnap(const std::string& args) { return ptsnap::testing::RunPtsnap(args); }

std::span<const std::byte> Span(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

trace::Record Rec(uint64_t time, trace::RecordBody body) {
  trace::Record r;
  r.sample_id.time = time;
  r.sample_id.cpu = 2;
  r.body = std::move(body);
  return r;
}

// A small complete trace: one snapshot, two streams, three sideband records.
fs::path MakeTrace(const TempDir& tmp, trace::State state = trace::State::kComplete) {
  fs::path dir = tmp.path() / "trace";
  trace::Manifest m;
  m.source = trace::Source::kEmulated;
  m.emulator = "qemu-x86_64 7.2 + ptsnap plugin";
  m.command = {"/bin/true", "--flag"};
  m.pids = {42};
  m.snapshot_size = 4 << 20;
  m.lost_records = 7;
  m.kcore.reason = "user scope";
  m.binaries = {{.path = "/bin/true", .build_id = "abcd", .copy = ""}};
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_TRUE(w.has_value());
  if (!w) return dir;
  trace::Mmap2 mm;
  mm.pid = mm.tid = 42;
  mm.addr = 0x400000;
  mm.len = 0x1000;
  mm.prot = PROT_READ | PROT_EXEC;
  mm.filename = "/bin/true";
  std::string sb =
      trace::SerializeRecord(Rec(30, trace::Comm{.pid = 42, .tid = 42, .comm = "true"}));
  sb += trace::SerializeRecord(Rec(10, mm));
  sb += trace::SerializeRecord(Rec(20, trace::ItraceStart{.pid = 42, .tid = 42}));
  EXPECT_TRUE(w->AppendSideband(Span(sb)).has_value());
  EXPECT_TRUE(w->AddStream({.pid = 42, .tid = 42, .snapshot = 1, .wrapped = true},
                           Span(std::string(3000, 'x')))
                  .has_value());
  EXPECT_TRUE(w->AddStream({.pid = 42, .tid = 43, .snapshot = 1}, Span("yy")).has_value());
  EXPECT_TRUE(w->AddSnapshot({.seq = 1,
                              .reason = trace::SnapshotReason::kTrigger,
                              .detail = "main",
                              .time = 25,
                              .tid = 42})
                  .has_value());
  EXPECT_TRUE(w->Finish(state).has_value());
  return dir;
}

TEST(CmdInfoTest, PrintsTheManifestSummary) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("source       emulated (qemu-x86_64 7.2 + ptsnap plugin)"));
  EXPECT_THAT(r.out, HasSubstr("state        complete"));
  EXPECT_THAT(r.out, HasSubstr("command      /bin/true --flag"));
  EXPECT_THAT(r.out, HasSubstr("scope        user"));
  EXPECT_THAT(r.out, HasSubstr("mode         snapshot, 4194304 bytes (4.0 MiB) per stream"));
  EXPECT_THAT(r.out, HasSubstr("  #1 trigger (main) at 25 ns, tid 42"));
  EXPECT_THAT(r.out, HasSubstr("streams      2, 3002 bytes (2.9 KiB)"));
  EXPECT_THAT(r.out,
              HasSubstr("  0 pt/0.pt pid 42 tid 42 snapshot 1 3000 bytes (2.9 KiB) wrapped"));
  EXPECT_THAT(r.out, HasSubstr("  1 pt/1.pt pid 42 tid 43 snapshot 1 2 bytes"));
  EXPECT_THAT(r.out, HasSubstr("lost         7 sideband records, 0 truncated AUX records"));
  EXPECT_THAT(r.out, HasSubstr("kcore        not-needed: user scope"));
  EXPECT_THAT(r.out, HasSubstr("/bin/true build-id abcd (not copied)"));
  EXPECT_THAT(r.out, Not(HasSubstr("MMAP2")));  // records only with --records
}

// `info` does not decode, but says what the last whole decode noted
// (decoded.json), and fails when it found impossible results.
TEST(CmdInfo, SaysTheLastDecodeFoundImpossibleResults) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("decoded      no whole decode noted here (ptsnap decode "));
  ASSERT_TRUE(trace::WriteDecodeVerdict(
      dir, {.by = "decode",
            .decoded_unix_ns = 1'000'000'000,
            .output = "t.fxt",
            .slices = 9,
            .impossible = 2,
            .first_impossible = "main on thread 42: 12 ms in a 3 ms span"}));
  r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out,
              HasSubstr("decoded      1970-01-01 00:00:01 UTC by ptsnap decode into t.fxt: 9 "
                        "slices, 2 impossible result(s)\n"));
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: the last decode of " + dir.string() +
                               " found 2 impossible result(s) (the first: main on thread 42: 12 "
                               "ms in a 3 ms span): the numbers of its timeline are not to be "
                               "trusted"));
  ASSERT_TRUE(base::WriteFileAtomic(dir / trace::kDecodeVerdictFile, "{", 0644));
  r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("state        complete"));
  EXPECT_THAT(r.out, HasSubstr("decoded.json: not valid JSON"));
}

TEST(CmdInfoTest, RecordsListsSidebandSortedByTime) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("info --records " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("records      3\n"));
  size_t mmap = r.out.find("MMAP2 pid 42 tid 42 0x400000+0x1000 pgoff 0x0 r-xp /bin/true");
  size_t start = r.out.find("ITRACE_START pid 42 tid 42");
  size_t comm = r.out.find("COMM pid 42 tid 42 true");
  ASSERT_NE(mmap, std::string::npos) << r.out;
  ASSERT_NE(start, std::string::npos) << r.out;
  ASSERT_NE(comm, std::string::npos) << r.out;
  EXPECT_LT(mmap, start);
  EXPECT_LT(start, comm);
  EXPECT_THAT(r.out, HasSubstr("10 cpu 2   MMAP2"));
}

TEST(CmdInfoTest, CrashedRecordingShowsItsStateAndTornTail) {
  TempDir tmp;
  fs::path dir = tmp.path() / "crashed";
  {
    auto w = trace::TraceWriter::Create(dir, {});
    ASSERT_TRUE(w.has_value());
    std::string rec = trace::SerializeRecord(Rec(1, trace::ItraceStart{.pid = 1, .tid = 1}));
    ASSERT_TRUE(w->AppendSideband(Span(rec + rec.substr(0, 12))).has_value());
  }
  Outcome r = Ptsnap("info --records " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("state        recording (cut short by a crash or kill"));
  EXPECT_THAT(r.out, HasSubstr("records      1 (plus a torn tail of 12 bytes, ignored)"));
}

TEST(CmdInfoTest, NotATraceDirectory) {
  TempDir tmp;
  tmp.Mkdir("empty");
  Outcome r = Ptsnap("info " + (tmp.path() / "empty").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "ptsnap: error: " + (tmp.path() / "empty").string() +
                       " is not a ptsnap trace directory (no manifest.json)\n");

  Outcome missing = Ptsnap("info " + (tmp.path() / "nope").string());
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.out, HasSubstr("nope does not exist"));
}

TEST(CmdInfoTest, UnsupportedVersion) {
  TempDir tmp;
  tmp.Write("t/manifest.json", R"({"format": "ptsnap-trace", "version": 7})");
  Outcome r = Ptsnap("info " + (tmp.path() / "t").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out,
              AllOf(HasSubstr("ptsnap: error: "),
                    HasSubstr("manifest.json: unsupported version 7 (this ptsnap reads 1 and 2)")));
}

TEST(CmdInfoTest, CorruptManifestNamesTheField) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  auto text = base::ReadFile(dir / "manifest.json");
  ASSERT_TRUE(text.has_value());
  std::string edited = *text;
  edited.replace(edited.find("\"size\": 3000"), 12, "\"size\": true");
  ASSERT_TRUE(base::WriteFileAtomic(dir / "manifest.json", edited).has_value());
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("manifest.json: field 'streams[0].size': expected an unsigned"));
}

TEST(CmdInfoTest, MissingOrResizedStreamIsShownAndFails) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  fs::remove(dir / "pt/0.pt");
  ASSERT_TRUE(base::AppendFile(dir / "pt/1.pt", "zzz").has_value());
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("wrapped [MISSING]"));
  EXPECT_THAT(r.out, HasSubstr("[SIZE MISMATCH: file has 5 bytes]"));
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: stream 0 (pt/0.pt) is missing"));
  EXPECT_THAT(r.out,
              HasSubstr("ptsnap: error: stream 1 (pt/1.pt) has 5 bytes but the manifest says 2"));
}

// A recording stopped by an error (or killed) may hold bytes written after
// its last flush: not a mismatch, they are named and left unread.
TEST(CmdInfoTest, BytesAfterTheLastFlushOfAnInterruptedTraceAreNotAMismatch) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp, trace::State::kInterrupted);
  ASSERT_TRUE(base::AppendFile(dir / "pt/1.pt", "zzz").has_value());
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("2 bytes (+3 bytes after the last flush, not read)"));
  EXPECT_THAT(r.out, Not(HasSubstr("MISMATCH")));
}

// Snapshots stored as what their ring gained (--multi-snapshot under
// --emulate): each stream says which it follows and how much its ring
// held, the summary what is on disk and what the snapshots hold; a damaged
// stream marks every stream that reads its bytes back.
TEST(CmdInfoTest, StreamsThatFollowOthersShowTheChainAndWhatTheSnapshotsHold) {
  TempDir tmp;
  fs::path dir = tmp.path() / "chain";
  {
    auto w = trace::TraceWriter::Create(dir, {});
    ASSERT_TRUE(w.has_value());
    ASSERT_TRUE(w->AddStream({.pid = 42, .tid = 42, .snapshot = 1}, Span(std::string(3000, 'x')))
                    .has_value());
    ASSERT_TRUE(
        w->AddStream({.pid = 42, .tid = 42, .snapshot = 2, .follows = 0, .ring_bytes = 3100},
                     Span(std::string(100, 'y')))
            .has_value());
    ASSERT_TRUE(w->AddStream({.pid = 42, .tid = 42, .snapshot = 3, .follows = 1, .ring_bytes = 150},
                             Span(std::string(50, 'z')))
                    .has_value());
    ASSERT_TRUE(w->Finish().has_value());
  }
  Outcome r = Ptsnap("info " + dir.string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("streams      3, 3150 bytes (3.1 KiB) on disk; the snapshots hold "
                               "6250 bytes (6.1 KiB) (2 stored as what their ring gained since "
                               "its previous snapshot)"));
  EXPECT_THAT(r.out, HasSubstr("  1 pt/1.pt pid 42 tid 42 snapshot 2 100 bytes follows 0 (ring "
                               "3100 bytes (3.0 KiB))\n"));
  EXPECT_THAT(r.out, HasSubstr("  2 pt/2.pt pid 42 tid 42 snapshot 3 50 bytes follows 1 (ring 150 "
                               "bytes)\n"));

  // Stream 0 gone: stream 1 needs its bytes, stream 2 (a ring of 150) not.
  fs::remove(dir / "pt/0.pt");
  Outcome gone = Ptsnap("info " + dir.string());
  EXPECT_EQ(gone.rc, 1);
  EXPECT_THAT(gone.out, HasSubstr("follows 0 (ring 3100 bytes (3.0 KiB)) [BROKEN CHAIN: stream 0's "
                                  "file is damaged]"));
  EXPECT_THAT(gone.out, HasSubstr("follows 1 (ring 150 bytes)\n"));
  EXPECT_THAT(gone.out, HasSubstr("ptsnap: error: stream 1 (pt/1.pt) continues stream 0's bytes: "
                                  "stream 0 (pt/0.pt) is missing"));
}

TEST(CmdInfoTest, CorruptSidebandFailsWithRecords) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  std::string bad("\x0a\0\0\0\0\0\x08\0", 8);  // MMAP2 header claiming 8 bytes
  ASSERT_TRUE(base::AppendFile(dir / "sideband.data", bad + std::string(8, '\x01')).has_value());
  EXPECT_EQ(Ptsnap("info " + dir.string()).rc, 0);  // the summary does not read records
  Outcome r = Ptsnap("info --records " + dir.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: sideband.data: corrupt perf record at offset"));
}

TEST(CmdInfoTest, MissingArgumentIsAUsageError) {
  Outcome r = Ptsnap("info");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("TRACE_DIR is required"));
  EXPECT_EQ(Ptsnap("info --bogus x").rc, 2);
  EXPECT_EQ(Ptsnap("--help").rc, 0);
}

}  // namespace
}  // namespace ptsnap::cli
