// Unit tests of the recorder's pure parts: option parsing, error messages
// (every errno a user can meet), and Prepare() against fake /sys and /proc
// trees (no PMU, no privilege, rounding).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "record/options.h"
#include "record/recorder.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(Options, ParseSize) {
  EXPECT_EQ(*ParseSize("4M"), 4u << 20);
  EXPECT_EQ(*ParseSize("256K"), 256u << 10);
  EXPECT_EQ(*ParseSize("1GiB"), 1u << 30);
  EXPECT_EQ(*ParseSize("65536"), 65536u);
  EXPECT_EQ(*ParseSize(" 8 kb "), 8192u);
  EXPECT_THAT(ParseSize("lots"), HasErrorContaining("bad size 'lots'"));
  EXPECT_THAT(ParseSize("4T"), HasErrorContaining("bad size"));
  EXPECT_THAT(ParseSize("99999999999999999999"), HasErrorContaining("bad size"));
}

TEST(Options, RoundToPowerOfTwoPages) {
  bool rounded = true;
  EXPECT_EQ(RoundToPowerOfTwoPages(4u << 20, &rounded), 4u << 20);
  EXPECT_FALSE(rounded);
  EXPECT_EQ(RoundToPowerOfTwoPages(3000000, &rounded), 4u << 20);
  EXPECT_TRUE(rounded);
  EXPECT_EQ(RoundToPowerOfTwoPages(1, &rounded), 4096u);
  EXPECT_EQ(RoundToPowerOfTwoPages(3 * 4096, &rounded), 4 * 4096u);
}

TEST(Options, DefaultTraceDirSitsBesideTheOutput) {
  EXPECT_EQ(DefaultTraceDir("trace.fxt.gz"), "trace.ptsnap");
  EXPECT_EQ(DefaultTraceDir("out/run1.json"), "out/run1.ptsnap");
  EXPECT_EQ(DefaultTraceDir(""), "trace.ptsnap");
  EXPECT_EQ(FormatSize(4u << 20), "4 MiB");
  EXPECT_EQ(FormatSize(12345), "12345 bytes");
}

sys::Privileges Priv(int64_t paranoid, int64_t mlock_kb = 516) {
  sys::Privileges p;
  p.euid = 1000;
  p.cap_eff = 0;
  p.perf_event_paranoid = paranoid;
  p.perf_event_mlock_kb = mlock_kb;
  return p;
}

TEST(ExplainOpenFailure, EveryErrnoNamesCauseAndFix) {
  EXPECT_THAT(ExplainOpenFailure(EBUSY, false, Priv(2), false, 0),
              HasSubstr("another tracer holds it"));
  EXPECT_THAT(ExplainOpenFailure(EACCES, true, Priv(2), false, 0),
              HasSubstr("sysctl -w kernel.perf_event_paranoid=1"));
  EXPECT_THAT(ExplainOpenFailure(EACCES, true, Priv(2), false, 0), HasSubstr("(it is 2)"));
  EXPECT_THAT(ExplainOpenFailure(EPERM, false, Priv(3), false, 0),
              HasSubstr("sysctl -w kernel.perf_event_paranoid=2"));
  EXPECT_THAT(ExplainOpenFailure(EPERM, false, Priv(2), false, 0),
              HasSubstr("kernel.yama.ptrace_scope"));
  const std::string mlock = ExplainOpenFailure(EPERM, false, Priv(2, 516), true, 4u << 20);
  EXPECT_THAT(mlock, HasSubstr("kernel.perf_event_mlock_kb (516 KiB per CPU)"));
  EXPECT_THAT(mlock, HasSubstr("sysctl -w kernel.perf_event_mlock_kb="));
  EXPECT_THAT(mlock, HasSubstr("--snapshot-size"));
  EXPECT_THAT(ExplainOpenFailure(ENOMEM, false, Priv(2), true, 1u << 20),
              HasSubstr("cannot lock 1 MiB"));
  EXPECT_THAT(ExplainOpenFailure(ESRCH, false, Priv(2), false, 0),
              HasSubstr("exited before ptsnap could attach"));
  EXPECT_THAT(ExplainOpenFailure(EOPNOTSUPP, false, Priv(2), false, 0), HasSubstr("--emulate"));
  EXPECT_THAT(ExplainOpenFailure(ENOSPC, false, Priv(2), false, 0), HasSubstr("debug register"));
  EXPECT_THAT(ExplainOpenFailure(EINVAL, false, Priv(2), false, 0),
              HasSubstr("--timer-resolution low"));
}

TEST(NoPmuMessage, SaysVmAndSuggestsEmulate) {
  sys::CpuInfo vm;
  vm.available = true;
  vm.vendor = "GenuineIntel";
  vm.hypervisor = true;
  vm.hypervisor_vendor = "KVMKVMKVM";
  std::string m = NoPmuMessage(vm);
  EXPECT_THAT(m, HasSubstr("looks like a virtual machine (hypervisor KVMKVMKVM)"));
  EXPECT_THAT(m, HasSubstr("--emulate"));
  EXPECT_EQ(m.find('\n'), std::string::npos);  // one line
  sys::CpuInfo amd;
  amd.available = true;
  amd.vendor = "AuthenticAMD";
  EXPECT_THAT(NoPmuMessage(amd), HasSubstr("(AuthenticAMD) has no Intel PT"));
}

constexpr const char* kDev = "sys/bus/event_source/devices/intel_pt/";

void WritePmu(const TempDir& d) {
  d.Write(std::string(kDev) + "type", "8\n");
  d.Write(std::string(kDev) + "format/pt", "config:0");
  d.Write(std::string(kDev) + "format/tsc", "config:10");
  d.Write(std::string(kDev) + "format/branch", "config:13");
  d.Write(std::string(kDev) + "max_nonturbo_ratio", "22\n");
}

void WriteUser(const TempDir& d, int paranoid) {
  d.Write("proc/self/status",
          "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
  d.Write("proc/sys/kernel/perf_event_paranoid", std::to_string(paranoid) + "\n");
}

TEST(Prepare, NoPmuFailsWithKind) {
  TempDir d;
  WriteUser(d, 2);
  sys::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  FailureKind kind;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid, &kind),
              HasErrorContaining("no Intel PT on this machine"));
  EXPECT_EQ(kind, FailureKind::kNoPmu);
}

TEST(Prepare, KernelScopeWithoutPrivilegeFailsBeforeOpening) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  sys::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.scope = TraceScope::kUserKernel;
  FailureKind kind;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid, &kind),
              HasErrorContaining("--trace-include-kernel needs CAP_PERFMON"));
  EXPECT_EQ(kind, FailureKind::kPrivilege);
  // paranoid 1 allows it.
  WriteUser(d, 1);
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid, &kind), HasValue());
}

TEST(Prepare, BuildsAttrsAndDefaults) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  sys::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.snapshot_size = 100000;  // not a power of two pages
  o.timer.preset = "low";
  FailureKind kind;
  auto p = Prepare(o, base::RootPath(d.path()), cpuid, &kind);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->aux_bytes, 128u << 10);
  ASSERT_FALSE(p->warnings.empty());
  EXPECT_THAT(p->warnings[0], HasSubstr("rounded up to 128 KiB"));
  ASSERT_TRUE(p->hw.pt_attr.has_value());
  EXPECT_EQ(p->hw.pt_attr->type, 8u);
  EXPECT_EQ(p->hw.pt_attr->config, (1u << 0) | (1u << 10) | (1u << 13));
  EXPECT_EQ(p->hw.pt_attr->enable_on_exec, 1u);  // run
  EXPECT_EQ(p->hw.tracking_attr.enable_on_exec, 1u);
  EXPECT_EQ(p->hw.aux_pages, 32u);
  EXPECT_EQ(p->pt.nom_freq, 22u);
  EXPECT_EQ(p->mode, trace::Mode::kSnapshot);
  // Unprivileged default: 256 KiB.
  o.snapshot_size = 0;
  p = Prepare(o, base::RootPath(d.path()), cpuid, &kind);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->aux_bytes, 256u << 10);
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("rounded"))));
}

}  // namespace
}  // namespace ptsnap::record
