// Runs the built `ptsnap probe` (PTSNAP_BIN) and checks what a user sees:
// the table, the JSON, error lines and exit codes (docs/probe.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_ptsnap.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::cli {
namespace {

using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;

using Outcome = ptsnap::testing::PtsnapRun;

// `ptsnap ARGS`; stderr joins stdout unless `stdout_only`.
Outcome Ptsnap(const std::string& args, bool stdout_only = false) {
  return ptsnap::testing::RunPtsnap(args, {.cwd = "", .stdout_only = stdout_only});
}

TEST(ProbeCli, RootDirectoryMissing) {
  Outcome o = Ptsnap("probe --root /nonexistent/capture");
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.out,
            "ptsnap: error: --root /nonexistent/capture is not a directory; give the folder that "
            "holds a captured sys/ and proc/\n");
}

TEST(ProbeCli, RootIsAFile) {
  TempDir tmp;
  auto file = tmp.Write("capture.tar", "not a directory");
  Outcome o = Ptsnap("probe --root '" + file.string() + "'");
  EXPECT_EQ(o.rc, 1);
  EXPECT_THAT(o.out, HasSubstr("is not a directory"));
}

TEST(ProbeCli, UnknownOptionIsUsageError) {
  Outcome o = Ptsnap("probe --bogus");
  EXPECT_EQ(o.rc, 2);
  EXPECT_THAT(o.out, HasSubstr("--bogus"));
}

TEST(ProbeCli, LiveJsonIsValidAndExitCodeMatchesVerdict) {
  Outcome o = Ptsnap("probe --json", /*stdout_only=*/true);
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_EQ(j["schema"], "ptsnap-probe/1");
  ASSERT_TRUE(j["checks"].is_array());
  EXPECT_EQ(j["checks"].size(), 30u);
  EXPECT_EQ(o.rc, j["pt_available"].get<bool>() ? 0 : 3);
}

TEST(ProbeCli, RootTreeWithPmuExitsZero) {
  TempDir tmp;
  const std::string pt = "sys/bus/event_source/devices/intel_pt/";
  tmp.Write("proc/sys/kernel/osrelease", "6.1.0-27-amd64\n");
  tmp.Write("proc/sys/kernel/perf_event_paranoid", "2\n");
  tmp.Write("proc/self/status", "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
  tmp.Write(pt + "type", "8\n");
  tmp.Write(pt + "format/pt", "config:0\n");
  tmp.Write(pt + "caps/psb_cyc", "1\n");
  Outcome o = Ptsnap("probe --root '" + tmp.path().string() + "'");
  EXPECT_EQ(o.rc, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("[  ok] intel_pt PMU"));
  EXPECT_THAT(o.out, HasSubstr("present, type 8"));
  EXPECT_THAT(o.out, HasSubstr("skipped (--root: no live syscalls)"));
  EXPECT_THAT(o.out, HasSubstr("Intel PT recording: available."));
}

TEST(ProbeCli, RootTreeWithoutPmuExitsThree) {
  TempDir tmp;
  tmp.Write("proc/sys/kernel/osrelease", "6.1.0-27-amd64\n");
  Outcome o = Ptsnap("probe --root '" + tmp.path().string() + "'");
  EXPECT_EQ(o.rc, 3);
  EXPECT_THAT(o.out,
              HasSubstr("Intel PT recording: unavailable (no intel_pt PMU on this machine)"));
}

}  // namespace
}  // namespace ptsnap::cli
