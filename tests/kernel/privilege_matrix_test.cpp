// The kernel-scope privilege matrix (issue 7, docs/errors.md "probe" and
// "recorder", docs/kernel-tracing.md "Privileges"), one test per row, on
// fake /sys and /proc trees: the capability set (CapEff in
// /proc/self/status), perf_event_paranoid, kptr_restrict, kallsyms with real
// or zeroed addresses, /proc/kcore's presence and mode bits, lockdown and
// the kernel release are all injected through the root path. Each row runs
// the recorder's pre-flight (record::Prepare), the probe (probe::RunProbe)
// and, for kernel scopes, the recorder's kernel-image step
// (record::SnapshotKernelImage), and asserts the exact lines the user sees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/root_path.h"
#include "probe/probe.h"
#include "record/kcore_copy.h"
#include "record/options.h"
#include "record/recorder.h"
#include "sys/cpuid.h"
#include "sys/kcore_image.h"
#include "sys/privileges.h"
#include "tests/support/fake_cpuid.h"
#include "tests/support/fake_intel_pt.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::kworld {
namespace {

using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

constexpr uint64_t kStext = 0xffffffff81000000;
constexpr uint64_t kEtext = 0xffffffff81003000;
constexpr uint64_t kAllCaps = 0x1ffffffffffull;  // CAP_CHOWN .. CAP_CHECKPOINT_RESTORE (40)
constexpr uint64_t Cap(int c) { return uint64_t{1} << c; }

std::string Hex16(uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// A machine's privilege-relevant state, written as a fake root.
struct Machine {
  std::string release = "6.1.0-27-amd64";
  uint32_t euid = 0;
  uint64_t cap_eff = kAllCaps;
  int paranoid = 2;
  int kptr_restrict = 0;
  bool kallsyms_masked = false;
  enum class Kcore { kReadable, kAbsent } kcore = Kcore::kReadable;
  std::string lockdown = "[none] integrity confidentiality";
  std::map<std::string, std::string> env;

  void WriteTo(const TempDir& d) const {
    ::ptsnap::testing::WriteIntelPt(d, ::ptsnap::testing::SkylakeIntelPt());
    d.Write("proc/sys/kernel/osrelease", release + "\n");
    char status[200];
    std::snprintf(status, sizeof status, "Name:\tptsnap\nUid:\t%u\t%u\t%u\t%u\nCapEff:\t%016llx\n",
                  euid, euid, euid, euid, static_cast<unsigned long long>(cap_eff));
    d.Write("proc/self/status", status);
    d.Write("proc/self/limits", "Max locked memory         unlimited    unlimited    bytes\n");
    d.Write("proc/sys/kernel/perf_event_paranoid", std::to_string(paranoid) + "\n");
    d.Write("proc/sys/kernel/kptr_restrict", std::to_string(kptr_restrict) + "\n");
    d.Write("proc/sys/kernel/perf_event_mlock_kb", "516\n");
    d.Write("sys/kernel/security/lockdown", lockdown + "\n");
    d.Write("sys/devices/system/cpu/online", "0-3\n");
    auto a = [&](uint64_t v) { return Hex16(kallsyms_masked ? 0 : v); };
    d.Write("proc/kallsyms",
            a(kStext) + " T _text\n" + a(kStext) + " T _stext\n" + a(kStext + 0x100) +
                " T entry_SYSCALL_64\n" + a(kStext + 0x800) + " T do_syscall_64\n" + a(kEtext) +
                " T _etext\n",
            0444);
    d.Write("proc/modules", "");
    if (kcore == Kcore::kReadable) {
      // /proc/kcore is mode 0400, owned by root (fs/proc/kcore.c).
      d.Write("proc/kcore",
              sys::BuildCoreImage({{.type = PT_NOTE, .bytes = std::string(20, '\0')},
                                   {.vaddr = kStext, .bytes = std::string(0x3000, '\x90')},
                                   {.vaddr = 0xffff888000000000, .bytes = "secret ram"}}),
              0400);
    }
  }

  [[nodiscard]] probe::ProbeEnv Env(const TempDir& d) const {
    probe::ProbeEnv e;
    e.root = base::RootPath(d.path());
    e.getenv = Getenv();
    return e;
  }
  [[nodiscard]] record::Getenv Getenv() const {
    return [vars = env](std::string_view name) -> std::optional<std::string> {
      auto it = vars.find(std::string(name));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

// The recorder's checks for `ptsnap run --SCOPE /bin/true` on the fake root.
Result<record::Prepared> PrepareOn(const TempDir& d, trace::Scope scope) {
  record::RecordOptions o;
  o.command = {"/bin/true"};
  o.scope = scope;
  ::ptsnap::testing::FakeCpuid cpuid;
  return record::Prepare(o, base::RootPath(d.path()), cpuid);
}

const probe::Check& Get(const probe::ProbeReport& r, std::string_view id) {
  static const probe::Check kNone{};
  const probe::Check* c = r.Find(id);
  if (c == nullptr) ADD_FAILURE() << "no check " << id;
  return c != nullptr ? *c : kNone;
}

// ---------------------------------------------------------------------------
// Scope x perf_event_paranoid x capabilities: the recorder's pre-flight and
// the probe's priv.* checks.

enum class Caps { kNone, kPerfmon, kSysAdmin };

struct ScopeRow {
  trace::Scope scope;
  int paranoid;
  Caps caps;
  std::string release = "6.1.0-27-amd64";
};

std::string ScopeName(trace::Scope s) {
  switch (s) {
    case trace::Scope::kUser: return "User";
    case trace::Scope::kUserKernel: return "UserKernel";
    case trace::Scope::kKernel: return "KernelOnly";
  }
  return "?";
}

std::string RowName(const ::testing::TestParamInfo<ScopeRow>& info) {
  const ScopeRow& r = info.param;
  std::string caps = r.caps == Caps::kNone      ? "NoCaps"
                     : r.caps == Caps::kPerfmon ? "CapPerfmon"
                                                : "CapSysAdmin";
  std::string p =
      r.paranoid < 0 ? "Minus" + std::to_string(-r.paranoid) : std::to_string(r.paranoid);
  std::string kernel = r.release.starts_with("5.4") ? "Kernel54" : "";
  return ScopeName(r.scope) + "Paranoid" + p + caps + kernel;
}

void PrintTo(const ScopeRow& r, std::ostream* os) {
  *os << ScopeName(r.scope) << " paranoid " << r.paranoid << " caps " << static_cast<int>(r.caps)
      << " kernel " << r.release;
}

class ScopePrivilege : public ::testing::TestWithParam<ScopeRow> {};

TEST_P(ScopePrivilege, PreflightAndProbeAgree) {
  const ScopeRow& row = GetParam();
  Machine m;
  m.release = row.release;
  m.euid = row.caps == Caps::kSysAdmin ? 0 : 1000;
  m.cap_eff = row.caps == Caps::kNone      ? 0
              : row.caps == Caps::kPerfmon ? Cap(sys::kCapPerfmon)
                                           : Cap(sys::kCapSysAdmin);
  m.paranoid = row.paranoid;
  TempDir d;
  m.WriteTo(d);

  // What the kernel allows (kernel/events/core.c perf_allow_kernel(),
  // perfmon_capable(); CAP_PERFMON exists from 5.8).
  const bool cap_perfmon_counts = !row.release.starts_with("5.4");
  const bool capable =
      row.caps == Caps::kSysAdmin || (row.caps == Caps::kPerfmon && cap_perfmon_counts);
  const bool kernel_ok = capable || row.paranoid <= 1;
  const bool system_wide_ok = capable || row.paranoid <= 0;
  const bool wants_kernel = row.scope != trace::Scope::kUser;

  auto prepared = PrepareOn(d, row.scope);
  if (wants_kernel && !kernel_ok) {
    ASSERT_FALSE(prepared.has_value());
    std::string flag =
        row.scope == trace::Scope::kKernel ? "--trace-kernel-only" : "--trace-include-kernel";
    std::string want = flag +
                       " needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
                       "kernel.perf_event_paranoid <= 1 (it is " +
                       std::to_string(row.paranoid) +
                       "); run as root or `sysctl -w kernel.perf_event_paranoid=1`";
    if (row.caps == Caps::kPerfmon) {
      want += " (CAP_PERFMON counts only from Linux 5.8; this kernel is 5.4.0)";
    }
    EXPECT_EQ(prepared.error().ToString(), want);
    EXPECT_EQ(prepared.error().kind(), ErrorKind::kPrivilege);  // exit code 1 (docs/errors.md)
  } else {
    ASSERT_THAT(prepared, HasValue());
    ASSERT_TRUE(prepared->hw.pt_attr.has_value());
    EXPECT_EQ(prepared->hw.pt_attr->exclude_kernel, wants_kernel ? 0u : 1u);
    EXPECT_EQ(prepared->hw.pt_attr->exclude_user, row.scope == trace::Scope::kKernel ? 1u : 0u);
  }

  probe::ProbeReport r = probe::RunProbe(m.Env(d));
  EXPECT_TRUE(r.pt_available) << r.pt_reason;
  EXPECT_EQ(r.scopes.kernel, kernel_ok);
  const std::string yn_kernel = kernel_ok ? "yes" : "no";
  const std::string yn_sw = system_wide_ok ? "yes" : "no";
  EXPECT_EQ(Get(r, "priv.scopes").value,
            "user yes, kernel " + yn_kernel + ", system-wide " + yn_sw);
  const probe::Check& p = Get(r, "priv.paranoid");
  std::string value =
      std::to_string(row.paranoid) + (capable ? " (overridden: CAP_PERFMON/CAP_SYS_ADMIN)" : "");
  if (kernel_ok) {
    EXPECT_EQ(p.status, probe::Status::kOk);
    EXPECT_EQ(p.value, value);
  } else {
    EXPECT_EQ(p.status, probe::Status::kWarn);
    EXPECT_EQ(p.value, value + ": user space only");
    EXPECT_EQ(p.fix,
              "for kernel tracing: sysctl -w kernel.perf_event_paranoid=1, or run as root / with "
              "CAP_PERFMON");
  }
  if (kernel_ok) {
    EXPECT_THAT(r.modes, ::testing::Contains("intel_pt-kernel"));
  } else {
    EXPECT_THAT(r.modes, ::testing::Not(::testing::Contains("intel_pt-kernel")));
  }
}

std::vector<ScopeRow> ScopeRows() {
  std::vector<ScopeRow> rows;
  for (auto scope : {trace::Scope::kUser, trace::Scope::kUserKernel, trace::Scope::kKernel}) {
    for (int paranoid : {-1, 1, 2}) {
      for (Caps caps : {Caps::kNone, Caps::kPerfmon, Caps::kSysAdmin}) {
        rows.push_back({scope, paranoid, caps});
      }
    }
    // CAP_PERFMON means nothing before 5.8: paranoid 2 still refuses.
    rows.push_back({scope, 2, Caps::kPerfmon, "5.4.0-1103-aws"});
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ScopePrivilege, ::testing::ValuesIn(ScopeRows()), RowName);

// Root without capabilities (a container that dropped them) is not root to
// perf: the kernel checks CapEff, not the uid.
TEST(ScopePrivilegeExtra, RootWithoutCapabilitiesIsRefusedTheKernel) {
  const Machine m{.euid = 0, .cap_eff = 0};
  TempDir d;
  m.WriteTo(d);
  auto p = PrepareOn(d, trace::Scope::kUserKernel);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().ToString(),
            "--trace-include-kernel needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
            "kernel.perf_event_paranoid <= 1 (it is 2); run as root or `sysctl -w "
            "kernel.perf_event_paranoid=1`");
  EXPECT_FALSE(probe::RunProbe(m.Env(d)).scopes.kernel);
}

// Debian's paranoid 3: no perf events for users at all, refused before
// opening anything, with the line docs/errors.md gives.
TEST(ScopePrivilegeExtra, Paranoid3RefusesUserScopeWithoutCapabilities) {
  Machine m{.euid = 1000, .cap_eff = 0, .paranoid = 3};
  TempDir d;
  m.WriteTo(d);
  auto p = PrepareOn(d, trace::Scope::kUser);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().ToString(),
            "not allowed to use perf events: kernel.perf_event_paranoid is 3 (perf disabled for "
            "users); run as root or `sysctl -w kernel.perf_event_paranoid=2`");
  EXPECT_EQ(p.error().kind(), ErrorKind::kPrivilege);
  m.cap_eff = Cap(sys::kCapPerfmon);
  m.WriteTo(d);
  EXPECT_THAT(PrepareOn(d, trace::Scope::kUser), HasValue());
}

// ---------------------------------------------------------------------------
// The kernel image: /proc/kcore readable / no CAP_SYS_RAWIO / absent /
// lockdown, and kallsyms masked without CAP_SYSLOG. Kernel tracing itself is
// allowed in every row (paranoid 1): these never refuse the recording, they
// decide whether the trace gets a kernel image, and what the user is told.

struct KcoreRow {
  std::string name;
  Machine machine;
  // The first kcore.* check that is not ok (id, status, value, fix); empty
  // id when all pass.
  std::string check_id;
  probe::Status check_status = probe::Status::kOk;
  std::string check_value;
  std::string check_fix;
  std::string image_status;  // trace::KcoreStatus as the manifest writes it
};

std::string KcoreRowName(const ::testing::TestParamInfo<KcoreRow>& info) { return info.param.name; }

void PrintTo(const KcoreRow& r, std::ostream* os) { *os << r.name; }

class KcorePrivilege : public ::testing::TestWithParam<KcoreRow> {};

TEST_P(KcorePrivilege, ProbeAndRecorderSayTheSame) {
  const KcoreRow& row = GetParam();
  TempDir d;
  row.machine.WriteTo(d);
  for (auto scope : {trace::Scope::kUserKernel, trace::Scope::kKernel}) {
    EXPECT_THAT(PrepareOn(d, scope), HasValue())
        << "a missing kernel image never refuses a kernel-scope recording";
  }

  probe::ProbeReport r = probe::RunProbe(row.machine.Env(d));
  EXPECT_TRUE(r.scopes.kernel);
  const probe::Check* first = nullptr;
  for (const probe::Check& c : r.checks) {
    if (c.id.starts_with("kcore.") && c.status != probe::Status::kOk) {
      first = &c;
      break;
    }
  }
  if (row.check_id.empty()) {
    EXPECT_EQ(first, nullptr) << first->id << ": " << first->value;
    EXPECT_TRUE(r.kcore_usable);
    EXPECT_THAT(r.modes, ::testing::Contains("kcore"));
  } else {
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->id, row.check_id);
    EXPECT_EQ(first->status, row.check_status);
    EXPECT_EQ(first->value, row.check_value);
    EXPECT_EQ(first->fix, row.check_fix);
    EXPECT_FALSE(r.kcore_usable);
    EXPECT_THAT(r.modes, ::testing::Not(::testing::Contains("kcore")));
  }

  TempDir trace;
  record::KernelImage img =
      record::SnapshotKernelImage(base::RootPath(d.path()), trace.path(), row.machine.Getenv());
  EXPECT_EQ(trace::ToString(img.status), row.image_status);
  if (row.image_status == "copied") {
    EXPECT_EQ(img.dir, "kcore");
    EXPECT_TRUE(img.warnings.empty()) << img.warnings.front();
    EXPECT_TRUE(std::filesystem::exists(trace.path() / "kcore/kcore"));
    EXPECT_EQ(img.kernel_start, std::optional<uint64_t>(kStext));
    return;
  }
  EXPECT_FALSE(std::filesystem::exists(trace.path() / "kcore"));
  std::string reason = row.image_status == "disabled"
                           ? "PTSNAP_NO_KCORE is set"
                           : row.check_value + (row.check_fix.empty() ? "" : "; " + row.check_fix);
  EXPECT_EQ(img.reason, reason);
  ASSERT_EQ(img.warnings.size(), 1u);
  EXPECT_EQ(img.warnings[0],
            "kernel code not copied (" + reason +
                "): kernel code in this trace will not be decoded (the decode shows "
                "decode-error markers where the trace ran in the kernel; ptsnap has no vmlinux "
                "fallback)");
}

const char kRawioFix[] = "run as root (CAP_SYS_RAWIO)";
const char kNoImage[] =
    "use a kernel built with CONFIG_PROC_KCORE=y: without /proc/kcore, kernel-scope traces get no "
    "kernel image and their kernel code is not decoded (no vmlinux fallback)";

// A row whose first failing check warns and whose trace gets no image.
KcoreRow Unavailable(std::string name, Machine m, std::string id, std::string value,
                     std::string fix) {
  return {std::move(name),  std::move(m),   std::move(id), probe::Status::kWarn,
          std::move(value), std::move(fix), "unavailable"};
}

std::vector<KcoreRow> KcoreRows() {
  Machine base;
  base.paranoid = 1;
  auto with = [&](auto change) {
    Machine m = base;
    change(m);
    return m;
  };
  const std::string syslog_fix = "run as root (CAP_SYSLOG), or sysctl -w kernel.kptr_restrict=0";
  const std::string may_not = "present, but this process may not open it: ";
  return {
      // Root with every capability: the copy is taken.
      {.name = "KcoreReadableAsRoot", .machine = base, .image_status = "copied"},
      // Root, but CAP_SYS_RAWIO dropped.
      Unavailable("KcoreWithoutCapSysRawio",
                  with([](Machine& m) { m.cap_eff = kAllCaps & ~Cap(sys::kCapSysRawio); }),
                  "kcore.file", may_not + "no CAP_SYS_RAWIO", kRawioFix),
      // A user with CAP_PERFMON only: kernel tracing yes, but kallsyms is
      // masked (CAP_PERFMON does not unmask it) and kcore is root's.
      Unavailable("KcoreAsUserWithCapPerfmon", with([](Machine& m) {
                    m.euid = 1000;
                    m.cap_eff = Cap(sys::kCapPerfmon);
                    m.paranoid = 2;
                    m.kptr_restrict = 1;
                    m.kallsyms_masked = true;
                  }),
                  "kcore.kallsyms",
                  "addresses masked (all zero; kptr_restrict 1 and no CAP_SYSLOG)", syslog_fix),
      // The same user with readable kallsyms: kcore's mode bits and CAP_SYS_RAWIO.
      Unavailable("KcoreMode0400AsUser", with([](Machine& m) {
                    m.euid = 1000;
                    m.cap_eff = Cap(sys::kCapPerfmon);
                  }),
                  "kcore.file",
                  may_not + "mode 0400 lets only root read it (euid 1000); no CAP_SYS_RAWIO",
                  kRawioFix),
      // CONFIG_PROC_KCORE off (the Firecracker guest of tests/data/probe).
      Unavailable(
          "KcoreAbsent", with([](Machine& m) { m.kcore = Machine::Kcore::kAbsent; }), "kcore.file",
          "absent (kernel built without CONFIG_PROC_KCORE, or /proc not mounted)", kNoImage),
      // lockdown=confidentiality refuses /proc/kcore even to root.
      Unavailable("KcoreUnderLockdown",
                  with([](Machine& m) { m.lockdown = "none integrity [confidentiality]"; }),
                  "kcore.file", may_not + "lockdown=confidentiality refuses it",
                  "boot without lockdown=confidentiality for kernel snapshots"),
      // Every refusal at once: each is named, and both fixes.
      Unavailable("KcoreAsUserUnderLockdown", with([](Machine& m) {
                    m.euid = 1000;
                    m.cap_eff = Cap(sys::kCapPerfmon);
                    m.lockdown = "none integrity [confidentiality]";
                  }),
                  "kcore.file",
                  may_not + "mode 0400 lets only root read it (euid 1000); no CAP_SYS_RAWIO; "
                            "lockdown=confidentiality refuses it",
                  "run as root (CAP_SYS_RAWIO) and boot without lockdown=confidentiality for "
                  "kernel snapshots"),
      // kallsyms masked: root without CAP_SYSLOG at kptr_restrict 1.
      Unavailable("KallsymsMaskedWithoutCapSyslog", with([](Machine& m) {
                    m.cap_eff = kAllCaps & ~Cap(sys::kCapSyslog);
                    m.kptr_restrict = 1;
                    m.kallsyms_masked = true;
                  }),
                  "kcore.kallsyms",
                  "addresses masked (all zero; kptr_restrict 1 and no CAP_SYSLOG)", syslog_fix),
      // kptr_restrict 0 shows addresses only at paranoid <= 1 or with CAP_SYSLOG.
      Unavailable("KallsymsMaskedAtParanoid2WithoutCapSyslog", with([](Machine& m) {
                    m.cap_eff = kAllCaps & ~Cap(sys::kCapSyslog);
                    m.paranoid = 2;
                    m.kallsyms_masked = true;
                  }),
                  "kcore.kallsyms",
                  "addresses masked (all zero; kptr_restrict 0, perf_event_paranoid 2 > 1 and "
                  "no CAP_SYSLOG)",
                  syslog_fix),
      // kptr_restrict 2 masks them even with CAP_SYSLOG.
      Unavailable("KallsymsMaskedByKptrRestrict2", with([](Machine& m) {
                    m.kptr_restrict = 2;
                    m.kallsyms_masked = true;
                  }),
                  "kcore.kallsyms",
                  "addresses masked (all zero; kptr_restrict 2 hides them from everyone)",
                  "sysctl -w kernel.kptr_restrict=1 and run as root (CAP_SYSLOG); at 2 even "
                  "root sees zeros"),
      // Kernel older than 5.5.
      Unavailable("KernelOlderThan55", with([](Machine& m) { m.release = "5.4.0-1103-aws"; }),
                  "kcore.kernel_version",
                  "old kernel detected! kernel 5.4.0 < 5.5: kcore snapshots of kernel text are "
                  "unavailable, so kernel-scope decodes may lose sync wherever the kernel "
                  "patched itself",
                  "install a kernel >= 5.5 to avoid this"),
      // PTSNAP_NO_KCORE: turned off on purpose.
      {.name = "TurnedOffByEnvironment",
       .machine = with([](Machine& m) {
         m.env = {{"PTSNAP_NO_KCORE", "1"}};
       }),
       .check_id = "kcore.env",
       .check_status = probe::Status::kInfo,
       .check_value = "kernel snapshots turned off by PTSNAP_NO_KCORE=1",
       .check_fix = "unset the variable to snapshot kernel text with kernel-scope traces",
       .image_status = "disabled"},
  };
}

INSTANTIATE_TEST_SUITE_P(Matrix, KcorePrivilege, ::testing::ValuesIn(KcoreRows()), KcoreRowName);

}  // namespace
}  // namespace ptsnap::kworld
