// The kernel world (kernel_world.h) through perf: each scope's trace
// directory is exported with `ptsnap export` (kernel scopes as perf's
// directory format with kcore_dir/) and tools/perf-agree compares perf's
// own Intel PT decoding of it with `ptsnap decode`, call by call and
// return by return (docs/perf-interop.md, "Kernel recordings").
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernel/kernel_world.h"
#include "support/result_matchers.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace ptsnap::kworld {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;

using ::ptsnap::testing::EnvOr;
using ::ptsnap::testing::HavePerf;
using ::ptsnap::testing::RunShell;
using ::ptsnap::testing::ShellRun;

// Writes the scenario's trace for `opts` under `dir` and runs perf-agree.
ShellRun Agree(const TraceOptions& opts, const fs::path& dir) {
  auto sc = BuildScenario(false);
  EXPECT_THAT(sc, HasValue());
  if (!sc) return {};
  EXPECT_THAT(WriteTrace(*sc, dir / "trace", opts), HasValue());
  ShellRun r = RunShell("python3 " + EnvOr("PERF_AGREE") + " " + (dir / "trace").string() +
                        " --ptsnap " + EnvOr("PTSNAP_BIN") + " --work " + (dir / "w").string());
  std::printf("%s", r.out.c_str());
  return r;
}

// `counts`: perf's "N calls, N returns, N instructions (ptsnap N)", pinned:
// the world is built instruction by instruction, so they never vary.
void ExpectAgree(const ShellRun& r, const std::string& counts) {
  EXPECT_THAT(r.out, HasSubstr(" 1 threads, perf " + counts +
                               ", 0 unnamed by ptsnap, 0 by both, "
                               "0 decode errors"));
  EXPECT_THAT(r.out, HasSubstr("; AGREE"));
  EXPECT_EQ(r.status, 0) << r.out;
}

// user+kernel: kuser's write syscall through entry_SYSCALL_64, the module
// and back, a page fault and a timer interrupt, decoded by perf from the
// exported kcore_dir (the same kernel image ptsnap decoded with).
TEST(KernelPerfInterop, UserAndKernelScopeAgrees) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  testing::TempDir tmp;
  TraceOptions o;
  o.scope = trace::Scope::kUserKernel;
  ShellRun r = Agree(o, tmp.path());
  // kuser's 8 calls; each write's syscall and 8 kernel calls below it (18);
  // the fault's and the interrupt's entry and 2 calls each (6).
  ExpectAgree(r, "32 calls, 32 returns, 186 instructions (ptsnap 186)");
  EXPECT_TRUE(fs::is_directory(tmp.path() / "w" / "perf.data" / "kcore_dir"));
  // perf named kernel and module code from kcore_dir, not "[unknown]".
  std::string cr = (tmp.path() / "w" / "perf-cr.txt").string();
  EXPECT_EQ(RunShell("grep -q 'do_syscall_64' " + cr).status, 0);
  EXPECT_EQ(RunShell("grep -q 'kmod_write' " + cr).status, 0);
}

TEST(KernelPerfInterop, KernelOnlyScopeAgrees) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  testing::TempDir tmp;
  TraceOptions o;
  o.scope = trace::Scope::kKernel;
  // The 18 + 6 above less the 4 entries: each kernel entry starts where
  // tracing does, no call.
  ExpectAgree(Agree(o, tmp.path()), "20 calls, 20 returns, 134 instructions (ptsnap 134)");
}

TEST(KernelPerfInterop, UserOnlyScopeAgrees) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  testing::TempDir tmp;
  TraceOptions o;
  o.scope = trace::Scope::kUser;
  ExpectAgree(Agree(o, tmp.path()), "8 calls, 8 returns, 52 instructions (ptsnap 52)");
}

}  // namespace
}  // namespace ptsnap::kworld
