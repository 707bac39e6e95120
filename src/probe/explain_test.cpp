// probe/explain.h: every cause-and-fix line about the machine, in one place.
#include "probe/explain.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "tests/support/result_matchers.h"

namespace ptsnap::probe {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_THAT(ExplainOpenFailure(EPERM, false, Priv(2), true, 1u << 20),
              HasSubstr("cannot lock 1 MiB"));
  // ENOMEM from mmap is an allocation failure, not the budget.
  const std::string nomem = ExplainOpenFailure(ENOMEM, false, Priv(2, 516), true, 8u << 20);
  EXPECT_THAT(nomem, HasSubstr("the kernel could not allocate 8 MiB of perf buffer memory"));
  EXPECT_THAT(nomem, HasSubstr("contiguous block of at most 4 MiB"));
  EXPECT_THAT(nomem, HasSubstr("pass a smaller --snapshot-size"));
  EXPECT_THAT(nomem, Not(HasSubstr("perf_event_mlock_kb")));
  EXPECT_THAT(ExplainOpenFailure(ESRCH, false, Priv(2), false, 0),
              HasSubstr("exited before ptsnap could attach"));
  EXPECT_THAT(ExplainOpenFailure(EOPNOTSUPP, false, Priv(2), false, 0), HasSubstr("--emulate"));
  EXPECT_THAT(ExplainOpenFailure(ENOSPC, false, Priv(2), false, 0), HasSubstr("debug register"));
  EXPECT_THAT(ExplainOpenFailure(EINVAL, false, Priv(2), false, 0),
              HasSubstr("--timer-resolution low"));
  EXPECT_THAT(ExplainOpenFailure(EACCES, false, Priv(1), false, 0, /*system_wide=*/true),
              HasSubstr("not allowed to trace all CPUs: needs CAP_PERFMON or CAP_SYS_ADMIN (root), "
                        "or kernel.perf_event_paranoid <= 0 (it is 1)"));
}

TEST(Explain, TracemeRefusalNamesPtraceScopeAndTheFix) {
  const std::string yama3 = ExplainTracemeFailure(EPERM, 3, "./server");
  EXPECT_THAT(yama3, HasSubstr("cannot start './server' under ptsnap: PTRACE_TRACEME was refused"));
  EXPECT_THAT(yama3, HasSubstr("kernel.yama.ptrace_scope is 3"));
  EXPECT_THAT(yama3, HasSubstr("until reboot"));
  EXPECT_THAT(yama3, HasSubstr("kernel.yama.ptrace_scope=2 or lower"));
  EXPECT_THAT(yama3, HasSubstr("ptsnap attach -p PID"));
  EXPECT_EQ(yama3.find('\n'), std::string::npos);
  const std::string seccomp = ExplainTracemeFailure(EPERM, 1, "./server");
  EXPECT_THAT(seccomp, HasSubstr("kernel.yama.ptrace_scope is 1"));
  EXPECT_THAT(seccomp, HasSubstr("seccomp"));
  EXPECT_THAT(seccomp, HasSubstr("ptsnap attach -p PID"));
  EXPECT_THAT(ExplainTracemeFailure(EPERM, std::nullopt, "x"), HasSubstr("no Yama"));
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

TEST(Explain, SystemWidePrivilegeNeedsPerfmonOrParanoidZero) {
  EXPECT_THAT(CheckSystemWidePrivilege(Priv(2)),
              HasErrorContaining("--all-cpus (system-wide tracing) needs CAP_PERFMON or "
                                 "CAP_SYS_ADMIN (root), or kernel.perf_event_paranoid <= 0 (it "
                                 "is 2); run as root or `sysctl -w kernel.perf_event_paranoid=0`"));
  EXPECT_THAT(CheckSystemWidePrivilege(Priv(1)), HasErrorContaining("(it is 1)"));
  EXPECT_THAT(CheckSystemWidePrivilege(Priv(0)), HasValue());
  EXPECT_THAT(CheckSystemWidePrivilege(Priv(-1)), HasValue());
  sys::Privileges perfmon = Priv(2);
  perfmon.cap_eff = uint64_t{1} << sys::kCapPerfmon;
  EXPECT_THAT(CheckSystemWidePrivilege(perfmon), HasValue());
  sys::Privileges admin = Priv(3);
  admin.cap_eff = uint64_t{1} << sys::kCapSysAdmin;
  EXPECT_THAT(CheckSystemWidePrivilege(admin), HasValue());
  sys::Privileges unknown;
  EXPECT_THAT(CheckSystemWidePrivilege(unknown), HasErrorContaining("(it is unknown)"));
}

// The probe's fix and the recorder's error for a missing PMU tell the same
// story: a VM, a non-Intel CPU, or an old CPU or kernel, and --emulate.
TEST(Explain, NoPmuFixMatchesTheMessage) {
  sys::CpuInfo vm;
  vm.available = true;
  vm.vendor = "GenuineIntel";
  vm.hypervisor = true;
  EXPECT_THAT(NoPmuFix(vm), HasSubstr("VM without PT pass-through"));
  EXPECT_THAT(NoPmuMessage(vm), HasSubstr("without Intel PT pass-through"));
  sys::CpuInfo amd;
  amd.available = true;
  amd.vendor = "AuthenticAMD";
  EXPECT_THAT(NoPmuFix(amd), HasSubstr("this one is AuthenticAMD"));
  sys::CpuInfo unknown;
  EXPECT_THAT(NoPmuFix(unknown), HasSubstr("CONFIG_PERF_EVENTS_INTEL_PT"));
  for (const auto& c : {vm, amd, unknown}) {
    EXPECT_THAT(NoPmuFix(c), HasSubstr("--emulate"));
    EXPECT_THAT(NoPmuMessage(c), HasSubstr("--emulate"));
    EXPECT_THAT(NoPmuMessage(c), HasSubstr("--sampling"));
  }
}

TEST(Explain, ScopePrivileges) {
  const sys::KernelVersion k6{6, 1, 0};
  EXPECT_THAT(CheckScopePrivileges(false, false, Priv(2), k6), HasValue());
  EXPECT_THAT(CheckScopePrivileges(true, false, Priv(2), k6),
              HasErrorContaining("--trace-include-kernel needs CAP_PERFMON or CAP_SYS_ADMIN"));
  EXPECT_THAT(CheckScopePrivileges(true, true, Priv(2), k6),
              HasErrorContaining("--trace-kernel-only needs"));
  EXPECT_THAT(CheckScopePrivileges(true, false, Priv(1), k6), HasValue());
  EXPECT_THAT(CheckScopePrivileges(false, false, Priv(3), k6),
              HasErrorContaining("perf disabled for users"));
  sys::Privileges perfmon = Priv(2);
  perfmon.cap_eff = uint64_t{1} << sys::kCapPerfmon;
  EXPECT_THAT(CheckScopePrivileges(true, false, perfmon, k6), HasValue());
  const sys::KernelVersion k54{5, 4, 0};
  EXPECT_THAT(CheckScopePrivileges(true, false, perfmon, k54),
              HasErrorContaining("CAP_PERFMON counts only from Linux 5.8"));
}

}  // namespace
}  // namespace ptsnap::probe
