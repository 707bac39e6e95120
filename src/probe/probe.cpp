#include "probe/probe.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "base/string_util.h"
#include "sys/cpus.h"
#include "sys/kallsyms.h"
#include "sys/kcore.h"
#include "sys/kernel_version.h"
#include "sys/perf_event.h"
#include "sys/pmu.h"
#include "sys/proc_maps.h"

// The live breakpoint and uprobe checks aim at this function: it is part of
// every binary that links the probe, so its address is in our own text and
// its file offset is in /proc/self/exe. extern "C" and noinline keep one
// real, unmangled copy.
extern "C" __attribute__((noinline, used)) int ptsnap_probe_target(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ptsnap::probe {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kPage = 4096;
constexpr int kCapSysPtrace = 19;

std::string Bytes(uint64_t b) { return base::ExactSize(b); }

// "0,3,6,9" or "0-13" from a bitmap of valid values.
std::string BitList(uint64_t bits) {
  std::string out;
  for (int i = 0; i < 64;) {
    if (!((bits >> i) & 1)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 64 && ((bits >> (j + 1)) & 1)) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(i);
    if (j > i + 1) {
      out += "-" + std::to_string(j);
    } else if (j == i + 1) {
      out += "," + std::to_string(j);
    }
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

using base::Join;

std::string Hex(uint64_t v) { return base::Hex(v); }

class Checks {
 public:
  explicit Checks(std::vector<Check>* out) : out_(out) {}
  void Add(std::string id, std::string title, Status status, std::string value,
           std::string fix = "") {
    out_->push_back({std::move(id), std::move(title), status, std::move(value), std::move(fix)});
  }

 private:
  std::vector<Check>* out_;
};

// The live checks' shared result: opened, or the error with errno explained.
struct LiveResult {
  bool ok = false;
  std::string value;
};

LiveResult Explain(const Result<base::UniqueFd>& fd, std::string ok_value) {
  if (fd) return {true, std::move(ok_value)};
  const Error& e = fd.error();
  std::string v = e.errnum() ? std::string(std::strerror(e.errnum())) : e.message();
  const char* why = sys::ExplainPerfEventErrno(e.errnum());
  if (why[0] != '\0') v += " (" + std::string(why) + ")";
  return {false, "failed: " + v};
}

LiveResult OpenDummy() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return Explain(sys::PerfEventOpen(attr, 0, -1, -1), "opened a software dummy event on itself");
}

LiveResult OpenBreakpoint() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.bp_type = HW_BREAKPOINT_X;
  attr.bp_addr = reinterpret_cast<uintptr_t>(&ptsnap_probe_target);
  attr.bp_len = sizeof(long);
  attr.sample_period = 1;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return Explain(sys::PerfEventOpen(attr, 0, -1, -1),
                 "opened an execute breakpoint at " + Hex(attr.bp_addr) + " in itself");
}

LiveResult OpenUprobe(const base::RootPath& root, std::vector<std::string>* warnings) {
  const std::string type_path = "/sys/bus/event_source/devices/uprobe/type";
  auto text = base::ReadFile(root.Resolve(type_path), 4096);
  if (!text) return {false, "no uprobe PMU (" + type_path + " unreadable)"};
  auto type = base::ParseUint(*text);
  if (!type || *type > UINT32_MAX) {
    warnings->push_back(type_path + ": not a decimal number");
    return {false, "no uprobe PMU (" + type_path + " is not a number)"};
  }
  // Find our own file and the offset of ptsnap_probe_target in it.
  auto maps = sys::ReadProcMaps(root, 0);
  if (!maps) return {false, "cannot read /proc/self/maps: " + maps.error().ToString()};
  uint64_t addr = reinterpret_cast<uintptr_t>(&ptsnap_probe_target);
  const sys::MapEntry* hit = nullptr;
  for (const auto& m : *maps) {
    if (addr >= m.start && addr < m.end && !m.path.empty() && m.path.front() == '/') hit = &m;
  }
  if (hit == nullptr) return {false, "cannot find this program's text in /proc/self/maps"};
  uint64_t offset = addr - hit->start + hit->offset;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(*type);
  attr.disabled = 1;
  attr.uprobe_path = reinterpret_cast<uintptr_t>(hit->path.c_str());
  attr.probe_offset = offset;
  return Explain(
      sys::PerfEventOpen(attr, 0, -1, -1),
      "opened a uprobe (type " + std::to_string(*type) + ") on " + hit->path + "+" + Hex(offset));
}

// The fix for a missing /proc/kcore, and what kernel-scope traces get
// without it: the decoder has no other source of kernel code (no vmlinux
// support).
constexpr std::string_view kNoKernelImage =
    "use a kernel built with CONFIG_PROC_KCORE=y: without /proc/kcore, kernel-scope traces get "
    "no kernel image and their kernel code is not decoded (no vmlinux fallback)";

// Why /proc/kallsyms shows zeros to this process (kernel/kallsyms.c
// kallsyms_show_value(): kptr_restrict 0 shows them when perf_event_paranoid
// <= 1 or with CAP_SYSLOG, 1 only with CAP_SYSLOG, 2 never).
std::string KallsymsMaskedWhy(const sys::Privileges& priv) {
  if (!priv.kptr_restrict) return "kptr_restrict ?";
  int64_t kr = *priv.kptr_restrict;
  std::string why = "kptr_restrict " + std::to_string(kr);
  if (kr >= 2) return why + " hides them from everyone";
  if (!priv.cap_eff || priv.Has(sys::kCapSyslog)) return why;
  if (kr == 1) return why + " and no CAP_SYSLOG";
  std::string paranoid =
      priv.perf_event_paranoid ? std::to_string(*priv.perf_event_paranoid) : std::string("?");
  return why + ", perf_event_paranoid " + paranoid + " > 1 and no CAP_SYSLOG";
}

// Why the kernel would refuse this process an open of /proc/kcore, from the
// file's mode bits and the process's capabilities (the VFS permission check:
// the file belongs to root; then fs/proc/kcore.c open_kcore():
// CAP_SYS_RAWIO and no lockdown). Empty when nothing refuses it, or when
// the capabilities are unknown (then the open itself tells).
std::vector<std::string> KcoreRefusals(const base::RootPath& root, const sys::Privileges& priv) {
  std::vector<std::string> why;
  if (priv.cap_eff && priv.euid) {
    struct stat st {};
    if (::stat(root.Resolve("/proc/kcore").c_str(), &st) == 0) {
      unsigned mode = st.st_mode & 07777;
      bool owner = *priv.euid == 0;  // /proc/kcore is owned by root
      bool dac = priv.Has(sys::kCapDacOverride) || priv.Has(sys::kCapDacReadSearch) ||
                 (owner ? (mode & S_IRUSR) != 0 : (mode & S_IROTH) != 0);
      if (!dac) {
        char m[8];
        std::snprintf(m, sizeof m, "%04o", mode);
        why.push_back(owner ? std::string("mode ") + m + " denies reading even to its owner root"
                            : std::string("mode ") + m + " lets only root read it (euid " +
                                  std::to_string(*priv.euid) + ")");
      }
    }
    if (!priv.Has(sys::kCapSysRawio)) why.push_back("no CAP_SYS_RAWIO");
  }
  if (priv.lockdown && *priv.lockdown == "confidentiality") {
    why.push_back("lockdown=confidentiality refuses it");
  }
  return why;
}

// The first directory in $PATH holding an executable `name`.
std::optional<std::string> FindInPath(const ProbeEnv& env, std::string_view name) {
  if (!env.getenv) return std::nullopt;
  auto path = env.getenv("PATH");
  if (!path) return std::nullopt;
  for (std::string_view dir : base::Split(*path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + std::string(name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace

std::string_view StatusName(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kWarn: return "warn";
    case Status::kFail: return "fail";
    case Status::kInfo: return "info";
  }
  return "info";
}

const Check* ProbeReport::Find(std::string_view id) const {
  for (const Check& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::optional<std::string> GetenvFromProcess(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

ProbeEnv LiveEnv() {
  static const sys::HostCpuid host;
  ProbeEnv env;
  env.cpuid = &host;
  env.getenv = GetenvFromProcess;
  env.live_syscalls = true;
  return env;
}

Result<ProbeEnv> RootEnv(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error("--root " + dir.string() +
                 " is not a directory; give the folder that holds a captured sys/ and proc/");
  }
  ProbeEnv env = LiveEnv();
  env.root = base::RootPath(dir);
  env.cpuid = nullptr;
  env.live_syscalls = false;
  return env;
}

std::optional<uint64_t> LargestAuxBytes(const sys::Privileges& priv, int online_cpus) {
  // kernel/events/core.c perf_mmap(): with CAP_IPC_LOCK, or paranoid -1,
  // pages beyond the budget are not refused.
  if (priv.Has(sys::kCapIpcLock) || (priv.perf_event_paranoid && *priv.perf_event_paranoid < 0)) {
    return std::nullopt;
  }
  if (priv.memlock_known && !priv.memlock_bytes) return std::nullopt;  // RLIMIT_MEMLOCK unlimited
  int cpus = std::max(online_cpus, 1);
  // perf_event_mlock_kb per online CPU for the user, then RLIMIT_MEMLOCK
  // (shared, not per CPU). Default 516 KiB with 4 KiB pages.
  uint64_t per_cpu =
      static_cast<uint64_t>(std::max<int64_t>(priv.perf_event_mlock_kb.value_or(516), 0)) * kKiB;
  uint64_t memlock = priv.memlock_bytes.value_or(64 * kKiB);
  uint64_t budget = per_cpu + memlock / static_cast<uint64_t>(cpus);
  uint64_t data = 256 * kKiB + kPage;  // perf's unprivileged data ring + header page
  if (budget <= data) return 0;
  uint64_t aux = budget - data;
  uint64_t pow2 = kPage;
  if (aux < kPage) return 0;
  while (pow2 * 2 <= aux) pow2 *= 2;
  return pow2;
}

uint64_t DefaultSnapshotBytes(const sys::Privileges& priv, int online_cpus) {
  bool privileged =
      priv.PerfmonCapable() || (priv.perf_event_paranoid && *priv.perf_event_paranoid < 0);
  uint64_t want = privileged ? 4 * kMiB : 128 * kKiB;
  std::optional<uint64_t> largest = LargestAuxBytes(priv, online_cpus);
  if (!largest) return want;
  if (*largest < 2 * kPage) return 0;
  return std::min(want, *largest);
}

Scopes AllowedScopes(const sys::Privileges& priv, bool kernel_has_cap_perfmon) {
  Scopes s;
  if (!priv.perf_event_paranoid) return s;  // no perf events at all
  bool capable =
      priv.Has(sys::kCapSysAdmin) || (kernel_has_cap_perfmon && priv.Has(sys::kCapPerfmon));
  int64_t p = *priv.perf_event_paranoid;
  s.user = capable || p <= 2;
  s.kernel = capable || p <= 1;
  s.system_wide = capable || p <= 0;
  return s;
}

ProbeReport RunProbe(const ProbeEnv& env) {
  ProbeReport r;
  Checks c(&r.checks);
  const base::RootPath& root = env.root;
  std::error_code ec;

  // 1. Kernel.
  auto kv = sys::ReadKernelVersion(root);
  bool version_known = kv.has_value();
  if (kv) {
    c.Add("kernel.version", "Kernel release", Status::kOk, kv->release + " (" + kv->Short() + ")");
  } else {
    if (std::filesystem::exists(root.Resolve("/proc/sys/kernel/osrelease"), ec)) {
      r.warnings.push_back("/proc/sys/kernel/osrelease: " + kv.error().ToString());
    }
    c.Add("kernel.version", "Kernel release", Status::kWarn, "unknown: " + kv.error().ToString(),
          "check that /proc/sys/kernel/osrelease holds a release such as 6.1.0-27-amd64");
  }
  bool has_aux = true, has_kcore_version = true, has_cap_perfmon = true;
  {
    std::vector<std::string> have, lack;
    for (const sys::KernelFeature& f : sys::KernelFeatures()) {
      bool yes = version_known && kv->AtLeast(f.major, f.minor);
      std::string item =
          std::string(f.id) + " (" + std::to_string(f.major) + "." + std::to_string(f.minor) + ")";
      (yes ? have : lack).push_back(item);
      if (f.id == "aux_area") has_aux = !version_known || yes;
      if (f.id == "kcore") has_kcore_version = version_known && yes;
    }
    has_cap_perfmon = !version_known || kv->AtLeast(5, 8);
    if (!version_known) {
      c.Add("kernel.features", "Kernel perf features", Status::kInfo,
            "unknown (kernel version unknown)");
    } else if (!has_aux) {
      c.Add("kernel.features", "Kernel perf features", Status::kFail,
            "missing: " + Join(lack, ", "),
            "Intel PT needs the perf AUX area (Linux 4.1+); upgrade the kernel");
    } else {
      c.Add("kernel.features", "Kernel perf features", Status::kOk,
            "has: " + Join(have, ", ") + (lack.empty() ? "" : "; lacks: " + Join(lack, ", ")));
    }
  }

  // 2. CPU.
  sys::CpuInfo cpu;
  if (env.cpuid != nullptr) cpu = sys::DecodeCpu(*env.cpuid);
  sys::PmuInfo pmu = sys::ReadPmu(root, "intel_pt");
  bool pmu_ok = pmu.present && pmu.type.has_value();
  if (!cpu.available) {
    std::string why = env.cpuid == nullptr ? "not read (--root: CPUID would describe this machine)"
                                           : "CPUID unavailable on this architecture";
    c.Add("cpu.identity", "CPU", Status::kInfo, why);
    c.Add("cpu.hypervisor", "Hypervisor", Status::kInfo, why);
    c.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kInfo, why);
    c.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kInfo, why);
  } else {
    char ident[160];
    std::snprintf(ident, sizeof ident, "%s family %u model 0x%x stepping %u", cpu.vendor.c_str(),
                  cpu.family, cpu.model, cpu.stepping);
    bool intel = cpu.vendor == "GenuineIntel";
    c.Add("cpu.identity", "CPU", intel ? Status::kOk : Status::kWarn, ident,
          intel ? ""
                : "Intel PT exists only on Intel CPUs (Broadwell or later); use `ptsnap run "
                  "--emulate`");
    if (cpu.hypervisor) {
      std::string who = cpu.hypervisor_vendor.empty() ? "a hypervisor" : cpu.hypervisor_vendor;
      if (pmu_ok) {
        c.Add("cpu.hypervisor", "Hypervisor", Status::kOk,
              "guest of " + who + " with PT passed through");
      } else if (!intel) {
        c.Add("cpu.hypervisor", "Hypervisor", Status::kInfo, "guest of " + who);
      } else {
        c.Add("cpu.hypervisor", "Hypervisor", Status::kWarn,
              "guest of " + who + "; a VM without PT pass-through has no intel_pt PMU",
              "enable PT pass-through (KVM: kvm_intel pt_mode=1 on the host, guest kernel 5.0+) "
              "or run on bare metal");
      }
    } else {
      c.Add("cpu.hypervisor", "Hypervisor", Status::kOk, "none (bare metal)");
    }
    if (cpu.pt_supported) {
      std::string v = "CPUID.(7,0):EBX[25]=1";
      if (cpu.leaf14_0) {
        v += "; 0x14.0 eax=" + Hex(cpu.leaf14_0->eax) + " ebx=" + Hex(cpu.leaf14_0->ebx) +
             " ecx=" + Hex(cpu.leaf14_0->ecx);
      }
      if (cpu.leaf14_1) {
        v += "; 0x14.1 eax=" + Hex(cpu.leaf14_1->eax) + " ebx=" + Hex(cpu.leaf14_1->ebx);
      }
      c.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kOk, v);
    } else if (!intel) {
      c.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kInfo,
            "CPUID.(7,0):EBX[25]=0 (not an Intel CPU)");
    } else {
      c.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kFail,
            "CPUID.(7,0):EBX[25]=0: the CPU" +
                std::string(cpu.hypervisor ? " the VM presents" : "") + " has no Intel PT",
            cpu.hypervisor ? "pass PT through to the guest, or run on bare metal; meanwhile use "
                             "`ptsnap run --emulate`"
                           : "needs an Intel CPU of Broadwell (2014) or later; meanwhile use "
                             "`ptsnap run --emulate`");
    }
    if (cpu.leaf15 && cpu.leaf15->eax != 0 && cpu.leaf15->ebx != 0) {
      c.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kOk,
            "eax=" + std::to_string(cpu.leaf15->eax) + " ebx=" + std::to_string(cpu.leaf15->ebx) +
                " (TSC = crystal * " + std::to_string(cpu.leaf15->ebx) + "/" +
                std::to_string(cpu.leaf15->eax) + ")");
    } else {
      c.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kInfo,
            "not enumerated; MTC timing falls back to TSC packets");
    }
  }

  // 3. intel_pt PMU.
  const std::string pt_dir = "/sys/bus/event_source/devices/intel_pt";
  for (const auto& w : pmu.warnings) r.warnings.push_back(w);
  if (!pmu.present) {
    std::string fix;
    if (cpu.available && cpu.vendor != "GenuineIntel") {
      fix = "Intel PT needs an Intel CPU (this one is " + cpu.vendor +
            "); use `ptsnap run --emulate`";
    } else if (cpu.available && cpu.hypervisor) {
      fix =
          "this is a VM without PT pass-through: enable it in the hypervisor or run on bare "
          "metal; meanwhile use `ptsnap run --emulate`";
    } else {
      fix =
          "needs a Broadwell+ Intel CPU and a kernel with CONFIG_PERF_EVENTS_INTEL_PT (4.1+); "
          "meanwhile use `ptsnap run --emulate`";
    }
    c.Add("pmu.intel_pt", "intel_pt PMU", Status::kFail, "absent (no " + pt_dir + ")", fix);
  } else if (!pmu.type) {
    c.Add("pmu.intel_pt", "intel_pt PMU", Status::kFail,
          "present but " + pt_dir + "/type is missing or unreadable",
          "check the sysfs files listed under `files`");
  } else {
    c.Add("pmu.intel_pt", "intel_pt PMU", Status::kOk,
          "present, type " + std::to_string(*pmu.type));
  }
  if (!pmu.present) {
    for (auto [id, title] :
         {std::pair{"pmu.format", "PT format terms"}, std::pair{"pmu.caps", "PT capabilities"},
          std::pair{"pmu.addr_filters", "PT address filters"},
          std::pair{"pmu.timing", "PT timing files"},
          std::pair{"pmu.timer_resolution", "PT timer resolutions"}}) {
      c.Add(id, title, Status::kInfo, "skipped: no intel_pt PMU");
    }
  } else {
    std::vector<std::string> terms;
    for (const auto& [name, t] : pmu.format) {
      std::string bits;
      for (const auto& br : t.ranges) {
        if (!bits.empty()) bits += ",";
        bits += br.lo == br.hi ? std::to_string(br.lo)
                               : std::to_string(br.lo) + "-" + std::to_string(br.hi);
      }
      const char* word = t.word == sys::ConfigWord::kConfig    ? "config"
                         : t.word == sys::ConfigWord::kConfig1 ? "config1"
                                                               : "config2";
      terms.push_back(name + "=" + word + ":" + bits);
    }
    std::vector<std::string> missing;
    for (const char* need : {"pt", "tsc", "branch"}) {
      if (!pmu.HasTerm(need)) missing.push_back(need);
    }
    c.Add("pmu.format", "PT format terms", missing.empty() ? Status::kOk : Status::kWarn,
          terms.empty() ? "none" : Join(terms, " "),
          missing.empty() ? ""
                          : "format terms " + Join(missing, ", ") +
                                " missing: the kernel's PT driver is too old or the files "
                                "are damaged; ptsnap falls back to the documented bits");
    std::vector<std::string> caps;
    for (const auto& [name, v] : pmu.caps) caps.push_back(name + "=" + Hex(v));
    c.Add("pmu.caps", "PT capabilities", pmu.caps.empty() ? Status::kWarn : Status::kOk,
          caps.empty() ? "none" : Join(caps, " "),
          pmu.caps.empty() ? "no " + pt_dir + "/caps files: the driver is too old (< 4.1?)" : "");
    if (pmu.nr_addr_filters && *pmu.nr_addr_filters > 0) {
      c.Add("pmu.addr_filters", "PT address filters", Status::kOk,
            std::to_string(*pmu.nr_addr_filters) + " ranges");
    } else {
      c.Add("pmu.addr_filters", "PT address filters", Status::kWarn,
            pmu.nr_addr_filters ? "0 ranges" : "unknown (no nr_addr_filters)",
            "address-filtered recording is unavailable; ptsnap traces whole processes");
    }
    std::string timing;
    timing += "max_nonturbo_ratio=" +
              (pmu.max_nonturbo_ratio ? std::to_string(*pmu.max_nonturbo_ratio) : "?");
    timing += " tsc_art_ratio=" + (pmu.tsc_art_ratio
                                       ? std::to_string(pmu.tsc_art_ratio->numerator) + ":" +
                                             std::to_string(pmu.tsc_art_ratio->denominator)
                                       : std::string("?"));
    bool timing_ok = pmu.max_nonturbo_ratio.has_value() && pmu.tsc_art_ratio.has_value();
    c.Add("pmu.timing", "PT timing files", timing_ok ? Status::kOk : Status::kWarn, timing,
          timing_ok ? "" : "cycle-accurate timing (CBR/MTC calibration) will be coarser");
    bool psb_cyc = pmu.Cap("psb_cyc") != 0;
    bool mtc = pmu.Cap("mtc") != 0;
    std::string res;
    res += psb_cyc ? "cyc yes (cyc_thresh " + BitList(pmu.Cap("cycle_thresholds")) + ")" : "cyc no";
    res += mtc ? "; mtc yes (mtc_period " + BitList(pmu.Cap("mtc_periods")) + ")" : "; mtc no";
    res += psb_cyc ? "; psb_period " + BitList(pmu.Cap("psb_periods")) : "; psb_period fixed";
    if (psb_cyc) {
      c.Add("pmu.timer_resolution", "PT timer resolutions", Status::kOk,
            res + "; presets low, normal, high");
    } else {
      c.Add("pmu.timer_resolution", "PT timer resolutions", Status::kWarn,
            res + "; presets low, normal",
            "no caps/psb_cyc (Broadwell-class): cycle-accurate (`--timer-resolution high`) "
            "timing is unavailable");
    }
  }

  // 4. Privileges and scopes.
  sys::Privileges priv = sys::ReadPrivileges(root);
  for (const auto& w : priv.warnings) r.warnings.push_back(w);
  {
    std::string v = "euid " + (priv.euid ? std::to_string(*priv.euid) : std::string("?"));
    if (priv.cap_eff) {
      std::vector<std::string> have, lack;
      for (int cap : {sys::kCapPerfmon, sys::kCapSysAdmin, sys::kCapSysRawio, sys::kCapSyslog,
                      sys::kCapIpcLock}) {
        (priv.Has(cap) ? have : lack).push_back(sys::CapabilityName(cap));
      }
      v += "; CapEff " + Hex(*priv.cap_eff) + ": " + (have.empty() ? "none" : Join(have, " "));
      if (!lack.empty()) v += "; lacks " + Join(lack, " ");
    } else {
      v += "; capabilities unknown";
    }
    c.Add("priv.user", "User and capabilities",
          priv.euid && priv.cap_eff ? Status::kOk : Status::kWarn, v,
          priv.euid && priv.cap_eff ? "" : "cannot read /proc/self/status (see `files`)");
  }
  r.scopes = AllowedScopes(priv, has_cap_perfmon);
  bool capable = priv.Has(sys::kCapSysAdmin) || (has_cap_perfmon && priv.Has(sys::kCapPerfmon));
  if (!priv.perf_event_paranoid) {
    c.Add("priv.paranoid", "perf_event_paranoid", Status::kFail,
          "unknown (no /proc/sys/kernel/perf_event_paranoid)",
          "the kernel lacks perf events (CONFIG_PERF_EVENTS) or /proc is not mounted");
  } else {
    int64_t p = *priv.perf_event_paranoid;
    std::string v = std::to_string(p) + (capable ? " (overridden: CAP_PERFMON/CAP_SYS_ADMIN)" : "");
    if (!r.scopes.user) {
      c.Add("priv.paranoid", "perf_event_paranoid", Status::kFail, v + ": perf events blocked",
            "sysctl -w kernel.perf_event_paranoid=2 (1 for kernel tracing), or run as root / "
            "with CAP_PERFMON");
    } else if (!r.scopes.kernel) {
      c.Add("priv.paranoid", "perf_event_paranoid", Status::kWarn, v + ": user space only",
            "for kernel tracing: sysctl -w kernel.perf_event_paranoid=1, or run as root / with "
            "CAP_PERFMON");
    } else {
      c.Add("priv.paranoid", "perf_event_paranoid", Status::kOk, v);
    }
  }
  {
    bool ptrace_cap = priv.Has(kCapSysPtrace);
    if (!priv.ptrace_scope) {
      c.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kOk,
            "no Yama: `attach` works on your own processes");
    } else {
      int64_t s = *priv.ptrace_scope;
      std::string v = std::to_string(s);
      if (s <= 0 || ptrace_cap) {
        c.Add(
            "priv.ptrace_scope", "Yama ptrace_scope", Status::kOk,
            v + (s > 0 ? " (CAP_SYS_PTRACE overrides)" : ": `attach` works on your own processes"));
      } else if (s == 1) {
        c.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` works only on descendants",
              "use `ptsnap run`, run as root, or sysctl -w kernel.yama.ptrace_scope=0");
      } else if (s == 2) {
        c.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` needs CAP_SYS_PTRACE", "use `ptsnap run`, or run as root");
      } else {
        c.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` is disabled until reboot", "use `ptsnap run`");
      }
    }
  }
  {
    std::string v = std::string("user ") + (r.scopes.user ? "yes" : "no") + ", kernel " +
                    (r.scopes.kernel ? "yes" : "no") + ", system-wide " +
                    (r.scopes.system_wide ? "yes" : "no");
    c.Add("priv.scopes", "Allowed tracing scopes", r.scopes.user ? Status::kOk : Status::kFail, v,
          r.scopes.user ? "" : "see perf_event_paranoid above");
  }

  // 5. The /proc/kcore gate.
  std::string env_off;
  if (env.getenv) {
    for (const char* var : {"PTSNAP_NO_KCORE", "MAGIC_TRACE_PERF_NO_KCORE"}) {
      auto v = env.getenv(var);
      if (v && !v->empty() && env_off.empty()) env_off = std::string(var) + "=" + *v;
    }
  }
  if (!env_off.empty()) {
    c.Add("kcore.env", "kcore switch (environment)", Status::kInfo,
          "kernel snapshots turned off by " + env_off,
          "unset the variable to snapshot kernel text with kernel-scope traces");
  } else {
    c.Add("kcore.env", "kcore switch (environment)", Status::kOk,
          "on (PTSNAP_NO_KCORE and MAGIC_TRACE_PERF_NO_KCORE unset)");
  }
  if (!version_known) {
    c.Add("kcore.kernel_version", "kcore kernel version", Status::kWarn,
          "unknown kernel version; kcore needs 5.5+");
  } else if (!has_kcore_version) {
    c.Add("kcore.kernel_version", "kcore kernel version", Status::kWarn,
          "old kernel detected! kernel " + kv->Short() +
              " < 5.5: kcore snapshots of kernel text are unavailable, so kernel-scope "
              "decodes may lose sync wherever the kernel patched itself",
          "install a kernel >= 5.5 to avoid this");
  } else {
    c.Add("kcore.kernel_version", "kcore kernel version", Status::kOk, kv->Short() + " >= 5.5");
  }
  // kallsyms first: the kcore check needs _stext.._etext.
  sys::Kallsyms ks;
  bool ks_ok = false;
  {
    auto k = sys::ReadKallsyms(root, /*keep_symbols=*/false);
    std::string kr = priv.kptr_restrict ? std::to_string(*priv.kptr_restrict) : "?";
    if (!k) {
      c.Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
            "unreadable: " + k.error().ToString(),
            "kernel symbols are needed for kernel-scope traces; run as root");
    } else if (k->symbol_count == 0) {
      if (k->malformed_lines > 0) {
        r.warnings.push_back("/proc/kallsyms: no line parses (first: '" + k->first_malformed +
                             "')");
      }
      c.Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
            k->malformed_lines ? "/proc/kallsyms is not in kallsyms format" : "empty",
            "kernel-scope traces will show raw addresses");
    } else if (k->masked) {
      c.Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
            "addresses masked (all zero; " + KallsymsMaskedWhy(priv) + ")",
            priv.kptr_restrict && *priv.kptr_restrict >= 2
                ? "sysctl -w kernel.kptr_restrict=1 and run as root (CAP_SYSLOG); at 2 even root "
                  "sees zeros"
                : "run as root (CAP_SYSLOG), or sysctl -w kernel.kptr_restrict=0");
    } else {
      ks = std::move(*k);
      ks_ok = ks.stext && ks.etext && *ks.etext > *ks.stext;
      if (ks.malformed_lines > 0) {
        r.warnings.push_back("/proc/kallsyms: " + std::to_string(ks.malformed_lines) +
                             " malformed lines (first: '" + ks.first_malformed + "')");
      }
      std::string v = std::to_string(ks.symbol_count) + " symbols";
      if (ks_ok) v += ", kernel text " + Hex(*ks.stext) + "-" + Hex(*ks.etext);
      v += "; kptr_restrict " + kr;
      c.Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)",
            ks_ok ? Status::kOk : Status::kWarn, v,
            ks_ok ? "" : "no _stext/_etext symbols: kernel text range unknown");
    }
  }
  bool kcore_file_ok = false;
  {
    const std::string path = "/proc/kcore";
    bool exists = std::filesystem::exists(root.Resolve(path), ec);
    std::vector<std::string> refused =
        exists ? KcoreRefusals(root, priv) : std::vector<std::string>{};
    if (!exists) {
      c.Add("kcore.file", "/proc/kcore", Status::kWarn,
            "absent (kernel built without CONFIG_PROC_KCORE, or /proc not mounted)",
            std::string(kNoKernelImage));
    } else if (!refused.empty()) {
      bool lockdown = refused.back().starts_with("lockdown");
      bool privilege = refused.size() > (lockdown ? 1u : 0u);
      std::string fix = privilege ? "run as root (CAP_SYS_RAWIO)" : "";
      if (lockdown) {
        fix += std::string(privilege ? " and boot" : "boot") +
               " without lockdown=confidentiality for kernel snapshots";
      }
      c.Add("kcore.file", "/proc/kcore", Status::kWarn,
            "present, but this process may not open it: " + Join(refused, "; "), fix);
    } else {
      auto k = sys::KcoreFile::Open(root);
      if (!k) {
        bool perm = k.error().errnum() == EPERM || k.error().errnum() == EACCES;
        if (k.error().errnum() == 0) r.warnings.push_back(path + ": " + k.error().ToString());
        c.Add("kcore.file", "/proc/kcore", Status::kWarn, "cannot open: " + k.error().ToString(),
              perm ? "needs CAP_SYS_RAWIO (run as root) and no confidentiality lockdown"
                   : "the file is not a valid ELF core");
      } else if (!ks_ok) {
        c.Add("kcore.file", "/proc/kcore", Status::kWarn,
              "valid ELF core, " + std::to_string(k->header().loads.size()) +
                  " PT_LOADs; kernel text range unknown (see kallsyms)",
              "make /proc/kallsyms readable with real addresses");
      } else {
        const sys::ElfLoad* load =
            sys::FindLoadCovering(k->header(), *ks.stext, *ks.etext - *ks.stext);
        if (load == nullptr) {
          c.Add("kcore.file", "/proc/kcore", Status::kWarn,
                "valid ELF core, but no PT_LOAD covers kernel text " + Hex(*ks.stext) + "-" +
                    Hex(*ks.etext),
                "kernel text cannot be snapshotted on this kernel");
        } else {
          std::byte probe_bytes[16];
          auto rd = k->ReadAt(*ks.stext, probe_bytes);
          if (!rd) {
            c.Add("kcore.file", "/proc/kcore", Status::kWarn,
                  "kernel text covered but unreadable: " + rd.error().ToString(),
                  "needs CAP_SYS_RAWIO (run as root)");
          } else {
            kcore_file_ok = true;
            c.Add("kcore.file", "/proc/kcore", Status::kOk,
                  "readable; " + std::to_string(k->header().loads.size()) +
                      " PT_LOADs; kernel text in PT_LOAD at " + Hex(load->vaddr));
          }
        }
      }
    }
  }
  bool lockdown_blocks = priv.lockdown && *priv.lockdown == "confidentiality";
  if (!priv.lockdown) {
    c.Add("kcore.lockdown", "Kernel lockdown", Status::kOk, "no lockdown LSM");
  } else if (lockdown_blocks) {
    c.Add("kcore.lockdown", "Kernel lockdown", Status::kWarn,
          "confidentiality: /proc/kcore is refused",
          "boot without lockdown=confidentiality (e.g. Secure Boot lockdown off) for kernel "
          "snapshots");
  } else {
    c.Add("kcore.lockdown", "Kernel lockdown", Status::kOk, *priv.lockdown);
  }
  r.kcore_usable = env_off.empty() && has_kcore_version && kcore_file_ok && !lockdown_blocks;

  // 6. Memory.
  int cpus = 1;
  {
    auto online = sys::ReadOnlineCpus(root);
    if (online) {
      cpus = static_cast<int>(online->size());
    } else if (std::filesystem::exists(root.Resolve("/sys/devices/system/cpu/online"), ec)) {
      r.warnings.push_back(online.error().ToString());
    }
  }
  {
    std::string v = "perf_event_mlock_kb " + (priv.perf_event_mlock_kb
                                                  ? std::to_string(*priv.perf_event_mlock_kb)
                                                  : std::string("? (516 assumed)"));
    v += ", RLIMIT_MEMLOCK " + (!priv.memlock_known  ? std::string("?")
                                : priv.memlock_bytes ? Bytes(*priv.memlock_bytes)
                                                     : std::string("unlimited"));
    v += ", " + std::to_string(cpus) + " online CPU" + (cpus == 1 ? "" : "s");
    auto largest = LargestAuxBytes(priv, cpus);
    v += "; largest AUX per CPU: " + (largest ? Bytes(*largest) : std::string("no limit")) +
         (largest ? "" : (priv.Has(sys::kCapIpcLock) ? " (CAP_IPC_LOCK)" : " (paranoid -1)"));
    bool small = largest && *largest < 128 * kKiB;
    c.Add("mem.mlock", "perf mlock budget", small ? Status::kWarn : Status::kOk, v,
          small ? "raise it: sysctl -w kernel.perf_event_mlock_kb=2048, or ulimit -l" : "");
  }
  r.default_snapshot_bytes = DefaultSnapshotBytes(priv, cpus);
  if (r.default_snapshot_bytes == 0) {
    c.Add("mem.snapshot_size", "Default snapshot size", Status::kFail,
          "no AUX buffer fits the mlock budget",
          "sysctl -w kernel.perf_event_mlock_kb=2048, raise ulimit -l, or run as root");
  } else {
    c.Add("mem.snapshot_size", "Default snapshot size", Status::kOk,
          Bytes(r.default_snapshot_bytes) + " per traced thread or CPU");
  }

  // 7. Live checks.
  bool dummy_ok = true;
  if (!env.live_syscalls) {
    for (auto [id, title] : {std::pair{"live.dummy", "Live: software dummy event"},
                             std::pair{"live.breakpoint", "Live: hardware execute breakpoint"},
                             std::pair{"live.uprobe", "Live: uprobe PMU event"}}) {
      c.Add(id, title, Status::kInfo, "skipped (--root: no live syscalls)");
    }
  } else {
    LiveResult d = OpenDummy();
    dummy_ok = d.ok;
    c.Add("live.dummy", "Live: software dummy event", d.ok ? Status::kOk : Status::kFail, d.value,
          d.ok ? ""
               : "perf_event_open itself is refused: check perf_event_paranoid, seccomp "
                 "(containers) and CONFIG_PERF_EVENTS");
    LiveResult b = OpenBreakpoint();
    c.Add("live.breakpoint", "Live: hardware execute breakpoint",
          b.ok ? Status::kOk : Status::kWarn, b.value,
          b.ok ? ""
               : "trigger breakpoints (`--trigger`) are unavailable; snapshots are "
                 "taken at exit or Ctrl-C");
    LiveResult u = OpenUprobe(root, &r.warnings);
    c.Add("live.uprobe", "Live: uprobe PMU event", u.ok ? Status::kOk : Status::kWarn, u.value,
          u.ok ? ""
               : "uprobe events need CAP_SYS_ADMIN and CONFIG_UPROBE_EVENTS; triggers fall "
                 "back to hardware breakpoints");
  }

  // 8. Emulation and verdict.
  auto qemu = FindInPath(env, "qemu-x86_64");
  if (qemu) {
    c.Add("emulate.qemu", "Emulated PT (qemu-user)", Status::kOk, "found " + *qemu);
  } else {
    c.Add("emulate.qemu", "Emulated PT (qemu-user)", Status::kWarn, "qemu-x86_64 not in PATH",
          "apt-get install qemu-user for `ptsnap run --emulate`");
  }

  if (!pmu.present) {
    if (cpu.available && cpu.vendor != "GenuineIntel") {
      r.pt_reason = "no intel_pt PMU: the CPU is " + cpu.vendor + ", not Intel";
    } else if (cpu.available && cpu.hypervisor) {
      r.pt_reason = "no intel_pt PMU: this is a VM without PT pass-through";
    } else {
      r.pt_reason = "no intel_pt PMU on this machine";
    }
  } else if (!pmu.type) {
    r.pt_reason = "the intel_pt PMU's type file is unreadable";
  } else if (version_known && !has_aux) {
    r.pt_reason = "the kernel is older than 4.1 (no AUX area)";
  } else if (!r.scopes.user) {
    r.pt_reason = "perf_event_paranoid blocks perf events for this user";
  } else if (!dummy_ok) {
    r.pt_reason = "perf_event_open is refused";
  } else if (r.default_snapshot_bytes == 0) {
    r.pt_reason = "the mlock budget is too small for an AUX buffer";
  }
  r.pt_available = r.pt_reason.empty();
  if (r.pt_available) {
    r.modes.push_back("intel_pt-user");
    if (r.scopes.kernel) r.modes.push_back("intel_pt-kernel");
    if (r.scopes.system_wide) r.modes.push_back("intel_pt-system-wide");
    if (r.scopes.kernel && r.kcore_usable) r.modes.push_back("kcore");
  }
  if (qemu) r.modes.push_back("emulated");
  // Files that exist but could not be read or parsed.
  if (r.warnings.empty()) {
    c.Add("files", "Kernel files well-formed", Status::kOk, "every file read parsed");
  } else {
    c.Add("files", "Kernel files well-formed", Status::kWarn, Join(r.warnings, "; "),
          "these files hold unexpected content; the checks above treat them as absent");
  }
  if (r.pt_available) {
    std::vector<std::string> scopes = {"user"};
    if (r.scopes.kernel) scopes.push_back("kernel");
    if (r.scopes.system_wide) scopes.push_back("system-wide");
    c.Add("verdict.intel_pt", "Intel PT recording", Status::kOk,
          "available (" + Join(scopes, ", ") + ")");
  } else {
    c.Add("verdict.intel_pt", "Intel PT recording", Status::kFail, "unavailable: " + r.pt_reason,
          qemu ? "record with `ptsnap run --emulate -- PROG` (qemu-user) instead"
               : "see the failed checks above; `ptsnap run --emulate` needs qemu-user");
  }
  c.Add("verdict.modes", "Collection modes", r.modes.empty() ? Status::kFail : Status::kInfo,
        r.modes.empty() ? "none" : Join(r.modes, " "),
        r.modes.empty() ? "install qemu-user for emulated recording" : "");

  return r;
}

}  // namespace ptsnap::probe
