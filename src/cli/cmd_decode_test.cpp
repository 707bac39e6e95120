// Runs the built `ptsnap decode` (PTSNAP_BIN) and checks what a user sees:
// the summary, the output file, error lines and exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file_util.h"
#include "decode/test_stream.h"
#include "output/fxt_reader.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;

using Outcome = ptsnap::testing::PtsnapRun;

Outcome Ptsnap(const std::string& args, const std::string& cwd = ".") {
  return ptsnap::testing::RunPtsnap(args, {.cwd = cwd, .stdout_only = false});
}

fs::path MakeTrace(const TempDir& tmp) {
  auto prog = decode::testing::LoadCallsProgram();
  fs::path dir = tmp.path() / "trace";
  auto w = trace::TraceWriter::Create(dir, decode::testing::CallsManifest(77));
  EXPECT_TRUE(w.has_value());
  std::string sb;
  for (const auto& r : decode::testing::CallsSideband(prog, 77)) sb += trace::SerializeRecord(r);
  EXPECT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))).has_value());
  std::string pt = decode::testing::CallsProgramStream(prog);
  trace::Stream s;
  s.pid = s.tid = 77;
  EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  EXPECT_TRUE(w->Finish().has_value());
  return dir;
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

TEST(CmdReportTest, Errors) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("report '" + dir.string() + "' --slowest 3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--slowest N lists the slowest calls of the functions named"));
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

}  // namespace
}  // namespace ptsnap::cli
