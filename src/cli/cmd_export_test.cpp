// Runs the built `ptsnap export` (PTSNAP_BIN) and checks what a user sees:
// the summary line, perf.data on disk, error lines and exit codes
// (docs/errors.md, "## export").
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file_util.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using Outcome = ptsnap::testing::PtsnapRun;

Outcome Ptsnap(const std::string& args) { return ptsnap::testing::RunPtsnap(args); }

fs::path MakeTrace(const TempDir& tmp, bool with_stream = true) {
  fs::path dir = tmp.path() / "t";
  trace::Manifest m;
  m.pt.pmu_type = 8;
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_TRUE(w.has_value());
  if (with_stream) {
    std::string psb;
    for (int i = 0; i < 8; ++i) psb += "\x02\x82";
    trace::Stream s;
    s.pid = s.tid = 7;
    EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(psb.data(), psb.size()))));
  }
  EXPECT_TRUE(w->Finish());
  return dir;
}

TEST(CmdExportTest, WritesPerfDataAndSaysHowToViewIt) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  Outcome r = Ptsnap("export " + dir.string() + " -o " + (tmp.path() / "p.data").string());
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1 AUXTRACE buffers"));
  EXPECT_THAT(r.out, HasSubstr("perf script -i"));
  auto bytes = base::ReadFile(tmp.path() / "p.data");
  ASSERT_TRUE(bytes.has_value());
  EXPECT_THAT(*bytes, StartsWith("PERFILE2"));
}

TEST(CmdExportTest, RefusesToOverwriteWithoutForce) {
  TempDir tmp;
  fs::path dir = MakeTrace(tmp);
  fs::path out = tmp.Write("p.data", "keep me");
  Outcome r = Ptsnap("export " + dir.string() + " -o " + out.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: exporting " + dir.string() + ": " + out.string() +
                               " already exists: choose another output or pass --force"));
  EXPECT_EQ(*base::ReadFile(out), "keep me");
  EXPECT_EQ(Ptsnap("export --force " + dir.string() + " -o " + out.string()).rc, 0);
  // --force replaced the file with a perf.data (perf's magic first).
  auto written = base::ReadFile(out);
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->substr(0, 8), "PERFILE2");
}

TEST(CmdExportTest, ClearErrors) {
  TempDir tmp;
  Outcome r = Ptsnap("export " + (tmp.path() / "none").string() + " -o x.data");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("does not exist"));

  fs::path empty = MakeTrace(tmp, false);
  r = Ptsnap("export " + empty.string() + " -o " + (tmp.path() / "e.data").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("the trace has no PT streams (nothing was captured)"));
  EXPECT_FALSE(fs::exists(tmp.path() / "e.data"));

  TempDir tmp2;
  fs::path dir = MakeTrace(tmp2);
  fs::create_directories(tmp2.path() / "outdir");
  r = Ptsnap("export -f " + dir.string() + " -o " + (tmp2.path() / "outdir").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("is a directory: name a file to write perf.data to"));

  r = Ptsnap("export " + dir.string() + " -o " + (tmp2.path() / "no/such/dir/p.data").string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("writing "));
}

}  // namespace
}  // namespace ptsnap::cli
