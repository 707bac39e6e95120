// The probe's checks on hand-built ProbeFacts: no files, no CPUID, no
// syscalls. Each section has a machine that passes and ways to fail it.
#include "probe/checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "probe/facts.h"
#include "probe/test_check_ids.h"

namespace ptsnap::probe {

// gtest prints a Check as its fields, not its bytes.
void PrintTo(const Check& c, std::ostream* os) {
  *os << c.id << " [" << StatusName(c.status) << "] " << c.value;
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kStext = 0xffffffff81000000;
constexpr uint64_t kEtext = 0xffffffff81e00000;

sys::KernelVersion Kernel(std::string_view release) {
  auto kv = sys::ParseKernelRelease(release);
  EXPECT_TRUE(kv.has_value()) << release;
  return kv ? *kv : sys::KernelVersion{};
}

// A bare-metal Skylake with a full intel_pt PMU, kernel 6.1, root with every
// capability, readable kallsyms and kcore, 4 CPUs, live events that open and
// qemu in PATH: every check passes.
ProbeFacts GoodMachine() {
  ProbeFacts f;
  f.kernel = Kernel("6.1.0-27-amd64");
  f.osrelease_exists = true;

  f.cpuid_read = true;
  f.cpu.available = true;
  f.cpu.vendor = "GenuineIntel";
  f.cpu.family = 6;
  f.cpu.model = 0x5e;
  f.cpu.stepping = 3;
  f.cpu.pt_supported = true;
  f.cpu.leaf14_0 = sys::CpuidRegs{1, 0xbf, 0x7, 0};
  f.cpu.leaf15 = sys::CpuidRegs{2, 200, 0, 0};

  f.pmu.name = "intel_pt";
  f.pmu.present = true;
  f.pmu.type = 8;
  for (auto [name, bit] : {std::pair{"pt", 0}, std::pair{"tsc", 10}, std::pair{"branch", 13}}) {
    f.pmu.format[name] = sys::FormatTerm{sys::ConfigWord::kConfig, {{bit, bit}}};
  }
  f.pmu.caps = {{"psb_cyc", 1},
                {"mtc", 1},
                {"cycle_thresholds", 0x3fff},
                {"mtc_periods", 0x249},
                {"psb_periods", 0x3f}};
  f.pmu.nr_addr_filters = 2;
  f.pmu.max_nonturbo_ratio = 24;
  f.pmu.tsc_art_ratio = sys::TscArtRatio{200, 2};

  f.priv.euid = 0;
  f.priv.cap_eff = 0x1fffeffffffull;
  f.priv.perf_event_paranoid = 2;
  f.priv.kptr_restrict = 0;
  f.priv.perf_event_mlock_kb = 516;
  f.priv.memlock_known = true;
  f.priv.memlock_bytes = 8 << 20;

  sys::Kallsyms ks;
  ks.symbol_count = 4;
  ks.stext = kStext;
  ks.etext = kEtext;
  f.kallsyms = ks;
  f.kcore.exists = true;
  f.kcore.mode = 0400;
  sys::KcoreHeader header;
  header.loads.push_back({.vaddr = kStext, .filesz = 0x1000000, .memsz = 0x1000000});
  f.kcore.header = header;
  f.kcore.text_read = Ok();

  f.online_cpus = std::vector<int>{0, 1, 2, 3};
  f.online_cpus_exists = true;

  LiveFacts live;
  live.dummy = Ok();
  live.breakpoint_addr = 0x401000;
  live.breakpoint = Ok();
  live.uprobe.type_readable = true;
  live.uprobe.type = 9;
  live.uprobe.path = "/usr/bin/ptsnap";
  live.uprobe.offset = 0x1000;
  live.uprobe.open = Ok();
  f.live = live;

  f.qemu = "/usr/bin/qemu-x86_64";
  return f;
}

// An unprivileged user on the same machine (paranoid 2, no capabilities).
ProbeFacts UserOnGoodMachine() {
  ProbeFacts f = GoodMachine();
  f.priv.euid = 1000;
  f.priv.cap_eff = 0;
  return f;
}

const Check& Get(const Findings& s, std::string_view id) {
  for (const Check& c : s.checks) {
    if (c.id == id) return c;
  }
  ADD_FAILURE() << "no check " << id;
  static const Check kNone{};
  return kNone;
}

std::vector<std::string> Ids(const Findings& s) {
  std::vector<std::string> ids;
  for (const Check& c : s.checks) ids.push_back(c.id);
  return ids;
}

MATCHER_P2(IsCheck, status, value_part, "") {
  *result_listener << "status " << StatusName(arg.status) << ", value '" << arg.value << "'";
  return arg.status == status && arg.value.find(value_part) != std::string::npos;
}

MATCHER(AllOk, "") {
  bool ok = true;
  for (const Check& c : arg.checks) {
    if (c.status != Status::kOk) {
      *result_listener << c.id << " is " << StatusName(c.status) << ": " << c.value << "\n";
      ok = false;
    }
  }
  return ok;
}

// 1. Kernel.

TEST(CheckKernel, RecentKernelHasEveryGate) {
  Findings s = CheckKernel(GoodMachine());
  EXPECT_THAT(Ids(s), ElementsAre("kernel.version", "kernel.features"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "kernel.version"), IsCheck(Status::kOk, "6.1.0-27-amd64 (6.1.0)"));
  EXPECT_THAT(Get(s, "kernel.features"), IsCheck(Status::kOk, "has: aux_area (4.1)"));
  EXPECT_THAT(s.warnings, IsEmpty());
}

TEST(CheckKernel, AncientKernelFailsWithoutAux) {
  ProbeFacts f = GoodMachine();
  f.kernel = Kernel("3.10.0-1160.el7.x86_64");
  Findings s = CheckKernel(f);
  const Check& features = Get(s, "kernel.features");
  EXPECT_THAT(features, IsCheck(Status::kFail, "missing: aux_area (4.1)"));
  EXPECT_THAT(features.fix, HasSubstr("Linux 4.1+"));
  EXPECT_EQ(PtUnavailableReason(f), "the kernel is older than 4.1 (no AUX area)");
}

TEST(CheckKernel, UnreadableReleaseWarnsAndNamesTheFile) {
  ProbeFacts f = GoodMachine();
  f.kernel = Error("no digits in 'junk'");
  Findings s = CheckKernel(f);
  EXPECT_THAT(Get(s, "kernel.version"), IsCheck(Status::kWarn, "unknown: no digits in 'junk'"));
  EXPECT_THAT(Get(s, "kernel.features"), IsCheck(Status::kInfo, "kernel version unknown"));
  EXPECT_THAT(s.warnings, ElementsAre("/proc/sys/kernel/osrelease: no digits in 'junk'"));
  // A missing file is not a malformed one.
  f.osrelease_exists = false;
  EXPECT_THAT(CheckKernel(f).warnings, IsEmpty());
  // Unknown version: assume AUX and CAP_PERFMON, not kcore.
  KernelGates g = GatesOf(f);
  EXPECT_FALSE(g.version_known);
  EXPECT_TRUE(g.has_aux);
  EXPECT_TRUE(g.has_cap_perfmon);
  EXPECT_FALSE(g.has_kcore);
}

// 2. CPU.

TEST(CheckCpu, IntelWithPtOnBareMetal) {
  Findings s = CheckCpu(GoodMachine());
  EXPECT_THAT(Ids(s),
              ElementsAre("cpu.identity", "cpu.hypervisor", "cpu.pt_cpuid", "cpu.tsc_ratio"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "cpu.identity"),
              IsCheck(Status::kOk, "GenuineIntel family 6 model 0x5e stepping 3"));
  EXPECT_THAT(Get(s, "cpu.pt_cpuid"), IsCheck(Status::kOk, "0x14.0 eax=0x1 ebx=0xbf ecx=0x7"));
  EXPECT_THAT(Get(s, "cpu.tsc_ratio"), IsCheck(Status::kOk, "(TSC = crystal * 200/2)"));
}

TEST(CheckCpu, NotReadForRootTrees) {
  ProbeFacts f = GoodMachine();
  f.cpuid_read = false;
  f.cpu = {};
  for (const Check& c : CheckCpu(f).checks) {
    EXPECT_THAT(c, IsCheck(Status::kInfo, "not read (--root")) << c.id;
  }
  f.cpuid_read = true;  // asked, but CPUID did not answer
  EXPECT_THAT(Get(CheckCpu(f), "cpu.identity"), IsCheck(Status::kInfo, "CPUID unavailable"));
}

TEST(CheckCpu, IntelGuestWithoutPtFails) {
  ProbeFacts f = GoodMachine();
  f.cpu.hypervisor = true;
  f.cpu.hypervisor_vendor = "KVMKVMKVM";
  f.cpu.pt_supported = false;
  f.pmu = {};
  Findings s = CheckCpu(f);
  const Check& hv = Get(s, "cpu.hypervisor");
  EXPECT_THAT(hv, IsCheck(Status::kWarn, "guest of KVMKVMKVM; a VM without PT pass-through"));
  EXPECT_THAT(hv.fix, HasSubstr("pt_mode=1"));
  EXPECT_THAT(Get(s, "cpu.pt_cpuid"),
              IsCheck(Status::kFail, "EBX[25]=0: the CPU the VM presents has no Intel PT"));
  EXPECT_EQ(PtUnavailableReason(f), "no intel_pt PMU: this is a VM without PT pass-through");
  // With PT passed through, the same guest is fine.
  f.pmu = GoodMachine().pmu;
  EXPECT_THAT(Get(CheckCpu(f), "cpu.hypervisor"), IsCheck(Status::kOk, "with PT passed through"));
}

TEST(CheckCpu, AmdIsNotIntel) {
  ProbeFacts f = GoodMachine();
  f.cpu.vendor = "AuthenticAMD";
  f.cpu.pt_supported = false;
  f.pmu = {};
  Findings s = CheckCpu(f);
  EXPECT_THAT(Get(s, "cpu.identity"), IsCheck(Status::kWarn, "AuthenticAMD"));
  EXPECT_THAT(Get(s, "cpu.pt_cpuid"), IsCheck(Status::kInfo, "(not an Intel CPU)"));
  EXPECT_EQ(PtUnavailableReason(f), "no intel_pt PMU: the CPU is AuthenticAMD, not Intel");
}

// 3. intel_pt PMU.

TEST(CheckPmu, FullPmu) {
  Findings s = CheckPmu(GoodMachine());
  EXPECT_THAT(Ids(s), ElementsAre("pmu.intel_pt", "pmu.format", "pmu.caps", "pmu.addr_filters",
                                  "pmu.timing", "pmu.timer_resolution"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "pmu.intel_pt"), IsCheck(Status::kOk, "present, type 8"));
  EXPECT_THAT(Get(s, "pmu.format"), IsCheck(Status::kOk, "branch=config:13 pt=config:0"));
  EXPECT_THAT(Get(s, "pmu.timer_resolution"),
              IsCheck(Status::kOk,
                      "cyc yes (cyc_thresh 0-13); mtc yes (mtc_period 0,3,6,9); "
                      "psb_period 0-5; presets low, normal, high"));
  EXPECT_THAT(Get(s, "pmu.timing"), IsCheck(Status::kOk, "tsc_art_ratio=200:2"));
}

TEST(CheckPmu, AbsentPmuFailsAndSkipsTheRest) {
  ProbeFacts f = GoodMachine();
  f.pmu = {};
  f.cpu.available = false;
  Findings s = CheckPmu(f);
  const Check& pmu = Get(s, "pmu.intel_pt");
  EXPECT_THAT(pmu, IsCheck(Status::kFail, "absent (no /sys/bus/event_source/devices/intel_pt)"));
  EXPECT_THAT(pmu.fix, HasSubstr("needs a Broadwell+ Intel CPU"));
  ASSERT_EQ(s.checks.size(), 6u);
  for (size_t i = 1; i < s.checks.size(); ++i) {
    EXPECT_THAT(s.checks[i], IsCheck(Status::kInfo, "skipped: no intel_pt PMU"));
  }
  EXPECT_EQ(PtUnavailableReason(f), "no intel_pt PMU on this machine");
}

TEST(CheckPmu, BrokenFilesFailTypeAndWarn) {
  ProbeFacts f = GoodMachine();
  f.pmu.type.reset();
  f.pmu.format.erase("tsc");
  f.pmu.caps.clear();
  f.pmu.nr_addr_filters.reset();
  f.pmu.tsc_art_ratio.reset();
  f.pmu.warnings = {"/sys/bus/event_source/devices/intel_pt/type: not a number"};
  Findings s = CheckPmu(f);
  EXPECT_THAT(Get(s, "pmu.intel_pt"), IsCheck(Status::kFail, "type is missing or unreadable"));
  EXPECT_THAT(Get(s, "pmu.format").fix, HasSubstr("format terms tsc missing"));
  EXPECT_THAT(Get(s, "pmu.caps"), IsCheck(Status::kWarn, "none"));
  EXPECT_THAT(Get(s, "pmu.addr_filters"), IsCheck(Status::kWarn, "unknown (no nr_addr_filters)"));
  EXPECT_THAT(Get(s, "pmu.timing"), IsCheck(Status::kWarn, "tsc_art_ratio=?"));
  EXPECT_THAT(Get(s, "pmu.timer_resolution"),
              IsCheck(Status::kWarn, "cyc no; mtc no; psb_period fixed; presets low, normal"));
  EXPECT_EQ(s.warnings, f.pmu.warnings);
  EXPECT_EQ(PtUnavailableReason(f), "the intel_pt PMU's type file is unreadable");
}

// 4. Privileges and scopes.

TEST(CheckPrivileges, RootMayTraceEverything) {
  Findings s = CheckPrivileges(GoodMachine());
  EXPECT_THAT(Ids(s),
              ElementsAre("priv.user", "priv.paranoid", "priv.ptrace_scope", "priv.scopes"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "priv.user"), IsCheck(Status::kOk,
                                           "euid 0; CapEff 0x1fffeffffff: "
                                           "CAP_PERFMON CAP_SYS_ADMIN"));
  EXPECT_THAT(Get(s, "priv.paranoid"),
              IsCheck(Status::kOk, "2 (overridden: CAP_PERFMON/CAP_SYS_ADMIN)"));
  EXPECT_THAT(Get(s, "priv.ptrace_scope"), IsCheck(Status::kOk, "no Yama"));
  EXPECT_THAT(Get(s, "priv.scopes"), IsCheck(Status::kOk, "user yes, kernel yes, system-wide yes"));
}

TEST(CheckPrivileges, ParanoidThreeBlocksAUser) {
  ProbeFacts f = UserOnGoodMachine();
  f.priv.perf_event_paranoid = 3;
  Findings s = CheckPrivileges(f);
  const Check& p = Get(s, "priv.paranoid");
  EXPECT_THAT(p, IsCheck(Status::kFail, "3: perf events blocked"));
  EXPECT_THAT(p.fix, HasSubstr("perf_event_paranoid=2"));
  EXPECT_THAT(Get(s, "priv.scopes"), IsCheck(Status::kFail, "user no, kernel no"));
  EXPECT_EQ(PtUnavailableReason(f), "perf_event_paranoid blocks perf events for this user");
  EXPECT_THAT(CollectionModes(f), ElementsAre("emulated"));
}

TEST(CheckPrivileges, UnknownParanoidAndStrictYama) {
  ProbeFacts f = UserOnGoodMachine();
  f.priv.perf_event_paranoid.reset();
  f.priv.ptrace_scope = 2;
  f.priv.cap_eff.reset();
  f.priv.warnings = {"/proc/self/status: no CapEff line"};
  Findings s = CheckPrivileges(f);
  EXPECT_THAT(Get(s, "priv.user"), IsCheck(Status::kWarn, "euid 1000; capabilities unknown"));
  EXPECT_THAT(Get(s, "priv.paranoid"), IsCheck(Status::kFail, "unknown"));
  EXPECT_THAT(Get(s, "priv.ptrace_scope"),
              IsCheck(Status::kWarn, "2: `attach` needs CAP_SYS_PTRACE"));
  EXPECT_EQ(s.warnings, f.priv.warnings);
}

TEST(CheckPrivileges, CapPerfmonCountsFrom58) {
  ProbeFacts f = UserOnGoodMachine();
  f.priv.cap_eff = uint64_t{1} << sys::kCapPerfmon;
  EXPECT_TRUE(ScopesOf(f).kernel);
  f.kernel = Kernel("5.4.0-1103-aws");
  EXPECT_FALSE(ScopesOf(f).kernel);
  EXPECT_THAT(Get(CheckPrivileges(f), "priv.paranoid"), IsCheck(Status::kWarn, "user space only"));
}

// 5. The /proc/kcore gate.

TEST(CheckKcore, ReadableKcore) {
  ProbeFacts f = GoodMachine();
  Findings s = CheckKcore(f);
  EXPECT_THAT(Ids(s), ElementsAre("kcore.env", "kcore.kernel_version", "kcore.kallsyms",
                                  "kcore.file", "kcore.lockdown"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "kcore.kallsyms"),
              IsCheck(Status::kOk, "4 symbols, kernel text 0xffffffff81000000-0xffffffff81e00000"));
  EXPECT_THAT(Get(s, "kcore.file"), IsCheck(Status::kOk,
                                            "readable; 1 PT_LOADs; kernel text in PT_LOAD at "
                                            "0xffffffff81000000"));
  EXPECT_TRUE(KcoreTextReadable(f));
  EXPECT_TRUE(KcoreUsable(f));
  EXPECT_THAT(CollectionModes(f), ElementsAre("intel_pt-user", "intel_pt-kernel",
                                              "intel_pt-system-wide", "kcore", "emulated"));
}

TEST(CheckKcore, EnvironmentSwitchTurnsItOff) {
  ProbeFacts f = GoodMachine();
  f.ptsnap_no_kcore = "";  // set but empty: still on
  f.magic_trace_perf_no_kcore = "1";
  EXPECT_EQ(KcoreEnvSwitch(f), "MAGIC_TRACE_PERF_NO_KCORE=1");
  f.ptsnap_no_kcore = "yes";
  EXPECT_EQ(KcoreEnvSwitch(f), "PTSNAP_NO_KCORE=yes");
  Findings s = CheckKcore(f);
  EXPECT_THAT(Get(s, "kcore.env"),
              IsCheck(Status::kInfo, "kernel snapshots turned off by PTSNAP_NO_KCORE=yes"));
  EXPECT_THAT(Get(s, "kcore.file"), IsCheck(Status::kOk, "readable"));
  EXPECT_FALSE(KcoreUsable(f));
}

TEST(CheckKcore, OldKernelWarns) {
  ProbeFacts f = GoodMachine();
  f.kernel = Kernel("5.4.0-1103-aws");
  Check kv = Get(CheckKcore(f), "kcore.kernel_version");
  EXPECT_THAT(kv, IsCheck(Status::kWarn, "old kernel detected! kernel 5.4.0 < 5.5"));
  EXPECT_THAT(kv.fix, HasSubstr(">= 5.5"));
  EXPECT_FALSE(KcoreUsable(f));
  f.kernel = Error("unknown");
  EXPECT_THAT(Get(CheckKcore(f), "kcore.kernel_version"),
              IsCheck(Status::kWarn, "unknown kernel version"));
}

TEST(CheckKcore, AbsentKcore) {
  ProbeFacts f = GoodMachine();
  f.kcore = {};
  Check file = Get(CheckKcore(f), "kcore.file");
  EXPECT_THAT(file, IsCheck(Status::kWarn, "absent"));
  EXPECT_THAT(file.fix, HasSubstr("CONFIG_PROC_KCORE=y"));
  EXPECT_FALSE(KcoreUsable(f));
}

TEST(CheckKcore, UnprivilegedUserIsRefused) {
  ProbeFacts f = UserOnGoodMachine();
  EXPECT_THAT(KcoreRefusals(f.kcore.mode, f.priv),
              ElementsAre("mode 0400 lets only root read it (euid 1000)", "no CAP_SYS_RAWIO"));
  Check file = Get(CheckKcore(f), "kcore.file");
  EXPECT_THAT(file, IsCheck(Status::kWarn,
                            "present, but this process may not open it: mode 0400 "
                            "lets only root read it (euid 1000); no "
                            "CAP_SYS_RAWIO"));
  EXPECT_EQ(file.fix, "run as root (CAP_SYS_RAWIO)");
  EXPECT_FALSE(KcoreTextReadable(f));
}

TEST(CheckKcore, RefusalsFromModeCapabilitiesAndLockdown) {
  sys::Privileges root;
  root.euid = 0;
  root.cap_eff = uint64_t{1} << sys::kCapSysRawio;
  EXPECT_THAT(KcoreRefusals(0400u, root), IsEmpty());
  EXPECT_THAT(KcoreRefusals(0000u, root), ElementsAre("mode 0000 denies reading even to its "
                                                      "owner root"));
  root.cap_eff = *root.cap_eff | (uint64_t{1} << sys::kCapDacOverride);
  EXPECT_THAT(KcoreRefusals(0000u, root), IsEmpty());
  // Capabilities unknown: the open itself tells; only lockdown is known.
  sys::Privileges unknown;
  unknown.lockdown = "confidentiality";
  EXPECT_THAT(KcoreRefusals(0400u, unknown), ElementsAre("lockdown=confidentiality refuses it"));
  unknown.lockdown = "integrity";
  EXPECT_THAT(KcoreRefusals(std::nullopt, unknown), IsEmpty());
}

TEST(CheckKcore, ConfidentialityLockdown) {
  ProbeFacts f = GoodMachine();
  f.priv.lockdown = "confidentiality";
  Findings s = CheckKcore(f);
  const Check& file = Get(s, "kcore.file");
  EXPECT_THAT(file, IsCheck(Status::kWarn, "lockdown=confidentiality refuses it"));
  EXPECT_EQ(file.fix, "boot without lockdown=confidentiality for kernel snapshots");
  EXPECT_THAT(Get(s, "kcore.lockdown"), IsCheck(Status::kWarn, "confidentiality"));
  EXPECT_FALSE(KcoreUsable(f));
  f.priv.lockdown = "integrity";
  EXPECT_THAT(Get(CheckKcore(f), "kcore.lockdown"), IsCheck(Status::kOk, "integrity"));
  EXPECT_TRUE(KcoreUsable(f));
}

TEST(CheckKcore, OpenAndReadFailures) {
  ProbeFacts f = GoodMachine();
  f.kcore.header = Error::FromErrno("open /proc/kcore", EPERM);
  Check perm = Get(CheckKcore(f), "kcore.file");
  EXPECT_THAT(perm, IsCheck(Status::kWarn, "cannot open: open /proc/kcore"));
  EXPECT_THAT(perm.fix, HasSubstr("needs CAP_SYS_RAWIO"));
  EXPECT_THAT(CheckKcore(f).warnings, IsEmpty());
  // Not an errno: the file is not a core, a `files` warning.
  f.kcore.header = Error("bad ELF magic");
  Findings bad = CheckKcore(f);
  EXPECT_EQ(Get(bad, "kcore.file").fix, "the file is not a valid ELF core");
  EXPECT_THAT(bad.warnings, ElementsAre("/proc/kcore: bad ELF magic"));
  EXPECT_FALSE(KcoreUsable(f));

  f = GoodMachine();
  f.kcore.text_read = Error::FromErrno("pread", EIO);
  EXPECT_THAT(Get(CheckKcore(f), "kcore.file"),
              IsCheck(Status::kWarn, "kernel text covered but unreadable: pread"));
  EXPECT_FALSE(KcoreUsable(f));

  f = GoodMachine();
  f.kcore.header->loads[0].vaddr = 0xffff888000000000;
  EXPECT_THAT(Get(CheckKcore(f), "kcore.file"),
              IsCheck(Status::kWarn, "no PT_LOAD covers kernel text 0xffffffff81000000-"));
  EXPECT_FALSE(KcoreUsable(f));
}

TEST(CheckKcore, MaskedOrBrokenKallsyms) {
  ProbeFacts f = UserOnGoodMachine();
  f.kcore.mode = 0444;
  f.priv.cap_eff = uint64_t{1} << sys::kCapSysRawio;
  f.kallsyms->masked = true;
  f.priv.kptr_restrict = 1;
  Findings s = CheckKcore(f);
  const Check& ks = Get(s, "kcore.kallsyms");
  EXPECT_THAT(
      ks, IsCheck(Status::kWarn, "addresses masked (all zero; kptr_restrict 1 and no CAP_SYSLOG)"));
  EXPECT_THAT(ks.fix, HasSubstr("kptr_restrict=0"));
  EXPECT_THAT(Get(s, "kcore.file"), IsCheck(Status::kWarn, "kernel text range unknown"));
  EXPECT_FALSE(KernelTextRange(f.kallsyms));

  f = GoodMachine();
  sys::Kallsyms junk;
  junk.malformed_lines = 3;
  junk.first_malformed = "garbage";
  f.kallsyms = junk;
  Findings j = CheckKcore(f);
  EXPECT_THAT(Get(j, "kcore.kallsyms"), IsCheck(Status::kWarn, "not in kallsyms format"));
  EXPECT_THAT(j.warnings, ElementsAre("/proc/kallsyms: no line parses (first: 'garbage')"));

  f.kallsyms = Error::FromErrno("open /proc/kallsyms", EACCES);
  EXPECT_THAT(Get(CheckKcore(f), "kcore.kallsyms"), IsCheck(Status::kWarn, "unreadable"));
}

// 6. Memory.

TEST(CheckMemory, RootHasNoLimit) {
  Findings s = CheckMemory(GoodMachine());
  EXPECT_THAT(Ids(s), ElementsAre("mem.mlock", "mem.snapshot_size"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "mem.mlock"), IsCheck(Status::kOk,
                                           "4 online CPUs; largest AUX per CPU: "
                                           "no limit (CAP_IPC_LOCK)"));
  EXPECT_THAT(Get(s, "mem.snapshot_size"), IsCheck(Status::kOk, "4 MiB per traced thread"));
}

TEST(CheckMemory, TinyBudgetFails) {
  ProbeFacts f = UserOnGoodMachine();
  f.priv.perf_event_mlock_kb = 8;
  f.priv.memlock_bytes = 0;
  Findings s = CheckMemory(f);
  EXPECT_THAT(Get(s, "mem.mlock"), IsCheck(Status::kWarn, "largest AUX per CPU: 0 bytes"));
  EXPECT_THAT(Get(s, "mem.snapshot_size"), IsCheck(Status::kFail, "no AUX buffer fits"));
  EXPECT_EQ(PtUnavailableReason(f), "the mlock budget is too small for an AUX buffer");
}

TEST(CheckMemory, UnparsableCpuListCountsOneCpu) {
  ProbeFacts f = UserOnGoodMachine();
  f.online_cpus = Error("/sys/devices/system/cpu/online: bad CPU list");
  Findings s = CheckMemory(f);
  EXPECT_EQ(OnlineCpus(f), 1);
  EXPECT_THAT(Get(s, "mem.mlock"), IsCheck(Status::kOk, ", 1 online CPU;"));
  EXPECT_THAT(s.warnings, ElementsAre("/sys/devices/system/cpu/online: bad CPU list"));
  f.online_cpus_exists = false;
  EXPECT_THAT(CheckMemory(f).warnings, IsEmpty());
}

// 7. Live checks.

TEST(CheckLive, EventsOpened) {
  Findings s = CheckLive(GoodMachine());
  EXPECT_THAT(Ids(s), ElementsAre("live.dummy", "live.breakpoint", "live.uprobe"));
  EXPECT_THAT(s, AllOk());
  EXPECT_THAT(Get(s, "live.breakpoint"),
              IsCheck(Status::kOk, "opened an execute breakpoint at 0x401000 in itself"));
  EXPECT_THAT(Get(s, "live.uprobe"),
              IsCheck(Status::kOk, "opened a uprobe (type 9) on /usr/bin/ptsnap+0x1000"));
}

TEST(CheckLive, SkippedWithoutLiveSyscalls) {
  ProbeFacts f = GoodMachine();
  f.live.reset();
  for (const Check& c : CheckLive(f).checks) {
    EXPECT_THAT(c, IsCheck(Status::kInfo, "skipped (--root: no live syscalls)")) << c.id;
  }
  EXPECT_EQ(PtUnavailableReason(f), "");
}

TEST(CheckLive, RefusedEventsExplainTheErrno) {
  ProbeFacts f = GoodMachine();
  f.live->dummy = Error::FromErrno("perf_event_open", EACCES);
  f.live->breakpoint = Error::FromErrno("perf_event_open", ENOENT);
  Findings s = CheckLive(f);
  const Check& dummy = Get(s, "live.dummy");
  EXPECT_THAT(dummy, IsCheck(Status::kFail, "failed: Permission denied ("));
  EXPECT_THAT(dummy.fix, HasSubstr("seccomp"));
  EXPECT_THAT(Get(s, "live.breakpoint"), IsCheck(Status::kWarn, "failed: No such file"));
  EXPECT_EQ(PtUnavailableReason(f), "perf_event_open is refused");
}

TEST(CheckLive, UprobeStepsThatFail) {
  ProbeFacts f = GoodMachine();
  UprobeFacts& u = f.live->uprobe;
  u.open = Error::FromErrno("perf_event_open", EPERM);
  EXPECT_THAT(Get(CheckLive(f), "live.uprobe"), IsCheck(Status::kWarn, "failed: "));
  u.path.clear();
  EXPECT_THAT(Get(CheckLive(f), "live.uprobe"),
              IsCheck(Status::kWarn, "cannot find this program's text"));
  u.maps_error = Error("no maps");
  EXPECT_THAT(Get(CheckLive(f), "live.uprobe"),
              IsCheck(Status::kWarn, "cannot read /proc/self/maps: no maps"));
  u.type.reset();
  Findings bad_type = CheckLive(f);
  EXPECT_THAT(Get(bad_type, "live.uprobe"), IsCheck(Status::kWarn, "is not a number"));
  EXPECT_THAT(bad_type.warnings,
              ElementsAre("/sys/bus/event_source/devices/uprobe/type: not a decimal number"));
  u.type_readable = false;
  Findings none = CheckLive(f);
  EXPECT_THAT(Get(none, "live.uprobe"), IsCheck(Status::kWarn, "no uprobe PMU ("));
  EXPECT_THAT(Get(none, "live.uprobe").fix, HasSubstr("CONFIG_UPROBE_EVENTS"));
  EXPECT_THAT(none.warnings, IsEmpty());
}

// 8. Emulation.

TEST(CheckEmulation, QemuFoundOrNot) {
  ProbeFacts f = GoodMachine();
  EXPECT_THAT(Get(CheckEmulation(f), "emulate.qemu"),
              IsCheck(Status::kOk, "found /usr/bin/qemu-x86_64"));
  f.qemu.reset();
  Check q = Get(CheckEmulation(f), "emulate.qemu");
  EXPECT_THAT(q, IsCheck(Status::kWarn, "qemu-x86_64 not in PATH"));
  EXPECT_THAT(q.fix, HasSubstr("qemu-user"));
}

// 9. Files and verdict.

TEST(CheckVerdict, AvailableWithEveryScope) {
  Findings s = CheckVerdict(GoodMachine(), {});
  EXPECT_THAT(Ids(s), ElementsAre("files", "verdict.intel_pt", "verdict.modes"));
  EXPECT_THAT(Get(s, "files"), IsCheck(Status::kOk, "every file read parsed"));
  EXPECT_THAT(Get(s, "verdict.intel_pt"),
              IsCheck(Status::kOk, "available (user, kernel, system-wide)"));
  EXPECT_THAT(
      Get(s, "verdict.modes"),
      IsCheck(Status::kInfo, "intel_pt-user intel_pt-kernel intel_pt-system-wide kcore emulated"));
}

TEST(CheckVerdict, UnavailableWithoutQemuHasNoModes) {
  ProbeFacts f = GoodMachine();
  f.pmu = {};
  f.qemu.reset();
  Findings s = CheckVerdict(f, {"/a: bad", "/b: worse"});
  EXPECT_THAT(Get(s, "files"), IsCheck(Status::kWarn, "/a: bad; /b: worse"));
  const Check& v = Get(s, "verdict.intel_pt");
  EXPECT_THAT(v, IsCheck(Status::kFail, "unavailable: no intel_pt PMU"));
  EXPECT_THAT(v.fix, HasSubstr("needs qemu-user"));
  EXPECT_THAT(Get(s, "verdict.modes"), IsCheck(Status::kFail, "none"));
  f.qemu = "/bin/qemu-x86_64";
  EXPECT_THAT(Get(CheckVerdict(f, {}), "verdict.intel_pt").fix,
              HasSubstr("ptsnap run --emulate -- PROG"));
}

// The whole report from facts.

TEST(AssembleReport, SectionsInOrderAndTheirWarningsInOrder) {
  ProbeFacts f = UserOnGoodMachine();
  f.kernel = Error("junk");
  f.pmu.warnings = {"pmu"};
  f.priv.warnings = {"priv"};
  f.online_cpus = Error("cpus");
  ProbeReport r = AssembleReport(f);
  std::vector<std::string> ids;
  for (const Check& c : r.checks) ids.push_back(c.id);
  EXPECT_EQ(ids, test_support::kAllCheckIds);
  EXPECT_THAT(r.warnings, ElementsAre("/proc/sys/kernel/osrelease: junk", "pmu", "priv", "cpus"));
  EXPECT_THAT(r.Find("files")->value, HasSubstr("junk; pmu; priv; cpus"));
  EXPECT_TRUE(r.pt_available);
  EXPECT_EQ(r.pt_reason, "");
  EXPECT_TRUE(r.scopes.user);
  EXPECT_FALSE(r.scopes.kernel);
  EXPECT_FALSE(r.kcore_usable);  // refused to this user (and kernel version unknown)
  EXPECT_EQ(r.default_snapshot_bytes, 128u << 10);
  EXPECT_THAT(r.modes, ElementsAre("intel_pt-user", "emulated"));
}

TEST(AssembleReport, VerdictFieldsAgreeWithTheChecks) {
  ProbeFacts f = GoodMachine();
  ProbeReport ok = AssembleReport(f);
  EXPECT_TRUE(ok.pt_available);
  EXPECT_TRUE(ok.kcore_usable);
  EXPECT_EQ(ok.default_snapshot_bytes, 4u << 20);
  EXPECT_EQ(ok.modes, CollectionModes(f));
  f.pmu = {};
  ProbeReport no = AssembleReport(f);
  EXPECT_FALSE(no.pt_available);
  EXPECT_EQ(no.pt_reason, "no intel_pt PMU on this machine");
  EXPECT_THAT(no.modes, ElementsAre("emulated"));
  EXPECT_THAT(*no.Find("verdict.intel_pt"),
              IsCheck(Status::kFail, "unavailable: no intel_pt PMU on this machine"));
}

}  // namespace
}  // namespace ptsnap::probe
