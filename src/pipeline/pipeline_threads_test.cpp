// The decode pipeline on traces whose sideband changes things over time:
// per-CPU streams split into threads by switch records, exec and mmap
// replacing code inside one stream, TSX transactions. The traces are built
// with libipt's encoder over the two test programs (calls.S, replaced.S),
// which hold different code at the same addresses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include "base/file_util.h"
#include "base/string_util.h"
#include "decode/test_stream.h"
#include "output/fxt_reader.h"
#include "pipeline/pipeline.h"
#include "tests/support/events.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// The writers and readers this module drives.
using namespace ::ptsnap::output;
namespace {

using decode::testing::CallsProgram;
using decode::testing::StreamBuilder;
using ::ptsnap::testing::HasValue;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int32_t kA = 100;  // runs calls.S
constexpr int32_t kB = 200;  // runs replaced.S

struct StreamSpec {
  trace::Stream stream;
  std::string bytes;
};

std::filesystem::path MakeTrace(const std::filesystem::path& dir, trace::Manifest m,
                                std::vector<trace::Record> records,
                                const std::vector<StreamSpec>& streams) {
  std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.sample_id.time < b.sample_id.time;
  });
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_THAT(w, HasValue());
  std::string sb;
  for (const auto& r : records) sb += trace::SerializeRecord(r);
  EXPECT_THAT(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))), HasValue());
  for (const auto& s : streams) {
    EXPECT_THAT(w->AddStream(s.stream, std::as_bytes(std::span(s.bytes.data(), s.bytes.size()))),
                HasValue());
  }
  EXPECT_THAT(w->Finish(), HasValue());
  return dir;
}

trace::Stream ThreadStream(int32_t pid) {
  trace::Stream s;
  s.pid = s.tid = pid;
  return s;
}
trace::Stream CpuStream(int32_t cpu) {
  trace::Stream s;
  s.cpu = cpu;
  return s;
}

struct Decoded {
  DecodeReport report;
  std::string text;
  // Per tid: "B name" / "E name" / "I name" in order (times dropped).
  std::map<int32_t, std::vector<std::string>> tree;
  // Per tid: "<ts> B name" etc., for time checks.
  std::map<int32_t, std::vector<std::string>> timed;
};

// The report and the file of one decode with `jobs` threads (-j).
std::pair<DecodeReport, std::string> DecodeWithJobs(const std::filesystem::path& trace,
                                                    const std::filesystem::path& out,
                                                    unsigned jobs) {
  DecodeOptions o;
  o.output = out;
  o.jobs = jobs;
  auto r = DecodeTraceDir(trace, o);
  EXPECT_THAT(r, HasValue());
  if (!r) return {};
  auto text = base::ReadFile(out);
  EXPECT_THAT(text, HasValue());
  return {*r, text ? *text : std::string()};
}

// Decodes with one job, and checks that every -j from 2 to 8 (a decoding
// thread ahead of the model, parallel.h) writes the same file byte for byte
// and the same summary.
Decoded DecodeEvents(const std::filesystem::path& trace, const std::filesystem::path& out) {
  Decoded d;
  auto [report, text] = DecodeWithJobs(trace, out, 1);
  d.report = report;
  d.text = text;
  for (unsigned jobs = 2; jobs <= 8; ++jobs) {
    auto [rj, tj] = DecodeWithJobs(trace, out.string() + ".j.events", jobs);
    rj.output = report.output;
    EXPECT_TRUE(tj == text) << "-j " << jobs << " wrote another timeline:\n" << tj;
    EXPECT_EQ(FormatReport(rj), FormatReport(report)) << "-j " << jobs;
  }
  for (const auto& e : ::ptsnap::testing::ParseEvents(d.text)) {
    std::string what = std::string(1, e.kind) + " " + e.name;
    d.tree[e.tid].push_back(what);
    d.timed[e.tid].push_back(std::to_string(e.ts) + " " + what);
  }
  return d;
}

// The slice tree of calls.S run alone on one thread: the checked-in golden
// of that decode (tests/data/decoder/calls.events, reviewed when it
// changes), not a decode made by this run.
std::vector<std::string> CallsAloneTree(const std::filesystem::path&) {
  auto golden =
      base::ReadFile(std::string(PTSNAP_SOURCE_ROOT) + "/tests/data/decoder/calls.events");
  EXPECT_THAT(golden, HasValue());
  std::vector<std::string> tree;
  if (!golden) return tree;
  for (const auto& e : ::ptsnap::testing::ParseEvents(*golden)) {
    tree.push_back(std::string(1, e.kind) + " " + e.name);
  }
  EXPECT_GT(tree.size(), 50u);
  return tree;
}

// replaced.S from _start to its exit syscall, tracing enabled at _start.
void ReplacedRun(StreamBuilder& b, const CallsProgram& r, uint64_t tsc) {
  b.Tsc(tsc);
  b.TipPge(r.Sym("_start"));
  b.Tsc(tsc + 10);
  b.Tnt(true);  // beta -> alpha
  b.Tnt(true);  // beta -> alpha
  b.Tnt(true);  // alpha -> _start
  b.Tsc(tsc + 20);
  b.TipPgd();  // exit syscall
}

const std::vector<std::string> kReplacedTree = {"B _start",    "B alpha", "B beta",  "E beta",
                                                "B beta",      "E beta",  "E alpha", "B [syscall]",
                                                "E [syscall]", "E _start"};

// Two processes on two CPUs: A (calls.S) starts on CPU 0 and is switched
// out at its getpid syscall; B (replaced.S, other code at the same
// addresses) runs on CPU 0; A resumes on CPU 1 after the syscall. The
// switch sideband attributes each stretch: each thread gets its own track
// and slices, decoded against its own process's image, and A's stack
// continues across the CPUs exactly as if it had run alone.
TEST(PipelineThreadsTest, PerCpuStreamsSplitIntoThreadsBySwitchRecords) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto repl = decode::testing::LoadReplacedProgram();
  StreamBuilder cpu0;
  cpu0.Psb(1000);
  cpu0.TipPge(calls.Sym("_start"));
  cpu0.Tsc(1010);
  cpu0.Tnt(true);  // leaf -> mid
  cpu0.Tnt(true);  // mid -> main
  cpu0.Tsc(1020);
  cpu0.Tnt(true);  // leaf (via tail_caller) -> main
  cpu0.Tsc(1030);
  cpu0.Tip(calls.Sym("leaf"));  // call *%rax
  cpu0.Tnt(true);
  cpu0.Tsc(1040);
  cpu0.TipPgd();  // getpid: A blocks, B runs here
  ReplacedRun(cpu0, repl, 1100);
  StreamBuilder cpu1;
  cpu1.Psb(1200);
  cpu1.TipPge(calls.Sym("main_after_syscall"));
  cpu1.Tsc(1210);
  decode::testing::FibTnt(cpu1, 6);
  cpu1.Tsc(1220);
  cpu1.Tip(calls.Sym("main_landing"));
  cpu1.Tsc(1230);
  cpu1.Tip(calls.Sym("_start") + 5);
  cpu1.Tsc(1240);
  cpu1.TipPgd();

  using decode::testing::ItraceStartRecord;
  using decode::testing::SwitchRecord;
  auto records = decode::testing::ProgramSideband(calls, kA, "decode_calls", 1);
  for (auto& r : decode::testing::ProgramSideband(repl, kB, "decode_replaced", 3)) {
    records.push_back(r);
  }
  std::pair<uint32_t, uint32_t> a{kA, kA}, b{kB, kB}, idle{0, 0};
  records.push_back(ItraceStartRecord(0, 900, kA, kA));
  records.push_back(ItraceStartRecord(1, 900, 0, 0));
  records.push_back(SwitchRecord(0, 1050, true, a, b));
  records.push_back(SwitchRecord(0, 1051, false, b, a));
  records.push_back(SwitchRecord(0, 1130, true, b, idle));
  records.push_back(SwitchRecord(1, 1150, true, idle, a));
  records.push_back(SwitchRecord(1, 1151, false, a, idle));
  auto m = decode::testing::CallsManifest(kA);
  m.pids = {kA, kB};
  auto dir = MakeTrace(tmp.path() / "trace", m, records,
                       {{CpuStream(0), cpu0.Finish()}, {CpuStream(1), cpu1.Finish()}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  EXPECT_EQ(d.report.streams, 2u);
  // A's slices are exactly those of calls.S decoded alone.
  EXPECT_THAT(d.tree[kA], ElementsAreArray(CallsAloneTree(tmp.path()))) << d.text;
  EXPECT_THAT(d.tree[kB], ElementsAreArray(kReplacedTree)) << d.text;
  // Nothing lands on the CPUs' own tracks: every stretch had a thread.
  EXPECT_EQ(d.tree.count(-1), 0u) << d.text;
  EXPECT_EQ(d.tree.count(-2), 0u) << d.text;
  // A's getpid [syscall] spans the time it was switched out: from its
  // TIP.PGD on CPU 0 to its TIP.PGE on CPU 1.
  EXPECT_THAT(d.timed[kA], ::testing::Contains("1040 B [syscall]")) << d.text;
  EXPECT_THAT(d.timed[kA], ::testing::Contains("1200 E [syscall]")) << d.text;
  // Tracks named from the sideband.
  EXPECT_THAT(d.text, ::testing::HasSubstr("P 100 decode_calls [pid=100]"));
  EXPECT_THAT(d.text, ::testing::HasSubstr("P 200 decode_replaced [pid=200]"));
  EXPECT_THAT(d.text, ::testing::HasSubstr("T 200 200 decode_replaced"));
  EXPECT_THAT(d.text, ::testing::HasSubstr("T 100 100 decode_calls"));
  EXPECT_EQ(d.report.threads, 2u);
}

// Without switch records a per-CPU stream stays on the CPU's own track.
TEST(PipelineThreadsTest, PerCpuStreamWithoutSwitchRecordsIsOneCpuTrack) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA),
                       decode::testing::CallsSideband(calls, kA),
                       {{CpuStream(3), decode::testing::CallsProgramStream(calls)}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_THAT(d.text, ::testing::HasSubstr("T 0 -4 cpu 3"));
  // No process is known, so no user image: decode errors, on the CPU track.
  ASSERT_EQ(d.tree.size(), 1u) << d.text;
  EXPECT_EQ(d.tree.begin()->first, -4);
}

// exec inside one stream: calls.S runs, execs replaced.S (COMM with the
// exec flag and new MMAP2s over the same addresses at time 2000), which
// runs. Code before the exec decodes against calls.S and after it against
// replaced.S; the old program's frames end at the exec.
TEST(PipelineThreadsTest, ExecInsideAStreamSwitchesImageAtItsTime) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto repl = decode::testing::LoadReplacedProgram();
  StreamBuilder b;
  ReplacedRun(b, repl, 3000);
  std::string pt = decode::testing::CallsProgramStream(calls) + b.Finish();
  auto records = decode::testing::CallsSideband(calls, kA);
  for (auto& r : decode::testing::ProgramSideband(repl, kA, "decode_replaced", 2000)) {
    records.push_back(r);
  }
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA), records,
                       {{ThreadStream(kA), pt}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  std::vector<std::string> expect = CallsAloneTree(tmp.path());
  expect.insert(expect.end(), kReplacedTree.begin(), kReplacedTree.end());
  EXPECT_THAT(d.tree[kA], ElementsAreArray(expect)) << d.text;
}

// An mmap over mapped code (munmap + mmap, dlclose + dlopen at the same
// address), no exec: the same address holds calls.S's code before time
// 2000 and replaced.S's after it; each stretch decodes against its bytes
// and symbols.
TEST(PipelineThreadsTest, MmapReplacingCodeAppliesAtItsTime) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto repl = decode::testing::LoadReplacedProgram();
  StreamBuilder b;
  ReplacedRun(b, repl, 3000);
  std::string pt = decode::testing::CallsProgramStream(calls) + b.Finish();
  auto records = decode::testing::CallsSideband(calls, kA);
  for (auto& r : decode::testing::ProgramSideband(repl, kA, "", 2000, /*exec=*/false)) {
    records.push_back(r);
  }
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA), records,
                       {{ThreadStream(kA), pt}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  const auto& t = d.timed[kA];
  auto count = [&](const std::string& what, bool before) {
    return std::count_if(t.begin(), t.end(), [&](const std::string& l) {
      uint64_t ts = std::stoull(l.substr(0, l.find(' ')));
      return (ts < 2000) == before && l.substr(l.find(' ') + 1) == what;
    });
  };
  EXPECT_EQ(count("B fib", true), 25) << d.text;
  EXPECT_EQ(count("B mid", true), 1) << d.text;
  EXPECT_EQ(count("B alpha", false), 1) << d.text;
  EXPECT_EQ(count("B beta", false), 2) << d.text;
  for (const char* old_name : {"B main", "B mid", "B leaf", "B fib", "B tail_caller"}) {
    EXPECT_EQ(count(old_name, false), 0) << old_name << "\n" << d.text;
  }
}

// The same mapping recorded twice (a synthesized one, then the real one) is
// no change: one address space, decoded as before.
TEST(PipelineThreadsTest, RepeatedIdenticalMmapIsNoChange) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto records = decode::testing::CallsSideband(calls, kA);
  for (auto& r : decode::testing::ProgramSideband(calls, kA, "", 5, /*exec=*/false)) {
    records.push_back(r);
  }
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA), records,
                       {{ThreadStream(kA), decode::testing::CallsProgramStream(calls)}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  EXPECT_THAT(d.tree[kA], ElementsAreArray(CallsAloneTree(tmp.path())));
}

// TSX: main's call to mid runs inside a transaction (MODE.TSX InTX from
// main's entry). On abort (MODE.TSX TXAbort + FUP + TIP to the abort
// handler) the speculative calls never happened: no mid, no leaf under it.
// On commit they did.
std::string TsxStream(const CallsProgram& p, bool abort) {
  StreamBuilder b;
  b.Psb(1000);
  b.TipPge(p.Sym("_start"));
  b.Tsc(1005);
  b.ModeTsx(true, false);
  b.Fup(p.Sym("main"));  // the transaction starts at main's first instruction
  b.Tsc(1010);
  b.Tnt(true);  // leaf -> mid
  b.Tnt(true);  // mid -> main
  b.Tsc(1015);
  b.ModeTsx(false, abort);
  b.Fup(p.Sym("main") + 5);             // the call to tail_caller
  if (abort) b.Tip(p.Sym("main") + 5);  // the abort handler
  b.Tsc(1020);
  b.Tnt(true);  // leaf (via tail_caller) -> main
  b.Tsc(1030);
  b.Tip(p.Sym("leaf"));  // call *%rax
  b.Tnt(true);
  b.Tsc(1040);
  b.TipPgd();  // getpid
  return b.Finish();
}

TEST(PipelineThreadsTest, TsxAbortDropsTheSpeculativeCalls) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA),
                       decode::testing::CallsSideband(calls, kA),
                       {{ThreadStream(kA), TsxStream(calls, /*abort=*/true)}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  EXPECT_EQ(d.report.decode.tsx_aborts, 1u);
  EXPECT_THAT(FormatReport(d.report),
              ::testing::HasSubstr("aborted TSX transactions (dropped): 1"));
  EXPECT_THAT(d.tree[kA], ElementsAre("B _start", "B main", "B tail_caller", "E tail_caller",
                                      "B leaf", "E leaf", "B leaf", "E leaf", "B [syscall]",
                                      "E [syscall]", "E main", "E _start"))
      << d.text;
}

TEST(PipelineThreadsTest, TsxCommitKeepsTheSpeculativeCalls) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto dir = MakeTrace(tmp.path() / "trace", decode::testing::CallsManifest(kA),
                       decode::testing::CallsSideband(calls, kA),
                       {{ThreadStream(kA), TsxStream(calls, /*abort=*/false)}});
  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  EXPECT_EQ(d.report.decode.tsx_aborts, 0u);
  EXPECT_THAT(d.tree[kA],
              ElementsAre("B _start", "B main", "B mid", "B leaf", "E leaf", "E mid",
                          "B tail_caller", "E tail_caller", "B leaf", "E leaf", "B leaf", "E leaf",
                          "B [syscall]", "E [syscall]", "E main", "E _start"))
      << d.text;
}

// -j N on a multi-thread, multi-snapshot recording (the second snapshot
// repeats the first's stretch, the overlap the pipeline skips), with a
// stream file missing: every format's file byte for byte and the summary
// are those of one job (docs/decoding.md, "Parallel decode").
TEST(PipelineThreadsTest, ParallelDecodeEqualsOneJob) {
  ::ptsnap::testing::TempDir tmp;
  auto calls = decode::testing::LoadCallsProgram();
  auto repl = decode::testing::LoadReplacedProgram();
  auto records = decode::testing::ProgramSideband(calls, kA, "decode_calls", 1);
  for (auto& r : decode::testing::ProgramSideband(repl, kB, "decode_replaced", 3)) {
    records.push_back(r);
  }
  auto m = decode::testing::CallsManifest(kA);
  m.pids = {kA, kB};
  m.mode = trace::Mode::kSnapshot;
  std::vector<StreamSpec> streams;
  for (uint32_t seq : {1u, 2u, 3u}) {
    trace::Snapshot snap;
    snap.seq = seq;
    snap.reason = trace::SnapshotReason::kTrigger;
    snap.detail = "leaf";
    snap.time = 2000 * seq;
    snap.tid = kA;
    m.snapshots.push_back(snap);
    trace::Stream a = ThreadStream(kA), b = ThreadStream(kB);
    a.snapshot = b.snapshot = seq;
    // Snapshot 2 repeats snapshot 1's stretch and goes on: half skipped.
    streams.push_back({a, decode::testing::CallsProgramStream(calls, seq == 3 ? 1500 : 1000)});
    StreamBuilder rb;
    rb.Psb(900 + 100 * seq);
    ReplacedRun(rb, repl, 1000 + 100 * seq);
    streams.push_back({b, rb.Finish()});
  }
  auto dir = MakeTrace(tmp.path() / "trace", m, records, streams);
  // Snapshot 3's stream of B is gone: a warning, the same with any -j.
  auto reader = trace::TraceReader::Open(dir);
  ASSERT_THAT(reader, HasValue());
  trace::Stream gone;
  for (const auto& s : reader->manifest().streams)
    if (s.snapshot == 3 && s.tid == kB) gone = s;
  ASSERT_FALSE(gone.file.empty());
  std::filesystem::remove(dir / gone.file);

  Decoded d = DecodeEvents(dir, tmp.path() / "out.events");
  EXPECT_EQ(d.report.streams, 6u);
  EXPECT_EQ(d.report.missing_streams, 1u);
  EXPECT_GT(d.report.overlap_events_skipped, 0u);
  // The summary's instruction count includes the overlap, and says so.
  EXPECT_THAT(FormatReport(d.report),
              ::testing::HasSubstr("the instructions counted above include them once per "
                                   "snapshot, so they exceed what the program ran."));
  EXPECT_THAT(d.text, ::testing::HasSubstr("[snapshot 2: trigger leaf]"));
  EXPECT_EQ(d.report.threads, 2u);
  // .fxt: decoding on its thread; .json: the writer; .gz: deflate, on one
  // thread with -j 2, in blocks on jobs - 1 from -j 3 on (PlanThreads,
  // parallel.h). Every -j up to 8.
  for (const char* suffix : {".fxt", ".json", ".fxt.gz", ".json.gz"}) {
    auto [r1, one] = DecodeWithJobs(dir, tmp.path() / (std::string("one") + suffix), 1);
    for (unsigned jobs = 2; jobs <= 8; ++jobs) {
      const auto path = tmp.path() / ("j" + std::to_string(jobs) + suffix);
      auto [r2, two] = DecodeWithJobs(dir, path, jobs);
      EXPECT_GT(one.size(), 500u) << suffix;
      if (jobs >= 3 && std::string_view(suffix).ends_with(".gz")) {
        // Compressed in blocks (pigz): other bytes, one member, the same content.
        auto inflated = output::ReadMaybeGzip(path);
        auto inflated_one = output::ReadMaybeGzip(tmp.path() / (std::string("one") + suffix));
        ASSERT_THAT(inflated, HasValue()) << suffix;
        ASSERT_THAT(inflated_one, HasValue()) << suffix;
        EXPECT_GT(inflated_one->size(), one.size()) << suffix << ": not compressed";
        EXPECT_TRUE(*inflated == *inflated_one)
            << suffix << ": -j " << jobs << " wrote another timeline";
        continue;
      }
      EXPECT_TRUE(one == two) << suffix << ": -j " << jobs << " wrote another file";
    }
  }
  // A full disk under the compressing threads: the error -j 1 reports,
  // and the decode returns (no thread left behind: the test would hang).
  std::string error[3];
  for (unsigned jobs : {1u, 2u, 3u}) {
    const auto full = tmp.path() / ("full" + std::to_string(jobs) + ".fxt.gz");
    std::filesystem::create_symlink("/dev/full", full);
    DecodeOptions o;
    o.output = full;
    o.jobs = jobs;
    auto r = DecodeTraceDir(dir, o);
    ASSERT_FALSE(r.has_value()) << "-j " << jobs << ": no error writing to /dev/full";
    error[jobs - 1] = r.error().ToString();
    EXPECT_THAT(error[jobs - 1], ::testing::HasSubstr(full.string() + ": No space left on device"));
  }
  for (unsigned jobs : {2u, 3u}) {
    std::string expected = error[0];
    for (size_t at = expected.find("full1"); at != std::string::npos; at = expected.find("full1"))
      expected.replace(at, 5, "full" + std::to_string(jobs));
    EXPECT_EQ(error[jobs - 1], expected) << "-j " << jobs;
  }
}

}  // namespace
}  // namespace ptsnap::pipeline
