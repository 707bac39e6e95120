#include "sys/privileges.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;

constexpr std::string_view kStatus =
    "Name:\tptsnap\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n"
    "CapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t0000004000000000\n";

TEST(ParseStatus, CapEffAndEuid) {
  auto caps = ParseCapEff(kStatus);
  ASSERT_THAT(caps, HasValue());
  EXPECT_EQ(*caps, uint64_t{1} << kCapPerfmon);
  EXPECT_EQ(ParseEffectiveUid(kStatus).value_or(99), 0u);
  EXPECT_THAT(ParseCapEff("Name:\tx\n"), HasError());
  EXPECT_THAT(ParseCapEff("CapEff:\tzzzz\n"), HasError());
  EXPECT_THAT(ParseEffectiveUid("Uid:\t1000\n"), HasError());
}

TEST(CapabilityName, KnownAndUnknown) {
  EXPECT_EQ(CapabilityName(38), "CAP_PERFMON");
  EXPECT_EQ(CapabilityName(21), "CAP_SYS_ADMIN");
  EXPECT_EQ(CapabilityName(17), "CAP_SYS_RAWIO");
  EXPECT_EQ(CapabilityName(34), "CAP_SYSLOG");
  EXPECT_EQ(CapabilityName(14), "CAP_IPC_LOCK");
  EXPECT_EQ(CapabilityName(5), "CAP_5");
}

TEST(ParseLockdown, SelectedMode) {
  EXPECT_EQ(ParseLockdown("[none] integrity confidentiality\n").value_or(""), "none");
  EXPECT_EQ(ParseLockdown("none integrity [confidentiality]\n").value_or(""), "confidentiality");
  EXPECT_THAT(ParseLockdown("none integrity"), HasError());
  EXPECT_THAT(ParseLockdown("[]"), HasError());
  EXPECT_THAT(ParseLockdown("[N0NE]"), HasError());
}

TEST(ParseMemlockLimit, BytesAndUnlimited) {
  auto m = ParseMemlockLimit(
      "Limit                     Soft Limit           Hard Limit           Units\n"
      "Max locked memory         8388608              8388608              bytes\n");
  ASSERT_THAT(m, HasValue());
  EXPECT_EQ(*m, uint64_t{8388608});
  auto u =
      ParseMemlockLimit("Max locked memory         unlimited            unlimited     bytes\n");
  ASSERT_THAT(u, HasValue());
  EXPECT_FALSE(u->has_value());
  EXPECT_THAT(ParseMemlockLimit("Max locked memory   lots\n"), HasError());
  EXPECT_THAT(ParseMemlockLimit(""), HasError());
}

TEST(ReadPrivileges, FakeTree) {
  ptsnap::testing::TempDir dir;
  dir.Write("proc/self/status", kStatus);
  dir.Write("proc/self/limits", "Max locked memory         65536    65536   bytes\n");
  dir.Write("proc/sys/kernel/perf_event_paranoid", "-1\n");
  dir.Write("proc/sys/kernel/kptr_restrict", "1\n");
  dir.Write("proc/sys/kernel/perf_event_mlock_kb", "516\n");
  dir.Write("sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
  Privileges p = ReadPrivileges(base::RootPath(dir.path()));
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_TRUE(p.IsRoot());
  EXPECT_TRUE(p.Has(kCapPerfmon));
  EXPECT_FALSE(p.Has(kCapSysAdmin));
  EXPECT_TRUE(p.PerfmonCapable());
  EXPECT_EQ(p.perf_event_paranoid, -1);
  EXPECT_EQ(p.kptr_restrict, 1);
  EXPECT_FALSE(p.ptrace_scope.has_value());
  EXPECT_EQ(p.perf_event_mlock_kb, 516);
  EXPECT_EQ(p.memlock_bytes, uint64_t{65536});
  EXPECT_EQ(p.lockdown, "none");
}

TEST(ReadPrivileges, GarbageNamesTheFile) {
  ptsnap::testing::TempDir dir;
  dir.Write("proc/self/status", "Uid:\tx\nCapEff:\tnothex\n");
  dir.Write("proc/self/limits", "garbage\n");
  dir.Write("proc/sys/kernel/perf_event_paranoid", "two\n");
  dir.Write("proc/sys/kernel/yama/ptrace_scope", "\x01\x02");
  dir.Write("sys/kernel/security/lockdown", "???");
  Privileges p = ReadPrivileges(base::RootPath(dir.path()));
  std::string all;
  for (const auto& w : p.warnings) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("/proc/self/status: bad Uid"));
  EXPECT_THAT(all, HasSubstr("/proc/self/status: bad CapEff"));
  EXPECT_THAT(all, HasSubstr("/proc/self/limits"));
  EXPECT_THAT(all, HasSubstr("/proc/sys/kernel/perf_event_paranoid"));
  EXPECT_THAT(all, HasSubstr("/proc/sys/kernel/yama/ptrace_scope"));
  EXPECT_THAT(all, HasSubstr("/sys/kernel/security/lockdown"));
  EXPECT_FALSE(p.perf_event_paranoid.has_value());
  EXPECT_FALSE(p.euid.has_value());
}

}  // namespace
}  // namespace ptsnap::sys
