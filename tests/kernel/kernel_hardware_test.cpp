// The same path as kernel_world_test, on real Intel PT: ptsnap records the
// kuser program with --trace-include-kernel (real perf_event_open, a real
// /proc/kcore copy) and decodes it. Skips, saying why, on machines without
// an intel_pt PMU (every VM here) or without the privilege kernel tracing
// needs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "support/temp_dir.h"

namespace {

using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;

TEST(KernelHardware, IncludeKernelDecodesKernelFramesFromTheKcoreCopy) {
  if (::access("/sys/bus/event_source/devices/intel_pt/type", R_OK) != 0) {
    GTEST_SKIP() << "no intel_pt PMU (/sys/bus/event_source/devices/intel_pt): "
                    "needs bare-metal Intel (Broadwell or later) or a VM with PT passthrough";
  }
  if (::geteuid() != 0) {
    GTEST_SKIP() << "kernel tracing needs root here (CAP_PERFMON, CAP_SYS_RAWIO for "
                    "/proc/kcore, CAP_SYSLOG for kallsyms)";
  }
  if (::access("/proc/kcore", R_OK) != 0) {
    GTEST_SKIP() << "/proc/kcore is not readable (no CONFIG_PROC_KCORE, or lockdown)";
  }
  TempDir dir;
  const char* bin = std::getenv("PTSNAP_BIN");
  const char* kuser = std::getenv("PTSNAP_KUSER");
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(kuser, nullptr);
  std::string out = (dir.path() / "out.events").string();
  std::string tdir = (dir.path() / "trace").string();
  std::string cmd = std::string(bin) + " run --trace-include-kernel --full-execution -o " + out +
                    " --trace-dir " + tdir + " -- " + kuser + " > " +
                    (dir.path() / "log").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  auto log = ptsnap::base::ReadFile(dir.path() / "log");
  ASSERT_EQ(rc, 0) << (log ? *log : "");
  struct stat st;
  ASSERT_EQ(::stat((tdir + "/kcore/kcore").c_str(), &st), 0) << "no kcore copy";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto events = ptsnap::base::ReadFile(out);
  ASSERT_TRUE(events.has_value());
  // write() enters the kernel from say_hello: a kernel entry frame named
  // from the copied kallsyms appears (entry_SYSCALL_64 on every x86-64
  // kernel since 4.x), and say_hello resumes.
  EXPECT_THAT(*events, HasSubstr(" B say_hello"));
  EXPECT_THAT(*events, HasSubstr(" B entry_SYSCALL_64"));
}

}  // namespace
