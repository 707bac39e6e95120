// The probe on fake /sys and /proc trees (no live syscalls, injected CPUID).
#include "probe/probe.h"

#include <elf.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "probe/render.h"
#include "probe/test_check_ids.h"
#include "sys/kcore_image.h"
#include "tests/support/fake_cpuid.h"
#include "tests/support/fake_intel_pt.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::probe {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kStext = 0xffffffff81000000;
constexpr uint64_t kEtext = 0xffffffff81e00000;
const std::string kPt = ::ptsnap::testing::kIntelPtDir;

const std::vector<std::string>& kAllIds = test_support::kAllCheckIds;

std::string Status(uint32_t euid, uint64_t cap_eff) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "Name:\tptsnap\nUid:\t%u\t%u\t%u\t%u\nCapEff:\t%016llx\n", euid,
                euid, euid, euid, static_cast<unsigned long long>(cap_eff));
  return buf;
}

std::string Kallsyms(bool masked) {
  auto a = [&](uint64_t v) {
    char b[20];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(masked ? 0 : v));
    return std::string(b);
  };
  return a(kStext) + " T _text\n" + a(kStext) + " T _stext\n" + a(kStext + 0x1000) +
         " t do_work\n" + a(kEtext) + " T _etext\n";
}

// A core (a PT_NOTE, then one PT_LOAD of nops) mapping [vaddr, vaddr + size).
std::string Core(uint64_t vaddr, uint64_t size) {
  return sys::BuildCoreImage(
      {{.type = PT_NOTE}, {.vaddr = vaddr, .bytes = std::string(size, '\x90')}});
}

sys::CpuidRegs Vendor(const char* v, uint32_t max_leaf) {
  sys::CpuidRegs r{max_leaf, 0, 0, 0};
  std::memcpy(&r.ebx, v, 4);
  std::memcpy(&r.edx, v + 4, 4);
  std::memcpy(&r.ecx, v + 8, 4);
  return r;
}

::ptsnap::testing::FakeCpuid SkylakeCpu() {
  ::ptsnap::testing::FakeCpuid c;
  c.Set(0, 0, Vendor("GenuineIntel", 0x16));
  c.Set(1, 0, {0x000506e3, 0, 0, 0});
  c.Set(7, 0, {0, 1u << 25, 0, 0});
  c.Set(0x14, 0, {1, 0xbf, 0x7, 0});
  c.Set(0x14, 1, {0x02490002, 0x003f3fff, 0, 0});
  c.Set(0x15, 0, {2, 200, 0, 0});
  return c;
}

// An Intel KVM guest without PT: CPUID.1 EAX `signature` with the
// hypervisor bit, no PT bit, the KVM signature leaf.
::ptsnap::testing::FakeCpuid KvmGuestCpu(uint32_t signature = 0x00050654,
                                         uint32_t max_leaf = 0x16) {
  ::ptsnap::testing::FakeCpuid c;
  c.Set(0, 0, Vendor("GenuineIntel", max_leaf));
  c.Set(1, 0, {signature, 0, 1u << 31, 0});
  c.Set(7, 0, {0, 0, 0, 0});
  sys::CpuidRegs kvm{0x40000001, 0, 0, 0};
  std::memcpy(&kvm.ebx, "KVMK", 4);
  std::memcpy(&kvm.ecx, "VMKV", 4);
  std::memcpy(&kvm.edx, "M\0\0\0", 4);
  c.Set(0x40000000, 0, kvm);
  return c;
}

// A plain machine: kernel 5.15, unprivileged user, paranoid 2, no PMU.
class FakeMachine {
 public:
  FakeMachine() {
    Write("proc/sys/kernel/osrelease", "5.15.0-91-generic\n");
    Write("proc/self/status", Status(1000, 0));
    Write("proc/self/limits", "Max locked memory         8388608      8388608      bytes\n");
    Write("proc/sys/kernel/perf_event_paranoid", "2\n");
    Write("proc/sys/kernel/kptr_restrict", "0\n");
    Write("proc/sys/kernel/perf_event_mlock_kb", "516\n");
    Write("proc/sys/kernel/yama/ptrace_scope", "1\n");
    Write("sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
    Write("sys/devices/system/cpu/online", "0-3\n");
    Write("proc/kallsyms", Kallsyms(false));
    dir_.Mkdir("bin");
    Write("bin/qemu-x86_64", "#!/bin/sh\n", 0755);
  }

  void Write(const std::string& rel, const std::string& content, mode_t mode = 0644) {
    dir_.Write(rel, content, mode);
  }
  void Remove(const std::string& rel) { std::filesystem::remove_all(dir_.path() / rel); }

  void AddSkylakePmu() {
    ::ptsnap::testing::WriteIntelPt(dir_, ::ptsnap::testing::SkylakeIntelPt());
  }
  void AddBroadwellPmu() {
    ::ptsnap::testing::WriteIntelPt(dir_, ::ptsnap::testing::BroadwellIntelPt());
  }

  void MakeRoot() { Write("proc/self/status", Status(0, 0x1fffeffffffull)); }

  ProbeReport Run(const sys::CpuidSource* cpuid = nullptr,
                  std::map<std::string, std::string> vars = {}) const {
    ProbeEnv env;
    env.root = base::RootPath(dir_.path());
    env.cpuid = cpuid;
    std::string path = (dir_.path() / "bin").string();
    vars.emplace("PATH", path);
    env.getenv = [vars](std::string_view name) -> std::optional<std::string> {
      auto it = vars.find(std::string(name));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    env.live_syscalls = false;
    return RunProbe(env);
  }

  [[nodiscard]] const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

}  // namespace

// gtest prints a Check as its fields, not its bytes.
void PrintTo(const Check& c, std::ostream* os) {
  *os << c.id << " [" << StatusName(c.status) << "] " << c.value;
}

namespace {

const Check& Get(const ProbeReport& r, std::string_view id) {
  const Check* c = r.Find(id);
  if (c == nullptr) {
    ADD_FAILURE() << "no check " << id;
    static const Check kNone{};
    return kNone;
  }
  return *c;
}

MATCHER_P2(IsCheck, status, value_part, "") {
  *result_listener << "status " << StatusName(arg.status) << ", value '" << arg.value << "'";
  return arg.status == status && arg.value.find(value_part) != std::string::npos;
}

TEST(Probe, SkylakeWithFullCaps) {
  FakeMachine m;
  m.AddSkylakePmu();
  ::ptsnap::testing::FakeCpuid cpu = SkylakeCpu();
  ProbeReport r = m.Run(&cpu);
  EXPECT_THAT(Get(r, "pmu.intel_pt"), IsCheck(Status::kOk, "type 8"));
  EXPECT_THAT(Get(r, "pmu.format"), IsCheck(Status::kOk, "mtc_period=config:14-17"));
  EXPECT_THAT(Get(r, "pmu.caps"), IsCheck(Status::kOk, "mtc_periods=0x249"));
  EXPECT_THAT(Get(r, "pmu.addr_filters"), IsCheck(Status::kOk, "2 ranges"));
  EXPECT_THAT(Get(r, "pmu.timing"), IsCheck(Status::kOk, "tsc_art_ratio=200:2"));
  EXPECT_THAT(Get(r, "pmu.timer_resolution"),
              IsCheck(Status::kOk, "cyc yes (cyc_thresh 0-13); mtc yes (mtc_period 0,3,6,9)"));
  EXPECT_THAT(Get(r, "pmu.timer_resolution").value, HasSubstr("psb_period 0-5"));
  EXPECT_THAT(Get(r, "cpu.identity"), IsCheck(Status::kOk, "family 6 model 0x5e stepping 3"));
  EXPECT_THAT(Get(r, "cpu.hypervisor"), IsCheck(Status::kOk, "bare metal"));
  EXPECT_THAT(Get(r, "cpu.pt_cpuid"), IsCheck(Status::kOk, "0x14.1 eax=0x2490002"));
  EXPECT_THAT(Get(r, "cpu.tsc_ratio"), IsCheck(Status::kOk, "ebx=200"));
  EXPECT_TRUE(r.pt_available);
  EXPECT_THAT(Get(r, "verdict.intel_pt"), IsCheck(Status::kOk, "available (user)"));
  EXPECT_THAT(r.modes, Contains("intel_pt-user"));
  EXPECT_THAT(r.modes, Contains("emulated"));
  EXPECT_THAT(r.modes, Not(Contains("intel_pt-kernel")));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(Probe, BroadwellWithoutPsbCyc) {
  FakeMachine m;
  m.AddBroadwellPmu();
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "pmu.intel_pt"), IsCheck(Status::kOk, "type 7"));
  const Check& res = Get(r, "pmu.timer_resolution");
  EXPECT_THAT(res, IsCheck(Status::kWarn, "cyc no; mtc no; psb_period fixed"));
  EXPECT_THAT(res.fix, HasSubstr("psb_cyc"));
  EXPECT_THAT(Get(r, "pmu.addr_filters"), IsCheck(Status::kWarn, "0 ranges"));
  EXPECT_THAT(Get(r, "pmu.timing"), IsCheck(Status::kWarn, "tsc_art_ratio=?"));
  EXPECT_TRUE(r.pt_available);
  EXPECT_THAT(Get(r, "cpu.identity"), IsCheck(Status::kInfo, "--root"));
}

TEST(Probe, NoPmuInAVm) {
  FakeMachine m;
  ::ptsnap::testing::FakeCpuid cpu = KvmGuestCpu();
  ProbeReport r = m.Run(&cpu);
  const Check& pmu = Get(r, "pmu.intel_pt");
  EXPECT_THAT(pmu, IsCheck(Status::kFail, "absent"));
  EXPECT_THAT(pmu.fix, HasSubstr("VM without PT pass-through"));
  EXPECT_THAT(Get(r, "cpu.hypervisor"), IsCheck(Status::kWarn, "guest of KVMKVMKVM"));
  EXPECT_THAT(Get(r, "cpu.pt_cpuid"), IsCheck(Status::kFail, "EBX[25]=0"));
  for (const char* id : {"pmu.format", "pmu.caps", "pmu.timer_resolution"}) {
    EXPECT_THAT(Get(r, id), IsCheck(Status::kInfo, "skipped")) << id;
  }
  EXPECT_FALSE(r.pt_available);
  EXPECT_THAT(r.pt_reason, HasSubstr("VM without PT pass-through"));
  EXPECT_THAT(Get(r, "verdict.intel_pt"), IsCheck(Status::kFail, "unavailable"));
  EXPECT_EQ(r.modes, std::vector<std::string>{"emulated"});
}

TEST(Probe, NoPmuNoQemu) {
  FakeMachine m;
  m.Remove("bin/qemu-x86_64");
  ProbeReport r = m.Run();
  EXPECT_FALSE(r.pt_available);
  EXPECT_THAT(Get(r, "emulate.qemu"), IsCheck(Status::kWarn, "not in PATH"));
  EXPECT_THAT(Get(r, "verdict.modes"), IsCheck(Status::kFail, "none"));
}

TEST(Probe, KcoreReadableAsRoot) {
  FakeMachine m;
  m.AddSkylakePmu();
  m.MakeRoot();
  m.Write("proc/kcore", Core(kStext, kEtext - kStext + 0x1000), 0400);
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "kcore.kallsyms"), IsCheck(Status::kOk, "4 symbols, kernel text"));
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kOk, "readable; 1 PT_LOADs"));
  EXPECT_TRUE(r.kcore_usable);
  EXPECT_THAT(r.modes, Contains("kcore"));
  EXPECT_THAT(r.modes, Contains("intel_pt-system-wide"));
  EXPECT_EQ(r.default_snapshot_bytes, 4u << 20);
  EXPECT_THAT(Get(r, "priv.ptrace_scope"), IsCheck(Status::kOk, "CAP_SYS_PTRACE overrides"));
}

TEST(Probe, KcoreNotCoveringText) {
  FakeMachine m;
  m.MakeRoot();
  m.Write("proc/kcore", Core(0xffff888000000000, 0x1000));
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kWarn, "no PT_LOAD covers kernel text"));
  EXPECT_FALSE(r.kcore_usable);
}

TEST(Probe, KcoreUnreadable) {
  FakeMachine m;
  m.MakeRoot();
  m.dir().Mkdir("proc/kcore");  // open succeeds, read fails (EISDIR)
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kWarn, "cannot open"));
  EXPECT_FALSE(r.kcore_usable);
  m.Remove("proc/kcore");
  r = m.Run();
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kWarn, "absent"));
}

TEST(Probe, MaskedKallsyms) {
  FakeMachine m;
  m.MakeRoot();
  m.Write("proc/sys/kernel/kptr_restrict", "2\n");
  m.Write("proc/kallsyms", Kallsyms(true));
  m.Write("proc/kcore", Core(kStext, kEtext - kStext + 0x1000));
  ProbeReport r = m.Run();
  const Check& k = Get(r, "kcore.kallsyms");
  EXPECT_THAT(k, IsCheck(Status::kWarn,
                         "addresses masked (all zero; kptr_restrict 2 hides them from everyone)"));
  EXPECT_THAT(k.fix, HasSubstr("kptr_restrict=1"));
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kWarn, "kernel text range unknown"));
  EXPECT_FALSE(r.kcore_usable);
}

TEST(Probe, ConfidentialityLockdownBlocksKcore) {
  FakeMachine m;
  m.MakeRoot();
  m.Write("sys/kernel/security/lockdown", "none integrity [confidentiality]\n");
  m.Write("proc/kcore", Core(kStext, kEtext - kStext + 0x1000));
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "kcore.lockdown"), IsCheck(Status::kWarn, "confidentiality"));
  EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kWarn, "lockdown=confidentiality refuses it"));
  EXPECT_FALSE(r.kcore_usable);
}

TEST(Probe, EnvironmentTurnsKcoreOff) {
  for (const char* var : {"PTSNAP_NO_KCORE", "MAGIC_TRACE_PERF_NO_KCORE"}) {
    FakeMachine m;
    m.AddSkylakePmu();
    m.MakeRoot();
    m.Write("proc/kcore", Core(kStext, kEtext - kStext + 0x1000));
    ProbeReport r = m.Run(nullptr, {{var, "1"}});
    EXPECT_THAT(Get(r, "kcore.env"), IsCheck(Status::kInfo, std::string(var) + "=1"));
    EXPECT_FALSE(r.kcore_usable) << var;
    EXPECT_THAT(r.modes, Not(Contains("kcore")));
    EXPECT_THAT(Get(r, "kcore.file"), IsCheck(Status::kOk, "readable"));
  }
}

TEST(Probe, ParanoidLevels) {
  FakeMachine m;
  m.AddSkylakePmu();
  ProbeReport two = m.Run();
  EXPECT_THAT(Get(two, "priv.paranoid"), IsCheck(Status::kWarn, "2: user space only"));
  EXPECT_THAT(Get(two, "priv.scopes"), IsCheck(Status::kOk, "user yes, kernel no, system-wide no"));
  EXPECT_EQ(two.default_snapshot_bytes, 128u << 10);
  EXPECT_TRUE(two.pt_available);

  m.Write("proc/sys/kernel/perf_event_paranoid", "-1\n");
  ProbeReport minus1 = m.Run();
  EXPECT_THAT(Get(minus1, "priv.paranoid"), IsCheck(Status::kOk, "-1"));
  EXPECT_THAT(Get(minus1, "priv.scopes"),
              IsCheck(Status::kOk, "user yes, kernel yes, system-wide yes"));
  EXPECT_EQ(minus1.default_snapshot_bytes, 4u << 20);
  EXPECT_THAT(Get(minus1, "mem.mlock"), IsCheck(Status::kOk, "no limit (paranoid -1)"));

  m.Write("proc/sys/kernel/perf_event_paranoid", "3\n");
  ProbeReport three = m.Run();
  const Check& p = Get(three, "priv.paranoid");
  EXPECT_THAT(p, IsCheck(Status::kFail, "3: perf events blocked"));
  EXPECT_THAT(p.fix, HasSubstr("perf_event_paranoid=2"));
  EXPECT_THAT(Get(three, "priv.scopes"), IsCheck(Status::kFail, "user no"));
  EXPECT_FALSE(three.pt_available);
  EXPECT_THAT(three.pt_reason, HasSubstr("perf_event_paranoid"));

  m.MakeRoot();  // capabilities override paranoid 3
  EXPECT_TRUE(m.Run().pt_available);
}

TEST(Probe, Kernel54VersusKernel515) {
  FakeMachine m;
  m.AddSkylakePmu();
  m.Write("proc/sys/kernel/osrelease", "5.4.0-1103-aws\n");
  ProbeReport old = m.Run();
  EXPECT_THAT(Get(old, "kernel.version"), IsCheck(Status::kOk, "5.4.0-1103-aws (5.4.0)"));
  const Check& kv = Get(old, "kcore.kernel_version");
  EXPECT_THAT(kv, IsCheck(Status::kWarn, "old kernel detected! kernel 5.4.0 < 5.5"));
  EXPECT_THAT(kv.fix, HasSubstr(">= 5.5"));
  EXPECT_THAT(Get(old, "kernel.features"),
              IsCheck(Status::kOk, "lacks: kcore (5.5), text_poke (5.9)"));
  // CAP_PERFMON alone means nothing before 5.8.
  m.Write("proc/self/status", Status(1000, uint64_t{1} << sys::kCapPerfmon));
  EXPECT_FALSE(m.Run().scopes.kernel);

  m.Write("proc/sys/kernel/osrelease", "5.15.0-91-generic\n");
  ProbeReport recent = m.Run();
  EXPECT_THAT(Get(recent, "kcore.kernel_version"), IsCheck(Status::kOk, "5.15.0 >= 5.5"));
  EXPECT_TRUE(recent.scopes.kernel);
}

TEST(Probe, AncientKernelHasNoAux) {
  FakeMachine m;
  m.AddSkylakePmu();
  m.Write("proc/sys/kernel/osrelease", "3.10.0-1160.el7.x86_64\n");
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "kernel.features"), IsCheck(Status::kFail, "aux_area (4.1)"));
  EXPECT_FALSE(r.pt_available);
}

TEST(Probe, MemoryBudget) {
  sys::Privileges p;
  p.cap_eff = 0;
  p.perf_event_paranoid = 2;
  p.perf_event_mlock_kb = 516;
  p.memlock_known = true;
  p.memlock_bytes = 64 << 10;
  // 516 KiB + 64 KiB / 4 CPUs - (256 KiB + 4 KiB) = 272 KiB -> 256 KiB.
  EXPECT_EQ(LargestAuxBytes(p, 4), std::optional<uint64_t>(256 << 10));
  EXPECT_EQ(DefaultSnapshotBytes(p, 4), 128u << 10);
  p.perf_event_mlock_kb = 100;
  EXPECT_EQ(DefaultSnapshotBytes(p, 4), 0u);
  p.memlock_bytes = std::nullopt;  // unlimited
  EXPECT_EQ(LargestAuxBytes(p, 4), std::nullopt);
  p.cap_eff = uint64_t{1} << sys::kCapPerfmon;
  EXPECT_EQ(DefaultSnapshotBytes(p, 4), 4u << 20);
}

TEST(Probe, TinyMlockBudgetFailsSnapshotSize) {
  FakeMachine m;
  m.AddSkylakePmu();
  m.Write("proc/sys/kernel/perf_event_mlock_kb", "8\n");
  m.Write("proc/self/limits", "Max locked memory         0      0      bytes\n");
  ProbeReport r = m.Run();
  EXPECT_THAT(Get(r, "mem.snapshot_size"), IsCheck(Status::kFail, "no AUX buffer fits"));
  EXPECT_THAT(Get(r, "mem.mlock"), IsCheck(Status::kWarn, "largest AUX per CPU: 0 bytes"));
  EXPECT_FALSE(r.pt_available);
}

TEST(Probe, PtraceScopes) {
  FakeMachine m;
  EXPECT_THAT(Get(m.Run(), "priv.ptrace_scope"), IsCheck(Status::kWarn, "only on descendants"));
  m.Write("proc/sys/kernel/yama/ptrace_scope", "3\n");
  EXPECT_THAT(Get(m.Run(), "priv.ptrace_scope"), IsCheck(Status::kWarn, "disabled until reboot"));
  m.Remove("proc/sys/kernel/yama");
  EXPECT_THAT(Get(m.Run(), "priv.ptrace_scope"), IsCheck(Status::kOk, "no Yama"));
}

TEST(Probe, LiveChecksSkippedForRootTrees) {
  FakeMachine m;
  ProbeReport r = m.Run();
  for (const char* id : {"live.dummy", "live.breakpoint", "live.uprobe"}) {
    EXPECT_THAT(Get(r, id), IsCheck(Status::kInfo, "skipped (--root")) << id;
  }
}

// Garbage in any file the probe reads: a warning naming the file, no crash,
// and the check that needed it degrades instead of trusting the junk.
class GarbageFile : public ::testing::TestWithParam<std::string> {};

TEST_P(GarbageFile, WarnsNamingTheFile) {
  FakeMachine m;
  m.AddSkylakePmu();
  m.MakeRoot();
  m.Write("proc/kcore", Core(kStext, kEtext - kStext + 0x1000));
  const std::string rel = GetParam();
  constexpr char kJunk[] = "\x7f\x01garbage \xff\xfe not a value\n\n";
  m.Write(rel, std::string(kJunk, sizeof kJunk - 1));
  ProbeReport r = m.Run();
  const std::string shown = "/" + rel;
  std::string all;
  for (const auto& w : r.warnings) all += w + "\n";
  EXPECT_THAT(all, HasSubstr(shown));
  const Check& files = Get(r, "files");
  EXPECT_EQ(files.status, Status::kWarn);
  EXPECT_THAT(files.value, HasSubstr(shown));
  // The JSON still renders (invalid UTF-8 replaced) and parses.
  auto j = nlohmann::json::parse(RenderJson(r), nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  EXPECT_FALSE(RenderTable(r).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Probe, GarbageFile,
    ::testing::Values("proc/sys/kernel/osrelease", "proc/self/status", "proc/self/limits",
                      "proc/sys/kernel/perf_event_paranoid", "proc/sys/kernel/kptr_restrict",
                      "proc/sys/kernel/perf_event_mlock_kb", "proc/sys/kernel/yama/ptrace_scope",
                      "sys/kernel/security/lockdown", "sys/devices/system/cpu/online",
                      "proc/kallsyms", "proc/kcore", kPt + "type", kPt + "format/mtc_period",
                      kPt + "caps/psb_cyc", kPt + "caps/mtc_periods", kPt + "nr_addr_filters",
                      kPt + "max_nonturbo_ratio", kPt + "tsc_art_ratio"));

// A real machine, rebuilt as a fake tree: the Firecracker KVM guest of
// tests/data/probe/firecracker-kvm-6.18 (Intel family 6 model 0xcf, no PT
// pass-through, kernel 6.18.44, no /proc/kcore, root), with its PMU list
// and files, its kallsyms' size and text range, and its CPUID as far as the
// probe reads it. The probe must give the verdict and the messages that the
// real run printed (probe.json), check by check. Two differences are by
// design: the live checks are skipped for fake trees, and kcore.file's fix
// no longer says "decodes use vmlinux if given", which was never true (the
// decoder has no vmlinux support).
TEST(Probe, FirecrackerGuestWithoutPtPassThrough) {
  const std::filesystem::path data =
      std::filesystem::path(PTSNAP_SOURCE_ROOT) / "tests/data/probe/firecracker-kvm-6.18";
  std::ifstream in(data / "probe.json");
  ASSERT_TRUE(in) << data;
  const nlohmann::json real = nlohmann::json::parse(in);

  FakeMachine m;
  m.Write("proc/sys/kernel/osrelease", "6.18.44-fc-v657-gpu\n");
  m.MakeRoot();
  m.Write("proc/self/limits", "Max locked memory         unlimited    unlimited    bytes\n");
  m.Write("sys/devices/system/cpu/online", "0-15\n");
  m.Remove("proc/sys/kernel/yama");
  m.Remove("sys/kernel/security");
  m.Remove("bin/qemu-x86_64");
  // 153938 symbols, kernel text 0xffffffff81000000-0xffffffff823fea68.
  {
    std::string ks = "ffffffff81000000 T _text\nffffffff81000000 T _stext\n";
    char line[64];
    for (int i = 0; i < 153935; ++i) {
      std::snprintf(line, sizeof line, "%016llx t fn_%d\n", 0xffffffff81001000ull + 16ull * i, i);
      ks += line;
    }
    ks += "ffffffff823fea68 T _etext\n";
    m.Write("proc/kallsyms", ks);
  }
  const std::filesystem::path devices = data / "devices";
  std::vector<std::string> pmus;
  for (const auto& e : std::filesystem::recursive_directory_iterator(devices)) {
    if (!e.is_regular_file()) continue;
    std::string rel = std::filesystem::relative(e.path(), devices).string();
    std::ifstream f(e.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    m.Write("sys/bus/event_source/devices/" + rel, text);
    if (rel.ends_with("/type") && rel.find('/') == rel.rfind('/')) {
      pmus.push_back(rel.substr(0, rel.find('/')));
    }
  }
  std::sort(pmus.begin(), pmus.end());
  EXPECT_EQ(pmus, (std::vector<std::string>{"breakpoint", "msr", "power", "software", "tracepoint",
                                            "uprobe"}));

  ::ptsnap::testing::FakeCpuid cpu =
      KvmGuestCpu(0x000c06f2, 0x1f);  // family 6, model 0xcf, stepping 2
  ProbeReport r = m.Run(&cpu);
  nlohmann::json j = nlohmann::json::parse(RenderJson(r));
  for (const char* field : {"schema", "pt_available", "pt_reason", "modes", "scopes",
                            "kcore_usable", "default_snapshot_bytes", "warnings"}) {
    EXPECT_EQ(j[field], real[field]) << field;
  }
  EXPECT_EQ(r.pt_reason, "no intel_pt PMU: this is a VM without PT pass-through");
  ASSERT_EQ(j["checks"].size(), real["checks"].size());
  for (size_t i = 0; i < real["checks"].size(); ++i) {
    const nlohmann::json& want = real["checks"][i];
    const nlohmann::json& got = j["checks"][i];
    const std::string id = want["id"];
    ASSERT_EQ(got["id"], id);
    if (id.starts_with("live.")) {
      EXPECT_EQ(got["status"], "info") << id;
      EXPECT_EQ(got["value"], "skipped (--root: no live syscalls)") << id;
      continue;
    }
    EXPECT_EQ(got["title"], want["title"]) << id;
    EXPECT_EQ(got["status"], want["status"]) << id;
    EXPECT_EQ(got["value"], want["value"]) << id;
    if (id == "kcore.file") {
      EXPECT_EQ(want["fix"],
                "kernel-scope traces cannot snapshot kernel text; decodes use vmlinux if given");
      EXPECT_EQ(got["fix"],
                "use a kernel built with CONFIG_PROC_KCORE=y: without /proc/kcore, kernel-scope "
                "traces get no kernel image and their kernel code is not decoded (no vmlinux "
                "fallback)");
    } else {
      EXPECT_EQ(got["fix"], want["fix"]) << id;
    }
  }
  // The real run's live uprobe used the uprobe PMU's type from this tree.
  EXPECT_EQ(real["checks"][25]["value"].get<std::string>().find("opened a uprobe (type 8)"), 0u);
  EXPECT_THAT(RenderTable(r),
              HasSubstr("Intel PT recording: unavailable (no intel_pt PMU: this is a VM without "
                        "PT pass-through). Collection modes: none."));
}

TEST(Render, JsonNamesEveryCheckWithStableFields) {
  FakeMachine m;
  m.AddSkylakePmu();
  ::ptsnap::testing::FakeCpuid cpu = SkylakeCpu();
  ProbeReport r = m.Run(&cpu);
  nlohmann::json j = nlohmann::json::parse(RenderJson(r));
  EXPECT_EQ(j["schema"], "ptsnap-probe/1");
  EXPECT_EQ(j["pt_available"], true);
  EXPECT_EQ(j["pt_reason"], "");
  EXPECT_EQ(j["default_snapshot_bytes"], 128 << 10);
  EXPECT_EQ(j["kcore_usable"], false);
  EXPECT_EQ(j["scopes"]["user"], true);
  EXPECT_EQ(j["scopes"]["system_wide"], false);
  EXPECT_TRUE(j["modes"].is_array());
  EXPECT_TRUE(j["warnings"].is_array());
  std::vector<std::string> ids;
  for (const auto& c : j["checks"]) {
    ids.push_back(c["id"]);
    for (const char* field : {"title", "status", "value", "fix"}) {
      EXPECT_TRUE(c.contains(field)) << c["id"] << " lacks " << field;
    }
    std::set<std::string> statuses = {"ok", "warn", "fail", "info"};
    EXPECT_TRUE(statuses.count(c["status"].get<std::string>())) << c["id"];
  }
  EXPECT_EQ(ids, kAllIds);
}

TEST(Render, SameIdsWithoutPmuAndCpuid) {
  FakeMachine m;
  nlohmann::json j = nlohmann::json::parse(RenderJson(m.Run()));
  std::vector<std::string> ids;
  for (const auto& c : j["checks"]) ids.push_back(c["id"]);
  EXPECT_EQ(ids, kAllIds);
  EXPECT_EQ(j["pt_available"], false);
  EXPECT_EQ(j["pt_reason"], "no intel_pt PMU on this machine");
}

TEST(Render, TableAlignsAndShowsFixes) {
  FakeMachine m;
  std::string t = RenderTable(m.Run());
  EXPECT_THAT(t, HasSubstr("[fail] intel_pt PMU "));
  EXPECT_THAT(t, HasSubstr("\n       fix: needs a Broadwell+ Intel CPU"));
  EXPECT_THAT(t, HasSubstr("[  ok] Kernel release "));
  EXPECT_THAT(t, HasSubstr("Intel PT recording: unavailable (no intel_pt PMU on this machine). "
                           "Collection modes: emulated."));
  // Values start in one column.
  size_t col = std::string::npos;
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("[", 0) != 0) continue;
    size_t pos = line.find("  ", 7);
    while (pos != std::string::npos && line[pos] == ' ') ++pos;
    if (col == std::string::npos) col = pos;
    EXPECT_EQ(pos, col) << line;
  }
}

TEST(RootEnv, MissingDirectory) {
  EXPECT_THAT(RootEnv("/nonexistent/ptsnap-capture"),
              HasErrorContaining("--root /nonexistent/ptsnap-capture is not a directory; give the "
                                 "folder that holds a captured sys/ and proc/"));
  TempDir dir;
  auto env = RootEnv(dir.path());
  ASSERT_THAT(env, HasValue());
  EXPECT_FALSE(env->live_syscalls);
  EXPECT_EQ(env->cpuid, nullptr);
  EXPECT_EQ(env->root.root(), dir.path());
}

}  // namespace
}  // namespace ptsnap::probe
