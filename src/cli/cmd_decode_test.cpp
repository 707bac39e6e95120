// Runs the built `ptsnap decode` (PTSNAP_BIN) and checks what a user sees:
// the summary, the output file, error lines and exit codes.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file_util.h"
#include "base/version.h"
#include "decode/test_stream.h"
#include "output/fxt_reader.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"
#include "trace/decode_verdict.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

using Outcome = ptsnap::testing::PtsnapRun;

Outcome Ptsnap(const std::string& args, const std::string& cwd = ".") {
  return ptsnap::testing::RunPtsnap(args, {.cwd = cwd, .stdout_only = false});
}

// `ptsnap ARGS` exits with `rc` and says `says` (on stdout or stderr).
void ExpectExit(const std::string& args, int rc, const std::string& says) {
  Outcome r = Ptsnap(args);
  EXPECT_EQ(r.rc, rc) << args << "\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr(says)) << args;
}

fs::path MakeTrace(const TempDir& tmp, bool two_threads = false,
                   const std::function<void(trace::Manifest&)>& edit = {},
                   const std::string& name = "") {
  auto prog = decode::testing::LoadCallsProgram();
  fs::path dir = tmp.path() / (!name.empty() ? name : two_threads ? "threads" : "trace");
  trace::Manifest m = decode::testing::CallsManifest(77);
  if (edit) edit(m);
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_TRUE(w.has_value());
  std::string sb;
  for (const auto& r : decode::testing::CallsSideband(prog, 77)) sb += trace::SerializeRecord(r);
  EXPECT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))).has_value());
  std::string pt = decode::testing::CallsProgramStream(prog);
  trace::Stream s;
  s.pid = s.tid = 77;
  EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  if (two_threads) {  // a second thread of the process running the same calls
    s.tid = 78;
    EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  }
  EXPECT_TRUE(w->Finish().has_value());
  return dir;
}

// A snapshot-mode trace with two snapshots, each holding one run of
// calls.S (the second repeats the first's times: decoded together, its
// events would be the overlap that is skipped).
fs::path MakeTwoSnapshotTrace(const TempDir& tmp) {
  auto prog = decode::testing::LoadCallsProgram();
  fs::path dir = tmp.path() / "snaps";
  trace::Manifest m = decode::testing::CallsManifest(77);
  m.mode = trace::Mode::kSnapshot;
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_TRUE(w.has_value());
  std::string sb;
  for (const auto& r : decode::testing::CallsSideband(prog, 77)) sb += trace::SerializeRecord(r);
  EXPECT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))).has_value());
  std::string pt = decode::testing::CallsProgramStream(prog);
  for (uint32_t seq : {1u, 2u}) {
    trace::Snapshot snap;
    snap.seq = seq;
    snap.reason = trace::SnapshotReason::kSignal;
    snap.time = 5000 * seq;
    EXPECT_TRUE(w->AddSnapshot(snap).has_value());
    trace::Stream s;
    s.pid = s.tid = 77;
    s.snapshot = seq;
    EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  }
  EXPECT_TRUE(w->Finish().has_value());
  return dir;
}

// --split-snapshots: one file per snapshot, named NAME.snapN.SUFFIX, each
// listed in the summary and each holding its whole snapshot.
TEST(CmdDecodeTest, SplitSnapshotsWritesOneFilePerSnapshot) {
  TempDir tmp;
  fs::path dir = MakeTwoSnapshotTrace(tmp);
  for (const char* name : {"t.fxt.gz", "t.json", "t.events"}) {
    const fs::path out = tmp.path() / name;
    Outcome r = Ptsnap("decode '" + dir.string() + "' --split-snapshots -o '" + out.string() + "'");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("Wrote 2 file(s), one per snapshot (--split-snapshots):"));
    EXPECT_FALSE(fs::exists(out)) << name;
    const std::string n(name);
    const size_t dot = n.find('.');
    for (int seq : {1, 2}) {
      const fs::path part =
          tmp.path() / (n.substr(0, dot) + ".snap" + std::to_string(seq) + n.substr(dot));
      ASSERT_TRUE(fs::exists(part)) << part;
      EXPECT_THAT(r.out, HasSubstr("  " + part.string() + ": snapshot " + std::to_string(seq) +
                                   " (signal), "));
      auto text = output::ReadMaybeGzip(part);
      ASSERT_TRUE(text.has_value());
      EXPECT_THAT(*text, HasSubstr("fib")) << part;
      if (n == "t.events") {
        EXPECT_THAT(*text, HasSubstr("[snapshot " + std::to_string(seq) + ": signal]"));
        EXPECT_THAT(*text, ::testing::Not(HasSubstr("[snapshot " + std::to_string(3 - seq))));
      }
    }
  }
  // Each file has the slices of its snapshot alone: as many as --snapshot N gives.
  Outcome one = Ptsnap("decode '" + dir.string() + "' --snapshot 2 -o " +
                       (tmp.path() / "two.events").string());
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_EQ(*base::ReadFile(tmp.path() / "two.events"),
            *base::ReadFile(tmp.path() / "t.snap2.events"));

  // A snapshot the trace has not is a usage error that lists the ones it has
  // (report and replay read TRACE the same way).
  for (const char* cmd : {"decode", "report", "replay"})
    ExpectExit(std::string(cmd) + " '" + dir.string() + "' --snapshot 5", 2,
               "the trace has no snapshot 5 (its snapshots: 1, 2; `ptsnap info` lists them)");
  ExpectExit("decode '" + dir.string() + "' --split-snapshots --snapshot 1", 2,
             "--split-snapshots writes every snapshot to its own file");
  ExpectExit("decode '" + dir.string() + "' --split-snapshots --open", 2,
             "--open serves one file and --split-snapshots writes one per");
  ExpectExit("decode '" + MakeTrace(tmp).string() + "' --split-snapshots -o " +
                 (tmp.path() / "full.fxt").string(),
             1,
             "--split-snapshots: " + (tmp.path() / "trace").string() +
                 " has no snapshots (a full-execution recording");
}

// --help says what --multi-thread's default is under --emulate, which traces
// every thread whatever the flag (it once said only "the main thread").
TEST(CmdDecodeTest, RunHelpSaysEmulateTracesEveryThread) {
  Outcome help = Ptsnap("run --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_THAT(help.out, HasSubstr("--emulate always traces every thread"));
}

// run and attach take decode's flags and check them before recording.
TEST(CmdDecodeTest, RunAndAttachTakeTheDecodeFlags) {
  for (const char* cmd : {"run", "attach"}) {
    Outcome help = Ptsnap(std::string(cmd) + " --help");
    EXPECT_EQ(help.rc, 0);
    for (const char* flag : {"--max-depth", "--min-duration", "--no-inline", "--split-snapshots"})
      EXPECT_THAT(help.out, HasSubstr(flag)) << cmd;
  }
  ExpectExit("run --min-duration 5 -- /bin/true", 2,
             "--min-duration 5: expected a duration such as 1us");
  ExpectExit("run --no-decode --max-depth 3 -- /bin/true", 2,
             "and --no-decode skips it: pass them to `ptsnap decode` later");
  ExpectExit("attach -p 1 --no-decode --no-inline", 2, "--no-decode skips it");
}

TEST(CmdDecodeTest, DefaultOutputIsTraceFxtGzWithSummary) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("decode '" + dir.string() + "'", tmp.path().string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Hottest functions by total time:"));
  EXPECT_THAT(r.out, HasSubstr("Hottest functions by self time:"));
  EXPECT_THAT(r.out, HasSubstr("Decode errors: 0"));
  EXPECT_THAT(r.out, HasSubstr("open it at https://ui.perfetto.dev"));
  auto bytes = output::ReadMaybeGzip(tmp.path() / "trace.fxt.gz");
  ASSERT_TRUE(bytes.has_value());
  auto t = output::ParseFxt(*bytes);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_GT(t->events.size(), 50u);
  // What it found is noted for `info` (docs/decoding.md, "Impossible results").
  auto verdict = trace::ReadDecodeVerdict(dir);
  ASSERT_TRUE(verdict) << verdict.error().ToString();
  ASSERT_TRUE(verdict->has_value());
  EXPECT_EQ((*verdict)->by, "decode");
  EXPECT_EQ((*verdict)->output, "trace.fxt.gz");
  EXPECT_THAT(r.out, HasSubstr(": " + std::to_string((*verdict)->slices) + " slices on "));
  EXPECT_EQ((*verdict)->impossible, 0u);
  r = Ptsnap("info '" + dir.string() + "'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(
      r.out, HasSubstr(" by ptsnap decode (" + std::string(base::kVersion) +
                       ") into trace.fxt.gz: " + std::to_string((*verdict)->slices) + " slices\n"));
}

TEST(CmdDecodeTest, FormatFlagAndSuffix) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r =
      Ptsnap("decode '" + dir.string() + "' -o out.txt --format events", tmp.path().string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fs::exists(tmp.path() / "out.txt"));
  r = Ptsnap("decode '" + dir.string() + "' -o out.txt", tmp.path().string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: cannot tell the output format from 'out.txt'"));
  r = Ptsnap("decode '" + dir.string() + "' -o out.json", tmp.path().string());
  EXPECT_EQ(r.rc, 0) << r.out;
}

// -j N: the same file whatever N (docs/decoding.md, "Parallel decode");
// a value out of range is a usage error.
TEST(CmdDecodeTest, JobsFlagWritesTheSameFile) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  std::string file[3];
  std::string inflated[3];
  for (int j : {0, 1, 2}) {
    const std::string out = "j" + std::to_string(j) + ".fxt.gz";
    Outcome r = Ptsnap("decode '" + dir.string() + "' -j " + std::to_string(j) + " -o " + out,
                       tmp.path().string());
    EXPECT_EQ(r.rc, 0) << r.out;
    auto bytes = base::ReadFile(tmp.path() / out);
    ASSERT_TRUE(bytes.has_value()) << out;
    file[j] = *bytes;
    auto text = output::ReadMaybeGzip(tmp.path() / out);
    ASSERT_TRUE(text.has_value()) << out;
    inflated[j] = *text;
  }
  EXPECT_GT(file[1].size(), 100u);
  EXPECT_GT(inflated[1].size(), file[1].size());
  // -j 0 is -j 3 or more on a machine with 3 cores or more: the .gz is
  // compressed in blocks there, other bytes of the same content.
  EXPECT_TRUE(inflated[0] == inflated[1]) << "-j 0 (one per core) wrote another file";
  EXPECT_TRUE(file[2] == file[1]) << "-j 2 wrote another file";
  Outcome r = Ptsnap("decode '" + dir.string() + "' -j 5000", tmp.path().string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--jobs"));
}

// `report` decodes with one thread per core by default, as `decode` does,
// and its answer does not depend on the threads.
TEST(CmdDecodeTest, ReportDefaultsToOneThreadPerCoreWithTheSameAnswer) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome help = Ptsnap("report --help");
  EXPECT_EQ(help.rc, 0) << help.out;
  EXPECT_THAT(help.out, HasSubstr("-j,--jobs UINT:UINT in [0 - 1024]=0"));
  std::string out[3];
  for (int j : {0, 1, 2}) {
    Outcome r = Ptsnap("report '" + dir.string() + "' -j " + std::to_string(j));
    EXPECT_EQ(r.rc, 0) << r.out;
    out[j] = r.out;
  }
  Outcome by_default = Ptsnap("report '" + dir.string() + "'");
  EXPECT_EQ(by_default.rc, 0) << by_default.out;
  EXPECT_THAT(out[1], HasSubstr("calls"));
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[2], out[1]);
  EXPECT_EQ(by_default.out, out[1]);
}

TEST(CmdDecodeTest, Errors) {
  TempDir tmp;
  Outcome r = Ptsnap("decode '" + (tmp.path() / "missing").string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: decoding "));
  EXPECT_THAT(r.out, HasSubstr("does not exist"));
  r = Ptsnap("decode '" + tmp.path().string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("no manifest.json"));
  fs::path dir = MakeTrace(tmp);
  r = Ptsnap("decode '" + dir.string() + "' -o /nonexistent-dir/x.fxt");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("opening /nonexistent-dir/x.fxt for writing: No such file"));
  r = Ptsnap("decode");  // TRACE_DIR is required
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("TRACE_DIR is required"));
  r = Ptsnap("decode '" + dir.string() + "' --format svg");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--format: svg not in"));
}

// A trace of calls.S whose stream is `pt`.
fs::path MakeTraceOf(const TempDir& tmp, const std::string& name, const std::string& pt) {
  auto prog = decode::testing::LoadCallsProgram();
  fs::path dir = tmp.path() / name;
  auto w = trace::TraceWriter::Create(dir, decode::testing::CallsManifest(77));
  EXPECT_TRUE(w.has_value());
  std::string sb;
  for (const auto& r : decode::testing::CallsSideband(prog, 77)) sb += trace::SerializeRecord(r);
  EXPECT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))).has_value());
  trace::Stream s;
  s.pid = s.tid = 77;
  EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  EXPECT_TRUE(w->Finish().has_value());
  return dir;
}

// The JSON timeline's spans ("X" events), per thread.
struct Span {
  uint64_t ts = 0, dur = 0;  // ns
  bool inferred = false;
  size_t depth = 0;  // among the spans whose start was seen; 1 = lowest
};
std::vector<Span> JsonSpans(const fs::path& file) {
  std::vector<Span> out;
  auto text = base::ReadFile(file);
  EXPECT_TRUE(text.has_value());
  if (!text) return out;
  auto j = nlohmann::json::parse(*text);
  std::map<int64_t, std::vector<Span>> by_tid;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    Span s;
    // Microseconds with three decimals: exact nanoseconds.
    s.ts = static_cast<uint64_t>(std::llround(e["ts"].get<double>() * 1000));
    s.dur = static_cast<uint64_t>(std::llround(e["dur"].get<double>() * 1000));
    s.inferred = e.contains("args") && e["args"].contains("inferred_start_time");
    by_tid[e["tid"].get<int64_t>()].push_back(s);
  }
  for (auto& [tid, spans] : by_tid) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
    });
    std::vector<uint64_t> open_ends;
    for (Span& s : spans) {
      if (s.inferred) {
        out.push_back(s);
        continue;
      }
      while (!open_ends.empty() && open_ends.back() <= s.ts) open_ends.pop_back();
      s.depth = open_ends.size() + 1;
      open_ends.push_back(s.ts + s.dur);
      out.push_back(s);
    }
  }
  return out;
}

// The number right after `after` in `text`; UINT64_MAX when absent.
uint64_t NumberAfter(const std::string& text, const std::string& after) {
  const size_t at = text.find(after);
  if (at == std::string::npos) return UINT64_MAX;
  const size_t from = at + after.size();
  size_t to = from;
  while (to < text.size() && std::isdigit(static_cast<unsigned char>(text[to]))) ++to;
  return to == from ? UINT64_MAX : std::stoull(text.substr(from, to - from));
}

// A damaged trace (docs/errors.md, "decode"): a stream file cut short, and
// bytes that are no packet. decode and report decode what is intact, say
// how many bytes were lost where, write their output and exit 1, with
// either decoder. (Both exited 0: the cut stream decoded to 0 slices, the
// other said only "Decode errors: 1".)
TEST(CmdDecodeTest, DamagedStreamsAreDecodedAroundTheDamageAndExitOne) {
  TempDir tmp;
  auto prog = decode::testing::LoadCallsProgram();
  const std::string pt = decode::testing::CallsProgramStream(prog);
  const fs::path cut = MakeTraceOf(tmp, "cut", pt);
  const uint64_t keep = pt.size() * 3 / 4;
  fs::resize_file(cut / "pt/0.pt", keep);
  std::string bad = pt;
  bad.replace(bad.size() / 2, 16, std::string(16, '\x05'));  // 0x05: no packet
  const fs::path damaged =
      MakeTraceOf(tmp, "damaged", bad + decode::testing::CallsProgramStream(prog, 100000));
  for (const char* decoder : {"ours", "libipt"}) {
    SCOPED_TRACE(decoder);
    const fs::path out = tmp.path() / (std::string(decoder) + ".events");
    Outcome r =
        Ptsnap("decode '" + cut.string() + "' --decoder " + decoder + " -o " + out.string());
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("Damaged PT: " + std::to_string(pt.size() - keep) +
                                 " bytes lost or undecodable in 1 stream(s)"));
    EXPECT_THAT(r.out, HasSubstr("stream 0 (pt/0.pt) at offset " + std::to_string(keep) + ": " +
                                 std::to_string(pt.size() - keep) + " bytes missing"));
    EXPECT_THAT(r.out, HasSubstr("ptsnap: error: " + cut.string() + " is damaged: "));
    auto text = base::ReadFile(out);
    ASSERT_TRUE(text.has_value()) << "the output is written";
    EXPECT_THAT(*text, HasSubstr(" B main"));
    EXPECT_EQ(NumberAfter(r.out, "Decode errors: "), 1u) << r.out;

    r = Ptsnap("decode '" + damaged.string() + "' --decoder " + decoder + " -o " + out.string());
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("bytes undecodable (decode error: "));
    EXPECT_THAT(r.out, HasSubstr("ptsnap: error: " + damaged.string() + " is damaged: "));
    // The second run, after the damage, whole.
    EXPECT_THAT(r.out, HasSubstr("1 calls  main\n"));

    r = Ptsnap("report '" + damaged.string() + "' main --decoder " + decoder);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("bytes undecodable (decode error: "));
    EXPECT_THAT(r.out, HasSubstr("ptsnap: error: " + damaged.string() + " is damaged: "));
    EXPECT_THAT(r.out, HasSubstr("main: 1 calls"));
    // The cut stream's main: one call, cut, no duration.
    r = Ptsnap("report '" + cut.string() + "' main --decoder " + decoder);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("2 of these calls were cut by decode errors"));  // main, _start
    EXPECT_THAT(r.out, HasSubstr("bytes missing"));
    r = ptsnap::testing::RunPtsnap("report '" + cut.string() + "' --json --decoder " + decoder,
                                   {.stdout_only = true});
    EXPECT_EQ(r.rc, 1);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    bool seen = false;
    for (const auto& f : j["functions"]) {
      if (f["name"] != "main") continue;
      seen = true;
      EXPECT_EQ(f["calls"], 1);
      EXPECT_EQ(f["cut"], 1);
      EXPECT_TRUE(f["max_ns"].is_null()) << "no duration";
    }
    EXPECT_TRUE(seen) << r.out;
  }
  // The trace is left as it is, and what the last decode found is noted.
  EXPECT_EQ(fs::file_size(cut / "pt/0.pt"), keep);
  auto verdict = trace::ReadDecodeVerdict(cut);
  ASSERT_TRUE(verdict && verdict->has_value());
  EXPECT_EQ((*verdict)->by, "report");
  EXPECT_EQ((*verdict)->damaged_bytes, pt.size() - keep);
}

// --max-depth and --min-duration thin the file, and the summary counts
// exactly the spans left out (docs/decoding.md, "Sized for the viewer").
TEST(CmdDecodeTest, ThinningDropsDeepAndShortSpansAndCountsThem) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("decode '" + dir.string() + "' -o full.json", tmp.path().string());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("Thinned")));
  const std::vector<Span> full = JsonSpans(tmp.path() / "full.json");
  ASSERT_GT(full.size(), 20u);
  size_t max_depth = 0;
  std::vector<uint64_t> durs;
  for (const Span& s : full) {
    max_depth = std::max(max_depth, s.depth);
    durs.push_back(s.dur);
  }
  ASSERT_GE(max_depth, 3u) << "the test trace should nest";
  std::sort(durs.begin(), durs.end());
  const uint64_t min_ns = durs[durs.size() / 2];
  ASSERT_GT(min_ns, durs.front()) << "some spans must be shorter";

  const size_t depth = max_depth - 1;
  r = Ptsnap("decode '" + dir.string() + "' -o deep.json --max-depth " + std::to_string(depth),
             tmp.path().string());
  ASSERT_EQ(r.rc, 0) << r.out;
  size_t want_deep = 0;
  for (const Span& s : full) want_deep += s.depth > depth;
  EXPECT_THAT(r.out, HasSubstr("Thinned the timeline: dropped " + std::to_string(want_deep) +
                               " deeper than --max-depth " + std::to_string(depth)));
  const std::vector<Span> deep = JsonSpans(tmp.path() / "deep.json");
  EXPECT_EQ(deep.size(), full.size() - want_deep);
  for (const Span& s : deep) EXPECT_LE(s.depth, depth);
  EXPECT_EQ(NumberAfter(r.out, "the file holds "), deep.size()) << r.out;

  r = Ptsnap(
      "decode '" + dir.string() + "' -o short.json --min-duration " + std::to_string(min_ns) + "ns",
      tmp.path().string());
  ASSERT_EQ(r.rc, 0) << r.out;
  size_t want_short = 0;
  for (const Span& s : full) want_short += s.dur < min_ns;
  EXPECT_THAT(r.out,
              HasSubstr("dropped " + std::to_string(want_short) + " shorter than --min-duration "));
  const std::vector<Span> thin = JsonSpans(tmp.path() / "short.json");
  EXPECT_EQ(thin.size(), full.size() - want_short);
  for (const Span& s : thin) EXPECT_GE(s.dur, min_ns);

  // FXT too: the strict reader accepts the thinned file.
  r = Ptsnap("decode '" + dir.string() + "' -o t.fxt --max-depth 1 --min-duration 1ns",
             tmp.path().string());
  ASSERT_EQ(r.rc, 0) << r.out;
  auto bytes = output::ReadMaybeGzip(tmp.path() / "t.fxt");
  ASSERT_TRUE(bytes.has_value());
  auto t = output::ParseFxt(*bytes);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_THAT(r.out, HasSubstr("deeper than --max-depth 1, "));

  r = Ptsnap("decode '" + dir.string() + "' -o x.fxt --min-duration 5", tmp.path().string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--min-duration 5: expected a duration such as 1us"));
  r = Ptsnap("decode '" + dir.string() + "' -o x.fxt --max-depth 0", tmp.path().string());
  EXPECT_EQ(r.rc, 2);
  r = Ptsnap("decode '" + dir.string() + "' -o x.events --open", tmp.path().string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--open serves a timeline to ui.perfetto.dev"));
}

// `ptsnap serve` (cmd_serve.cpp, serve/trace_server.cpp).
// Starts `ptsnap ARGS` with its stdout readable; the URL it prints.
struct Background {
  FILE* pipe = nullptr;
  std::string out;
  uint16_t port = 0;
  std::string path;
};
Background StartServing(const std::string& args, const std::string& cwd) {
  Background b;
  const std::string cmd = "cd '" + cwd + "' && exec '" + std::getenv("PTSNAP_BIN") + "' " + args;
  b.pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(b.pipe, nullptr);
  char line[4096];
  while (b.pipe != nullptr && std::fgets(line, sizeof line, b.pipe) != nullptr) {
    b.out += line;
    const std::string l = line;
    const std::string prefix = "Serving ";
    if (const size_t at = l.find(" at http://127.0.0.1:"); l.starts_with(prefix) && at != l.npos) {
      const size_t port_at = at + std::strlen(" at http://127.0.0.1:");
      const size_t slash = l.find('/', port_at);
      b.port = static_cast<uint16_t>(std::stoi(l.substr(port_at, slash - port_at)));
      b.path = l.substr(slash, l.find('\n') - slash);
      break;
    }
  }
  return b;
}

std::string Get(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  } else {
    ADD_FAILURE() << "connect: " << std::strerror(errno);
  }
  ::close(fd);
  return out;
}

TEST(CmdServeTest, ServesTheFileOnceAndPrintsThePerfettoLink) {
  TempDir tmp;
  const std::string content =
      std::string("\x10\0\x04\x46xt trace bytes", 18) + std::string(5000, 'z');
  tmp.Write("t 1.fxt", content);
  Background b = StartServing("serve 't 1.fxt' --port 0", tmp.path().string());
  ASSERT_NE(b.port, 0) << b.out;
  EXPECT_EQ(b.path, "/t%201.fxt");
  const std::string got = Get(b.port, b.path);
  char rest[4096];
  while (std::fgets(rest, sizeof rest, b.pipe) != nullptr) b.out += rest;
  const int st = ::pclose(b.pipe);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << b.out;
  EXPECT_THAT(b.out, HasSubstr("Open it in Perfetto: https://ui.perfetto.dev/#!/?url=http://"
                               "127.0.0.1:" +
                               std::to_string(b.port) + "/t%201.fxt\n"));
  EXPECT_THAT(b.out, HasSubstr("note: ui.perfetto.dev fetches traces from port 9001 only"));
  EXPECT_THAT(got, HasSubstr("Access-Control-Allow-Origin: https://ui.perfetto.dev\r\n"));
  ASSERT_NE(got.find("\r\n\r\n"), std::string::npos);
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), content);
}

TEST(CmdServeTest, DecodeOpenServesTheDecodedFile) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Background b = StartServing("decode '" + dir.string() + "' -o t.fxt.gz --open --port 0",
                              tmp.path().string());
  ASSERT_NE(b.port, 0) << b.out;
  EXPECT_THAT(b.out, HasSubstr("Hottest functions by total time:"));
  EXPECT_EQ(b.path, "/t.fxt.gz");
  const std::string got = Get(b.port, b.path);
  char rest[4096];
  while (std::fgets(rest, sizeof rest, b.pipe) != nullptr) b.out += rest;
  const int st = ::pclose(b.pipe);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << b.out;
  EXPECT_THAT(b.out, HasSubstr("Sent t.fxt.gz 1 time(s)"));
  auto file = base::ReadFile(tmp.path() / "t.fxt.gz");
  ASSERT_TRUE(file.has_value());
  ASSERT_NE(got.find("\r\n\r\n"), std::string::npos);
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), *file);
}

TEST(CmdServeTest, Errors) {
  TempDir tmp;
  Outcome r = Ptsnap("serve '" + (tmp.path() / "nope.fxt").string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: serving "));
  EXPECT_THAT(r.out, HasSubstr("nope.fxt: No such file or directory"));
  r = Ptsnap("serve '" + tmp.path().string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("is not a regular file"));
  // A trace directory: decode it first, and how.
  fs::path dir = MakeTrace(tmp);
  r = Ptsnap("serve '" + dir.string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("it is a trace directory (the raw recording), not a decoded trace: "
                               "decode it first, e.g. `ptsnap decode " +
                               dir.string() + " --open`"));
  // A port someone else holds.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  tmp.Write("t.fxt", "x");
  r = Ptsnap("serve '" + (tmp.path() / "t.fxt").string() + "' --port " + port);
  ::close(fd);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("127.0.0.1:" + port + " is already in use"));
  EXPECT_THAT(r.out, HasSubstr("pass --port N"));
}

// `ptsnap report` reads the same trace (cmd_report.cpp).
TEST(CmdReportTest, TableHistogramSlowestJsonAndFolded) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("report '" + dir.string() + "' fib --slowest 2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("function"));
  EXPECT_THAT(r.out, HasSubstr("p99"));
  EXPECT_THAT(r.out, HasSubstr("fib: "));
  EXPECT_THAT(r.out, HasSubstr("Slowest calls of fib:"));
  EXPECT_THAT(r.out, HasSubstr("  1. "));

  r = ptsnap::testing::RunPtsnap("report '" + dir.string() + "' --json --sort calls",
                                 {.stdout_only = true});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"span_ns\""));
  EXPECT_THAT(r.out, HasSubstr("\"p99_ns\""));
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"fib\""));

  r = Ptsnap("report '" + dir.string() + "' -o " + (tmp.path() / "t.folded").string());
  EXPECT_EQ(r.rc, 0) << r.out;
  auto folded = base::ReadFile(tmp.path() / "t.folded");
  ASSERT_TRUE(folded.has_value());
  EXPECT_THAT(*folded, HasSubstr(";fib "));
}

// -o FILE.pb.gz / .pprof: a gzipped pprof profile; .pb: the same, raw.
// (src/report/pprof_test.cpp decodes the fields; here: the CLI writes it.)
TEST(CmdReportTest, PprofProfileIsGzippedProtobufNamingTheFunctions) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  for (const char* name : {"t.pb.gz", "t.pprof", "t.pb"}) {
    const fs::path out = tmp.path() / name;
    Outcome r = Ptsnap("report '" + dir.string() + "' -o " + out.string());
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("pprof profile"));
    auto raw = base::ReadFile(out);
    ASSERT_TRUE(raw.has_value()) << name;
    ASSERT_GE(raw->size(), 2u);
    const bool gz =
        static_cast<uint8_t>((*raw)[0]) == 0x1f && static_cast<uint8_t>((*raw)[1]) == 0x8b;
    EXPECT_EQ(gz, std::string(name) != "t.pb") << name;
    auto bytes = output::ReadMaybeGzip(out);
    ASSERT_TRUE(bytes.has_value());
    // Profile.sample_type (field 1, length-delimited) comes first; the
    // string table holds the sample types and the functions.
    EXPECT_EQ((*bytes)[0], 0x0a);
    for (const char* s : {"wall", "nanoseconds", "calls", "count", "fib", "main"})
      EXPECT_THAT(*bytes, HasSubstr(s)) << name;
  }
}

// The real pprof reads it, when this machine has one (`pprof`, or Go's
// `go tool pprof`).
TEST(CmdReportTest, PprofReadsTheProfile) {
  std::string tool;
  if (ptsnap::testing::RunShell("command -v pprof").status == 0) {
    tool = "pprof";
  } else if (ptsnap::testing::RunShell("command -v go").status == 0) {
    tool = "go tool pprof";
  } else {
    GTEST_SKIP() << "neither pprof nor go is in PATH (go install "
                    "github.com/google/pprof@latest, or apt-get install golang): the profile's "
                    "fields are checked by src/report/pprof_test.cpp only";
  }
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  const fs::path out = tmp.path() / "t.pb.gz";
  Outcome r = Ptsnap("report '" + dir.string() + "' -o " + out.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  auto top = ptsnap::testing::RunShell(tool + " -top -sample_index=wall '" + out.string() + "'");
  EXPECT_EQ(top.status, 0) << top.out;
  EXPECT_THAT(top.out, HasSubstr("fib"));
  EXPECT_THAT(top.out, HasSubstr("Type: wall"));
  auto calls = ptsnap::testing::RunShell(tool + " -top -sample_index=calls '" + out.string() + "'");
  EXPECT_EQ(calls.status, 0) << calls.out;
  EXPECT_THAT(calls.out, HasSubstr("Type: calls"));
}

// The report of a trace directory less what only its manifest says: the
// clock's header line and JSON key (a decoded file does not carry it).
std::string WithoutClock(std::string report) {
  for (const std::string start : {"\nClock: ", "\n  \"clock\": "}) {
    const size_t at = report.find(start);
    if (at != std::string::npos) report.erase(at, report.find('\n', at + 1) - at);
  }
  return report;
}

// `ptsnap report FILE` prints, for a file `ptsnap decode` wrote from the
// trace directory, what the report of the directory prints: the table,
// percentiles, histogram, slowest calls with their trees (fib's recursion),
// JSON, folded stacks, per thread, windows (not the clock, which a file
// does not say).
void ExpectFileReportsLikeTheTraceDirectory(const TempDir& tmp, const fs::path& dir,
                                            const char* name) {
  const fs::path file = tmp.path() / name;
  Outcome d = Ptsnap("decode '" + dir.string() + "' -o '" + file.string() + "'");
  ASSERT_EQ(d.rc, 0) << d.out;
  for (const std::string options :
       {" fib --slowest 2", " --json --sort calls --limit 0", " --per-thread --sort self",
        " fib --since 100ns --until 5us --json"}) {
    auto want = ptsnap::testing::RunPtsnap("report '" + dir.string() + "'" + options,
                                           {.stdout_only = true});
    auto got = ptsnap::testing::RunPtsnap("report '" + file.string() + "'" + options,
                                          {.stdout_only = true});
    ASSERT_EQ(want.rc, 0) << want.out;
    EXPECT_EQ(got.rc, 0) << name << options;
    EXPECT_EQ(got.out, WithoutClock(want.out)) << name << options;
  }
  Outcome r = Ptsnap("report '" + dir.string() + "' -o " + (tmp.path() / "d.folded").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Ptsnap("report '" + file.string() + "' -o " + (tmp.path() / "f.folded").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  auto from_dir = base::ReadFile(tmp.path() / "d.folded");
  auto from_file = base::ReadFile(tmp.path() / "f.folded");
  ASSERT_TRUE(from_dir.has_value() && from_file.has_value());
  EXPECT_THAT(*from_dir, HasSubstr(";fib;fib "));
  EXPECT_EQ(*from_file, *from_dir) << name;
}

TEST(CmdReportTest, DecodedFxtFileReportsLikeTheTraceDirectory) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  for (const char* name : {"t.fxt", "t.fxt.gz"})
    ExpectFileReportsLikeTheTraceDirectory(tmp, dir, name);
}

// Chrome JSON too: its frames come as they end and are put back in order
// (src/report/trace_file_test.cpp has the inferred frames and two threads).
TEST(CmdReportTest, DecodedJsonFileReportsLikeTheTraceDirectory) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  for (const char* name : {"t.json", "t.json.gz"})
    ExpectFileReportsLikeTheTraceDirectory(tmp, dir, name);
  // Two threads: each one's frames are put back in order on their own.
  fs::path threads = MakeTrace(tmp, true);
  auto report = ptsnap::testing::RunPtsnap("report '" + threads.string() + "' --per-thread",
                                           {.stdout_only = true});
  EXPECT_THAT(report.out, HasSubstr(", 2 thread(s), "));
  ExpectFileReportsLikeTheTraceDirectory(tmp, threads, "threads.json");
}

TEST(CmdReportTest, FileErrors) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  const fs::path fxt = tmp.path() / "t.fxt";
  ASSERT_EQ(Ptsnap("decode '" + dir.string() + "' -o '" + fxt.string() + "'").rc, 0);
  ExpectExit("report '" + fxt.string() + "' --decoder libipt --snapshot 1", 2,
             "--decoder, --snapshot needs the trace directory: ");
  ExpectExit("report '" + fxt.string() + "' --no-inline", 2,
             "--no-inline needs the trace directory");
  const fs::path json = tmp.path() / "t.json";
  ASSERT_EQ(Ptsnap("decode '" + dir.string() + "' -o '" + json.string() + "'").rc, 0);
  auto json_text = base::ReadFile(json);
  ASSERT_TRUE(json_text.has_value());
  const fs::path cut_json = tmp.path() / "cut.json";
  ASSERT_TRUE(base::WriteFileAtomic(cut_json, json_text->substr(0, json_text->size() / 2), 0644)
                  .has_value());
  ExpectExit("report '" + cut_json.string() + "'", 1,
             "ptsnap: error: reading " + cut_json.string() + ": JSON at offset " +
                 std::to_string(json_text->size() / 2) + ": syntax error");
  const fs::path other = tmp.path() / "other.json";
  ASSERT_TRUE(base::WriteFileAtomic(other, "{\"version\": 1}", 0644).has_value());
  ExpectExit("report '" + other.string() + "'", 1,
             other.string() +
                 ": JSON at offset 13: not a Chrome trace: the object has no "
                 "\"traceEvents\" array");
  const fs::path overlap = tmp.path() / "overlap.json";
  ASSERT_TRUE(base::WriteFileAtomic(overlap,
                                    R"([{"ph":"X","name":"f","pid":1,"tid":1,"ts":0,"dur":2},)"
                                    R"({"ph":"X","name":"g","pid":1,"tid":1,"ts":1,"dur":2}])",
                                    0644)
                  .has_value());
  ExpectExit("report '" + overlap.string() + "'", 1,
             overlap.string() + ": JSON at offset 54: frames overlap without nesting on thread 1");
  auto bytes = base::ReadFile(fxt);
  ASSERT_TRUE(bytes.has_value());
  const fs::path cut = tmp.path() / "cut.fxt";
  ASSERT_TRUE(base::WriteFileAtomic(cut, bytes->substr(0, bytes->size() - 8), 0644).has_value());
  Outcome r = Ptsnap("report '" + cut.string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out,
              HasSubstr("ptsnap: error: reading " + cut.string() + ": FXT record at offset "));
  EXPECT_THAT(r.out, HasSubstr(": record runs past the end"));
  const fs::path text = tmp.path() / "notes.txt";
  ASSERT_TRUE(base::WriteFileAtomic(text, "hello", 0644).has_value());
  ExpectExit("report '" + text.string() + "'", 2,
             "is neither a trace directory nor a decoded file (FXT: .fxt, .fxt.gz; Chrome JSON: "
             ".json, .json.gz)");
}

TEST(CmdReportTest, Errors) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("report '" + dir.string() + "' --slowest 3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--slowest N lists the slowest calls of the functions named"));
  for (const char* flag : {"--callers", "--callees"}) {
    r = Ptsnap("report '" + dir.string() + "' " + flag);
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.out, HasSubstr(std::string(flag) +
                                 " lists who called (what was called by) the "
                                 "functions named after TRACE: ptsnap report TRACE FUNC " +
                                 flag));
  }
  r = Ptsnap("report '" + dir.string() + "' --sort speed");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--sort speed: use total, self, calls, p99, max or name"));
  r = Ptsnap("report '" + dir.string() + "' --since 5");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("expected a duration such as 10ms"));
  r = Ptsnap("report '" + dir.string() + "' --since 2ms --until 1ms");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--until must be later than --since"));
  r = Ptsnap("report '" + dir.string() + "' -o x.svg");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("name the file .folded) or a pprof profile (.pprof or .pb.gz)"));
  r = Ptsnap("report '" + (tmp.path() / "missing").string() + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("does not exist"));
}

// `report A --diff B` on two Chrome JSON files: A main { f; g },
// B main { f; k } (microseconds).
TEST(CmdReportTest, DiffComparesTwoDecodedFiles) {
  TempDir tmp;
  auto x = [](const char* name, int ts, int dur) {
    return std::string(R"({"ph":"X","pid":1,"tid":1,"name":")") + name +
           "\",\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) + "}";
  };
  const fs::path a = tmp.path() / "a.json", b = tmp.path() / "b.json";
  ASSERT_TRUE(
      base::WriteFileAtomic(
          a, "[" + x("main", 0, 100) + "," + x("f", 10, 20) + "," + x("g", 40, 20) + "]", 0644)
          .has_value());
  ASSERT_TRUE(
      base::WriteFileAtomic(
          b, "[" + x("main", 0, 200) + "," + x("f", 10, 80) + "," + x("k", 120, 30) + "]", 0644)
          .has_value());
  const std::string ab = "report '" + a.string() + "' --diff '" + b.string() + "'";
  auto r = ptsnap::testing::RunPtsnap(ab + " f", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("A (baseline) " + a.string() + ": span 100.000 us"));
  EXPECT_THAT(r.out, HasSubstr("B            " + b.string() + ": span 200.000 us"));
  EXPECT_THAT(r.out, HasSubstr("+100.000 us  +100.0%"));  // main
  EXPECT_THAT(r.out, HasSubstr("+60.000 us  +300.0%"));   // f
  EXPECT_THAT(r.out, HasSubstr("new"));                   // k
  EXPECT_THAT(r.out, HasSubstr("gone"));                  // g
  EXPECT_THAT(r.out, HasSubstr("\nf: 1 calls in A, 1 in B, durations:\n"));

  r = ptsnap::testing::RunPtsnap(ab + " --json --limit 2", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["a"]["path"], a.string());
  EXPECT_EQ(j["b"]["span_ns"], 200000);
  ASSERT_EQ(j["functions"].size(), 2u);
  EXPECT_EQ(j["functions"][0]["name"], "main");
  EXPECT_EQ(j["functions"][1]["total_change_ns"], 60000);

  const fs::path diff = tmp.path() / "d.difffolded";
  Outcome o = Ptsnap(ab + " -o '" + diff.string() + "'");
  ASSERT_EQ(o.rc, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("differential folded stacks"));
  auto folded = base::ReadFile(diff);
  ASSERT_TRUE(folded.has_value());
  EXPECT_EQ(*folded,
            "main 60000 90000\n"
            "main;f 20000 80000\n"
            "main;g 20000 0\n"
            "main;k 0 30000\n");
}

// A Chrome JSON file: thread 1 main [0,100] { f [10,50] { g [20,40] };
// g [60,70] }, thread 2 g [0,50] (microseconds).
fs::path WriteCallsJson(const TempDir& tmp) {
  auto x = [](int tid, const char* name, int ts, int dur) {
    return std::string(R"({"ph":"X","pid":1,"tid":)") + std::to_string(tid) + R"(,"name":")" +
           name + "\",\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) + "}";
  };
  const fs::path file = tmp.path() / "calls.json";
  EXPECT_TRUE(base::WriteFileAtomic(file,
                                    "[" + x(1, "main", 0, 100) + "," + x(1, "f", 10, 40) + "," +
                                        x(1, "g", 20, 20) + "," + x(1, "g", 60, 10) + "," +
                                        x(2, "g", 0, 50) + "]",
                                    0644)
                  .has_value());
  return file;
}

// Percentages of the time frames were on the stacks (150 us), callers and
// callees of a FUNC.
TEST(CmdReportTest, PercentagesCallersAndCallees) {
  TempDir tmp;
  const fs::path file = WriteCallsJson(tmp);
  auto r = ptsnap::testing::RunPtsnap("report '" + file.string() + "' g --callers --callees",
                                      {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("total% and self%: of 150.000 us, the time some frame was on a "
                               "thread's stack"));
  // g: 80 us of 150.
  EXPECT_THAT(r.out, HasSubstr("80.000 us   53.3%    80.000 us   53.3%"));
  EXPECT_THAT(r.out, HasSubstr("Callers of g (total 80.000 us"));
  EXPECT_THAT(r.out, HasSubstr("  (root)                                           1    50.000 us"
                               "   62.5%\n"
                               "  f                                                1    20.000 us"
                               "   25.0%\n"
                               "  main                                             1    10.000 us"
                               "   12.5%\n"));
  EXPECT_THAT(r.out, HasSubstr("Callees of g (total 80.000 us"));
  EXPECT_THAT(r.out, HasSubstr("  (no callees)\n"));
  r = ptsnap::testing::RunPtsnap("report '" + file.string() + "' main --callees --json",
                                 {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["traced_ns"], 150000);
  EXPECT_EQ(j["functions"][0]["name"], "main");
  EXPECT_DOUBLE_EQ(j["functions"][0]["total_pct"].get<double>(), 66.67);
  ASSERT_EQ(j["callees"].size(), 1u);
  EXPECT_EQ(j["callees"][0]["callees"][0]["name"], "f");
  EXPECT_EQ(j["callees"][0]["callees"][0]["total_ns"], 40000);
  EXPECT_DOUBLE_EQ(j["callees"][0]["callees"][0]["share_pct"].get<double>(), 40.0);
  EXPECT_EQ(j["callees"][0]["callees"][1]["name"], "g");
  EXPECT_FALSE(j.contains("callers"));
}

// `ptsnap replay` on the same file: each thread's calls in order.
TEST(CmdReplayTest, ListsTheCallsOfADecodedFile) {
  TempDir tmp;
  const fs::path file = WriteCallsJson(tmp);
  auto r =
      ptsnap::testing::RunPtsnap("replay '" + file.string() + "' --tid 1", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out,
            "# DURATION     TID     FUNCTION\n"
            "           [     1] | main() {\n"
            "           [     1] |   f() {\n"
            " 20.000 us [     1] |     g();\n"
            " 40.000 us [     1] |   } /* f */\n"
            " 10.000 us [     1] |   g();\n"
            "100.000 us [     1] | } /* main */\n");
  r = ptsnap::testing::RunPtsnap("replay '" + file.string() + "' --depth 1 --limit 1",
                                 {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("100.000 us [     1] | main();\n"));
  EXPECT_THAT(r.out, HasSubstr("# 1 of 2 lines shown: --limit N shows more (0: all)"));
  r = ptsnap::testing::RunPtsnap("replay '" + file.string() + "' --tid 1 --since 15us --until 45us",
                                 {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out,
            "# DURATION     TID     FUNCTION\n"
            "           [     1] | main() { /* entered before the window */\n"
            "           [     1] |   f() { /* entered before the window */\n"
            " 20.000 us [     1] |     g();\n"
            "           [     1] |   } /* f: still running at the window's end */\n"
            "           [     1] | } /* main: still running at the window's end */\n");
}

TEST(CmdReplayTest, Errors) {
  TempDir tmp;
  const fs::path file = WriteCallsJson(tmp);
  const std::string replay = "replay '" + file.string() + "' ";
  ExpectExit(replay + "--tid 3", 1,
             "--tid 3: no thread 3 in " + file.string() + " (`ptsnap report " + file.string() +
                 " --per-thread` lists its threads)");
  ExpectExit(replay + "--since 5", 2, "--since 5: expected a duration such as 10ms or 1.5s");
  ExpectExit(replay + "--since 2ms --until 1ms", 2, "--until must be later than --since");
  ExpectExit(replay + "--snapshot 1", 2, "--snapshot needs the trace directory");
  ExpectExit("replay '" + (tmp.path() / "missing").string() + "'", 1, "does not exist");
}

// The report says what its times are, and --diff warns when A and B were
// timed on different clocks (#41: a wait is time in an --emulate-waits
// recording and none in a plain --emulate one).
TEST(CmdReportTest, TheClockIsSaidAndDifferentClocksAreFlagged) {
  TempDir tmp;
  const fs::path hw = MakeTrace(
      tmp, false, [](trace::Manifest& m) { m.source = trace::Source::kHardware; }, "hw");
  const fs::path waits = MakeTrace(
      tmp, false,
      [](trace::Manifest& m) {
        m.source = trace::Source::kEmulated;
        m.virtual_clock = trace::VirtualClock::kInstructionsAndWaits;
      },
      "waits");
  auto r = ptsnap::testing::RunPtsnap("report '" + waits.string() + "'", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nClock: virtual clock: 1 ns per instruction plus wall time "
                               "blocked in syscalls.\n"));
  r = ptsnap::testing::RunPtsnap("report '" + hw.string() + "' --json", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["clock"],
            "perf-clock ns from the CPU's timestamp counter");

  const std::string ab = "report '" + hw.string() + "' --diff '" + waits.string() + "'";
  r = ptsnap::testing::RunPtsnap(ab, {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("calls; perf-clock ns from the CPU's timestamp counter\n"));
  EXPECT_THAT(r.out, HasSubstr("warning: A and B were timed on different clocks (above): their "
                               "times do not compare"));
  r = ptsnap::testing::RunPtsnap(ab + " --json", {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["b"]["clock"],
            "virtual clock: 1 ns per instruction plus wall time blocked in syscalls");
  // The same clock: no warning.
  r = ptsnap::testing::RunPtsnap("report '" + hw.string() + "' --diff '" + hw.string() + "'",
                                 {.stdout_only = true});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("different clocks")));
}

TEST(CmdReportTest, DiffErrors) {
  TempDir tmp;
  const fs::path a = tmp.path() / "a.json";
  ASSERT_TRUE(
      base::WriteFileAtomic(a, R"([{"ph":"X","pid":1,"tid":1,"name":"f","ts":0,"dur":1}])", 0644)
          .has_value());
  const std::string report = "report '" + a.string() + "' ";
  const fs::path missing = tmp.path() / "missing";
  ExpectExit(
      report + "--diff '" + missing.string() + "'", 1,
      "ptsnap: error: decoding " + missing.string() + ": " + missing.string() + " does not exist");
  const fs::path text = tmp.path() / "notes.txt";
  ASSERT_TRUE(base::WriteFileAtomic(text, "hello", 0644).has_value());
  ExpectExit(report + "--diff '" + text.string() + "'", 2,
             text.string() + " is neither a trace directory nor a decoded file");
  const std::string diff = report + "--diff '" + a.string() + "' ";
  ExpectExit(diff + "--per-thread", 2,
             "--per-thread with --diff: the comparison has one row per function");
  ExpectExit(diff + "f --slowest 2", 2, "--slowest with --diff: it lists one trace's calls");
  ExpectExit(diff + "f --by-mark", 2, "--by-mark with --diff: it lists one trace's calls");
  ExpectExit(diff + "f --callers", 2, "--callers with --diff: it lists one trace's calls");
  ExpectExit(diff + "f --callees", 2, "--callees with --diff: it lists one trace's calls");
  ExpectExit(diff + "-o x.folded", 2,
             "-o x.folded with --diff: the comparison writes differential folded stacks (name "
             "the file .difffolded)");
  ExpectExit(report + "-o x.difffolded", 2,
             "-o x.difffolded: differential folded stacks compare two traces: ptsnap report A "
             "--diff B -o x.difffolded");
  EXPECT_FALSE(fs::exists("x.difffolded"));
}

TEST(CmdDecodeTest, DefaultOutputIsNamedAfterAPtsnapDirectory) {
  TempDir tmp;
  fs::path dir = MakeTraceOf(
      tmp, "x.ptsnap", decode::testing::CallsProgramStream(decode::testing::LoadCallsProgram()));
  Outcome r = Ptsnap("decode x.ptsnap", tmp.path().string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fs::exists(tmp.path() / "x.fxt.gz"));
  EXPECT_FALSE(fs::exists(tmp.path() / "trace.fxt.gz"));
  // Named by its path, with a trailing slash: still beside us, by its name.
  fs::create_directory(tmp.path() / "out");
  r = Ptsnap("decode '" + (tmp.path() / "x.ptsnap").string() + "/'", (tmp.path() / "out").string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fs::exists(tmp.path() / "out" / "x.fxt.gz"));
}

}  // namespace
}  // namespace ptsnap::cli
