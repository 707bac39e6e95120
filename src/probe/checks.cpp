#include "probe/checks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/string_util.h"
#include "probe/explain.h"
#include "sys/perf_event.h"

namespace ptsnap::probe {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr int kCapSysPtrace = 19;

using base::Hex;
using base::Join;

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

// A live check's value: what it opened, or the error with errno explained.
std::string Explain(const Result<void>& opened, std::string ok_value) {
  if (opened) return ok_value;
  const Error& e = opened.error();
  std::string v = e.errnum() ? std::string(std::strerror(e.errnum())) : e.message();
  const char* why = sys::ExplainPerfEventErrno(e.errnum());
  if (why[0] != '\0') v += " (" + std::string(why) + ")";
  return "failed: " + v;
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

bool LockdownBlocksKcore(const sys::Privileges& priv) {
  return priv.lockdown && *priv.lockdown == "confidentiality";
}

// kcore.kallsyms.
void CheckKallsyms(const ProbeFacts& f, Findings* out) {
  const sys::Privileges& priv = f.priv;
  const Result<sys::Kallsyms>& k = f.kallsyms;
  if (!k) {
    out->Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
             "unreadable: " + k.error().ToString(),
             "kernel symbols are needed for kernel-scope traces; run as root");
  } else if (k->symbol_count == 0) {
    if (k->malformed_lines > 0) {
      out->warnings.push_back("/proc/kallsyms: no line parses (first: '" + k->first_malformed +
                              "')");
    }
    out->Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
             k->malformed_lines ? "/proc/kallsyms is not in kallsyms format" : "empty",
             "kernel-scope traces will show raw addresses");
  } else if (k->masked) {
    out->Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)", Status::kWarn,
             "addresses masked (all zero; " + KallsymsMaskedWhy(priv) + ")",
             priv.kptr_restrict && *priv.kptr_restrict >= 2
                 ? "sysctl -w kernel.kptr_restrict=1 and run as root (CAP_SYSLOG); at 2 even root "
                   "sees zeros"
                 : "run as root (CAP_SYSLOG), or sysctl -w kernel.kptr_restrict=0");
  } else {
    std::optional<TextRange> text = KernelTextRange(k);
    if (k->malformed_lines > 0) {
      out->warnings.push_back("/proc/kallsyms: " + std::to_string(k->malformed_lines) +
                              " malformed lines (first: '" + k->first_malformed + "')");
    }
    std::string kr = priv.kptr_restrict ? std::to_string(*priv.kptr_restrict) : "?";
    std::string v = std::to_string(k->symbol_count) + " symbols";
    if (text) v += ", kernel text " + Hex(text->start) + "-" + Hex(text->end);
    v += "; kptr_restrict " + kr;
    out->Add("kcore.kallsyms", "Kernel symbols (/proc/kallsyms)",
             text ? Status::kOk : Status::kWarn, v,
             text ? "" : "no _stext/_etext symbols: kernel text range unknown");
  }
}

// kcore.file: the open and the read of kernel text, in the order
// GatherFacts tried them.
void CheckKcoreFile(const ProbeFacts& f, Findings* out) {
  const KcoreFacts& kcore = f.kcore;
  if (!kcore.exists) {
    out->Add("kcore.file", "/proc/kcore", Status::kWarn,
             "absent (kernel built without CONFIG_PROC_KCORE, or /proc not mounted)",
             std::string(kNoKernelImage));
    return;
  }
  std::vector<std::string> refused = KcoreRefusals(kcore.mode, f.priv);
  if (!refused.empty()) {
    bool lockdown = refused.back().starts_with("lockdown");
    bool privilege = refused.size() > (lockdown ? 1u : 0u);
    std::string fix = privilege ? "run as root (CAP_SYS_RAWIO)" : "";
    if (lockdown) {
      fix += std::string(privilege ? " and boot" : "boot") +
             " without lockdown=confidentiality for kernel snapshots";
    }
    out->Add("kcore.file", "/proc/kcore", Status::kWarn,
             "present, but this process may not open it: " + Join(refused, "; "), fix);
    return;
  }
  if (!kcore.header) {
    const Error& e = kcore.header.error();
    bool perm = e.errnum() == EPERM || e.errnum() == EACCES;
    if (e.errnum() == 0) out->warnings.push_back("/proc/kcore: " + e.ToString());
    out->Add("kcore.file", "/proc/kcore", Status::kWarn, "cannot open: " + e.ToString(),
             perm ? "needs CAP_SYS_RAWIO (run as root) and no confidentiality lockdown"
                  : "the file is not a valid ELF core");
    return;
  }
  const sys::KcoreHeader& header = *kcore.header;
  std::optional<TextRange> text = KernelTextRange(f.kallsyms);
  if (!text) {
    out->Add("kcore.file", "/proc/kcore", Status::kWarn,
             "valid ELF core, " + std::to_string(header.loads.size()) +
                 " PT_LOADs; kernel text range unknown (see kallsyms)",
             "make /proc/kallsyms readable with real addresses");
    return;
  }
  const sys::ElfLoad* load = sys::FindLoadCovering(header, text->start, text->end - text->start);
  if (load == nullptr) {
    out->Add("kcore.file", "/proc/kcore", Status::kWarn,
             "valid ELF core, but no PT_LOAD covers kernel text " + Hex(text->start) + "-" +
                 Hex(text->end),
             "kernel text cannot be snapshotted on this kernel");
  } else if (!kcore.text_read) {
    out->Add("kcore.file", "/proc/kcore", Status::kWarn,
             "kernel text covered but unreadable: " + kcore.text_read.error().ToString(),
             "needs CAP_SYS_RAWIO (run as root)");
  } else {
    out->Add("kcore.file", "/proc/kcore", Status::kOk,
             "readable; " + std::to_string(header.loads.size()) +
                 " PT_LOADs; kernel text in PT_LOAD at " + Hex(load->vaddr));
  }
}

}  // namespace

void Findings::Add(std::string id, std::string title, Status status, std::string value,
                   std::string fix) {
  checks.push_back({std::move(id), std::move(title), status, std::move(value), std::move(fix)});
}

KernelGates GatesOf(const ProbeFacts& f) {
  KernelGates g;
  g.version_known = f.kernel.has_value();
  for (const sys::KernelFeature& feature : sys::KernelFeatures()) {
    bool yes = g.version_known && f.kernel->AtLeast(feature.major, feature.minor);
    if (feature.id == "aux_area") g.has_aux = !g.version_known || yes;
    if (feature.id == "kcore") g.has_kcore = yes;
  }
  g.has_cap_perfmon = !g.version_known || f.kernel->AtLeast(5, 8);
  return g;
}

Scopes ScopesOf(const ProbeFacts& f) { return AllowedScopes(f.priv, GatesOf(f).has_cap_perfmon); }

int OnlineCpus(const ProbeFacts& f) {
  return f.online_cpus ? static_cast<int>(f.online_cpus->size()) : 1;
}

std::optional<TextRange> KernelTextRange(const Result<sys::Kallsyms>& kallsyms) {
  if (!kallsyms || kallsyms->symbol_count == 0 || kallsyms->masked) return std::nullopt;
  if (!kallsyms->stext || !kallsyms->etext || *kallsyms->etext <= *kallsyms->stext) {
    return std::nullopt;
  }
  return TextRange{*kallsyms->stext, *kallsyms->etext};
}

// The VFS permission check (the file belongs to root), then
// fs/proc/kcore.c open_kcore(): CAP_SYS_RAWIO and no lockdown.
std::vector<std::string> KcoreRefusals(std::optional<unsigned> mode, const sys::Privileges& priv) {
  std::vector<std::string> why;
  if (priv.cap_eff && priv.euid) {
    if (mode) {
      unsigned bits = *mode & 07777;
      bool owner = *priv.euid == 0;  // /proc/kcore is owned by root
      bool dac = priv.Has(sys::kCapDacOverride) || priv.Has(sys::kCapDacReadSearch) ||
                 (owner ? (bits & S_IRUSR) != 0 : (bits & S_IROTH) != 0);
      if (!dac) {
        char m[8];
        std::snprintf(m, sizeof m, "%04o", bits);
        why.push_back(owner ? std::string("mode ") + m + " denies reading even to its owner root"
                            : std::string("mode ") + m + " lets only root read it (euid " +
                                  std::to_string(*priv.euid) + ")");
      }
    }
    if (!priv.Has(sys::kCapSysRawio)) why.push_back("no CAP_SYS_RAWIO");
  }
  if (LockdownBlocksKcore(priv)) why.push_back("lockdown=confidentiality refuses it");
  return why;
}

std::string KcoreEnvSwitch(const ProbeFacts& f) {
  if (f.ptsnap_no_kcore && !f.ptsnap_no_kcore->empty()) {
    return "PTSNAP_NO_KCORE=" + *f.ptsnap_no_kcore;
  }
  if (f.magic_trace_perf_no_kcore && !f.magic_trace_perf_no_kcore->empty()) {
    return "MAGIC_TRACE_PERF_NO_KCORE=" + *f.magic_trace_perf_no_kcore;
  }
  return "";
}

bool KcoreTextReadable(const ProbeFacts& f) {
  if (!f.kcore.exists || !KcoreRefusals(f.kcore.mode, f.priv).empty() || !f.kcore.header) {
    return false;
  }
  std::optional<TextRange> text = KernelTextRange(f.kallsyms);
  return text &&
         sys::FindLoadCovering(*f.kcore.header, text->start, text->end - text->start) != nullptr &&
         f.kcore.text_read.has_value();
}

bool KcoreUsable(const ProbeFacts& f) {
  return KcoreEnvSwitch(f).empty() && GatesOf(f).has_kcore && KcoreTextReadable(f) &&
         !LockdownBlocksKcore(f.priv);
}

std::string PtUnavailableReason(const ProbeFacts& f) {
  const sys::PmuInfo& pmu = f.pmu;
  const sys::CpuInfo& cpu = f.cpu;
  KernelGates gates = GatesOf(f);
  if (!pmu.present) {
    if (cpu.available && cpu.vendor != "GenuineIntel") {
      return "no intel_pt PMU: the CPU is " + cpu.vendor + ", not Intel";
    }
    if (cpu.available && cpu.hypervisor) {
      return "no intel_pt PMU: this is a VM without PT pass-through";
    }
    return "no intel_pt PMU on this machine";
  }
  if (!pmu.type) return "the intel_pt PMU's type file is unreadable";
  if (gates.version_known && !gates.has_aux) return "the kernel is older than 4.1 (no AUX area)";
  if (!ScopesOf(f).user) return "perf_event_paranoid blocks perf events for this user";
  if (f.live && !f.live->dummy) return "perf_event_open is refused";
  if (DefaultSnapshotBytes(f.priv, OnlineCpus(f)) == 0) {
    return "the mlock budget is too small for an AUX buffer";
  }
  return "";
}

std::vector<std::string> CollectionModes(const ProbeFacts& f) {
  std::vector<std::string> modes;
  if (PtUnavailableReason(f).empty()) {
    Scopes scopes = ScopesOf(f);
    modes.emplace_back("intel_pt-user");
    if (scopes.kernel) modes.emplace_back("intel_pt-kernel");
    if (scopes.system_wide) modes.emplace_back("intel_pt-system-wide");
    if (scopes.kernel && KcoreUsable(f)) modes.emplace_back("kcore");
  }
  if (f.qemu) modes.emplace_back("emulated");
  return modes;
}

// 1. Kernel.
Findings CheckKernel(const ProbeFacts& f) {
  Findings out;
  const Result<sys::KernelVersion>& kv = f.kernel;
  if (kv) {
    out.Add("kernel.version", "Kernel release", Status::kOk,
            kv->release + " (" + kv->Short() + ")");
  } else {
    if (f.osrelease_exists) {
      out.warnings.push_back("/proc/sys/kernel/osrelease: " + kv.error().ToString());
    }
    out.Add("kernel.version", "Kernel release", Status::kWarn, "unknown: " + kv.error().ToString(),
            "check that /proc/sys/kernel/osrelease holds a release such as 6.1.0-27-amd64");
  }
  KernelGates gates = GatesOf(f);
  std::vector<std::string> have, lack;
  for (const sys::KernelFeature& feature : sys::KernelFeatures()) {
    bool yes = gates.version_known && kv->AtLeast(feature.major, feature.minor);
    std::string item = std::string(feature.id) + " (" + std::to_string(feature.major) + "." +
                       std::to_string(feature.minor) + ")";
    (yes ? have : lack).push_back(item);
  }
  if (!gates.version_known) {
    out.Add("kernel.features", "Kernel perf features", Status::kInfo,
            "unknown (kernel version unknown)");
  } else if (!gates.has_aux) {
    out.Add("kernel.features", "Kernel perf features", Status::kFail,
            "missing: " + Join(lack, ", "),
            "Intel PT needs the perf AUX area (Linux 4.1+); upgrade the kernel");
  } else {
    out.Add("kernel.features", "Kernel perf features", Status::kOk,
            "has: " + Join(have, ", ") + (lack.empty() ? "" : "; lacks: " + Join(lack, ", ")));
  }
  return out;
}

// 2. CPU.
Findings CheckCpu(const ProbeFacts& f) {
  Findings out;
  const sys::CpuInfo& cpu = f.cpu;
  if (!cpu.available) {
    std::string why = !f.cpuid_read ? "not read (--root: CPUID would describe this machine)"
                                    : "CPUID unavailable on this architecture";
    out.Add("cpu.identity", "CPU", Status::kInfo, why);
    out.Add("cpu.hypervisor", "Hypervisor", Status::kInfo, why);
    out.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kInfo, why);
    out.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kInfo, why);
    return out;
  }
  bool pmu_ok = f.pmu.present && f.pmu.type.has_value();
  char ident[160];
  std::snprintf(ident, sizeof ident, "%s family %u model 0x%x stepping %u", cpu.vendor.c_str(),
                cpu.family, cpu.model, cpu.stepping);
  bool intel = cpu.vendor == "GenuineIntel";
  out.Add("cpu.identity", "CPU", intel ? Status::kOk : Status::kWarn, ident,
          intel ? ""
                : "Intel PT exists only on Intel CPUs (Broadwell or later); use `ptsnap run "
                  "--emulate`");
  if (cpu.hypervisor) {
    std::string who = cpu.hypervisor_vendor.empty() ? "a hypervisor" : cpu.hypervisor_vendor;
    if (pmu_ok) {
      out.Add("cpu.hypervisor", "Hypervisor", Status::kOk,
              "guest of " + who + " with PT passed through");
    } else if (!intel) {
      out.Add("cpu.hypervisor", "Hypervisor", Status::kInfo, "guest of " + who);
    } else {
      out.Add("cpu.hypervisor", "Hypervisor", Status::kWarn,
              "guest of " + who + "; a VM without PT pass-through has no intel_pt PMU",
              "enable PT pass-through (KVM: kvm_intel pt_mode=1 on the host, guest kernel 5.0+) "
              "or run on bare metal");
    }
  } else {
    out.Add("cpu.hypervisor", "Hypervisor", Status::kOk, "none (bare metal)");
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
    out.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kOk, v);
  } else if (!intel) {
    out.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kInfo,
            "CPUID.(7,0):EBX[25]=0 (not an Intel CPU)");
  } else {
    out.Add("cpu.pt_cpuid", "CPUID Intel PT (leaf 0x14)", Status::kFail,
            "CPUID.(7,0):EBX[25]=0: the CPU" +
                std::string(cpu.hypervisor ? " the VM presents" : "") + " has no Intel PT",
            cpu.hypervisor ? "pass PT through to the guest, or run on bare metal; meanwhile use "
                             "`ptsnap run --emulate`"
                           : "needs an Intel CPU of Broadwell (2014) or later; meanwhile use "
                             "`ptsnap run --emulate`");
  }
  if (cpu.leaf15 && cpu.leaf15->eax != 0 && cpu.leaf15->ebx != 0) {
    out.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kOk,
            "eax=" + std::to_string(cpu.leaf15->eax) + " ebx=" + std::to_string(cpu.leaf15->ebx) +
                " (TSC = crystal * " + std::to_string(cpu.leaf15->ebx) + "/" +
                std::to_string(cpu.leaf15->eax) + ")");
  } else {
    out.Add("cpu.tsc_ratio", "CPUID TSC/crystal (leaf 0x15)", Status::kInfo,
            "not enumerated; MTC timing falls back to TSC packets");
  }
  return out;
}

// 3. intel_pt PMU.
Findings CheckPmu(const ProbeFacts& f) {
  Findings out;
  const sys::PmuInfo& pmu = f.pmu;
  const sys::CpuInfo& cpu = f.cpu;
  const std::string pt_dir = "/sys/bus/event_source/devices/intel_pt";
  out.warnings = pmu.warnings;
  if (!pmu.present) {
    const std::string fix = NoPmuFix(cpu);
    out.Add("pmu.intel_pt", "intel_pt PMU", Status::kFail, "absent (no " + pt_dir + ")", fix);
    for (auto [id, title] :
         {std::pair{"pmu.format", "PT format terms"}, std::pair{"pmu.caps", "PT capabilities"},
          std::pair{"pmu.addr_filters", "PT address filters"},
          std::pair{"pmu.timing", "PT timing files"},
          std::pair{"pmu.timer_resolution", "PT timer resolutions"}}) {
      out.Add(id, title, Status::kInfo, "skipped: no intel_pt PMU");
    }
    return out;
  }
  if (!pmu.type) {
    out.Add("pmu.intel_pt", "intel_pt PMU", Status::kFail,
            "present but " + pt_dir + "/type is missing or unreadable",
            "check the sysfs files listed under `files`");
  } else {
    out.Add("pmu.intel_pt", "intel_pt PMU", Status::kOk,
            "present, type " + std::to_string(*pmu.type));
  }
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
    if (!pmu.HasTerm(need)) missing.emplace_back(need);
  }
  out.Add("pmu.format", "PT format terms", missing.empty() ? Status::kOk : Status::kWarn,
          terms.empty() ? "none" : Join(terms, " "),
          missing.empty() ? ""
                          : "format terms " + Join(missing, ", ") +
                                " missing: the kernel's PT driver is too old or the files "
                                "are damaged; ptsnap falls back to the documented bits");
  std::vector<std::string> caps;
  for (const auto& [name, v] : pmu.caps) caps.push_back(name + "=" + Hex(v));
  out.Add("pmu.caps", "PT capabilities", pmu.caps.empty() ? Status::kWarn : Status::kOk,
          caps.empty() ? "none" : Join(caps, " "),
          pmu.caps.empty() ? "no " + pt_dir + "/caps files: the driver is too old (< 4.1?)" : "");
  if (pmu.nr_addr_filters && *pmu.nr_addr_filters > 0) {
    out.Add("pmu.addr_filters", "PT address filters", Status::kOk,
            std::to_string(*pmu.nr_addr_filters) + " ranges");
  } else {
    out.Add("pmu.addr_filters", "PT address filters", Status::kWarn,
            pmu.nr_addr_filters ? "0 ranges" : "unknown (no nr_addr_filters)",
            "address-filtered recording is unavailable; ptsnap traces whole processes");
  }
  std::string timing;
  timing += "max_nonturbo_ratio=" +
            (pmu.max_nonturbo_ratio ? std::to_string(*pmu.max_nonturbo_ratio) : "?");
  timing +=
      " tsc_art_ratio=" + (pmu.tsc_art_ratio ? std::to_string(pmu.tsc_art_ratio->numerator) + ":" +
                                                   std::to_string(pmu.tsc_art_ratio->denominator)
                                             : std::string("?"));
  bool timing_ok = pmu.max_nonturbo_ratio.has_value() && pmu.tsc_art_ratio.has_value();
  out.Add("pmu.timing", "PT timing files", timing_ok ? Status::kOk : Status::kWarn, timing,
          timing_ok ? "" : "cycle-accurate timing (CBR/MTC calibration) will be coarser");
  bool psb_cyc = pmu.Cap("psb_cyc") != 0;
  bool mtc = pmu.Cap("mtc") != 0;
  std::string res;
  res += psb_cyc ? "cyc yes (cyc_thresh " + BitList(pmu.Cap("cycle_thresholds")) + ")" : "cyc no";
  res += mtc ? "; mtc yes (mtc_period " + BitList(pmu.Cap("mtc_periods")) + ")" : "; mtc no";
  res += psb_cyc ? "; psb_period " + BitList(pmu.Cap("psb_periods")) : "; psb_period fixed";
  if (psb_cyc) {
    out.Add("pmu.timer_resolution", "PT timer resolutions", Status::kOk,
            res + "; presets low, normal, high");
  } else {
    out.Add("pmu.timer_resolution", "PT timer resolutions", Status::kWarn,
            res + "; presets low, normal",
            "no caps/psb_cyc (Broadwell-class): cycle-accurate (`--timer-resolution high`) "
            "timing is unavailable");
  }
  return out;
}

// 4. Privileges and scopes.
Findings CheckPrivileges(const ProbeFacts& f) {
  Findings out;
  const sys::Privileges& priv = f.priv;
  out.warnings = priv.warnings;
  {
    std::string v = "euid " + (priv.euid ? std::to_string(*priv.euid) : std::string("?"));
    if (priv.cap_eff) {
      std::vector<std::string> have, lack;
      for (int cap : {sys::kCapPerfmon, sys::kCapSysAdmin, sys::kCapSysRawio, sys::kCapSyslog,
                      sys::kCapIpcLock}) {
        (priv.Has(cap) ? have : lack).emplace_back(sys::CapabilityName(cap));
      }
      v += "; CapEff " + Hex(*priv.cap_eff) + ": " + (have.empty() ? "none" : Join(have, " "));
      if (!lack.empty()) v += "; lacks " + Join(lack, " ");
    } else {
      v += "; capabilities unknown";
    }
    out.Add("priv.user", "User and capabilities",
            priv.euid && priv.cap_eff ? Status::kOk : Status::kWarn, v,
            priv.euid && priv.cap_eff ? "" : "cannot read /proc/self/status (see `files`)");
  }
  bool has_cap_perfmon = GatesOf(f).has_cap_perfmon;
  Scopes scopes = AllowedScopes(priv, has_cap_perfmon);
  bool capable = priv.Has(sys::kCapSysAdmin) || (has_cap_perfmon && priv.Has(sys::kCapPerfmon));
  if (!priv.perf_event_paranoid) {
    out.Add("priv.paranoid", "perf_event_paranoid", Status::kFail,
            "unknown (no /proc/sys/kernel/perf_event_paranoid)",
            "the kernel lacks perf events (CONFIG_PERF_EVENTS) or /proc is not mounted");
  } else {
    int64_t p = *priv.perf_event_paranoid;
    std::string v = std::to_string(p) + (capable ? " (overridden: CAP_PERFMON/CAP_SYS_ADMIN)" : "");
    if (!scopes.user) {
      out.Add("priv.paranoid", "perf_event_paranoid", Status::kFail, v + ": perf events blocked",
              "sysctl -w kernel.perf_event_paranoid=2 (1 for kernel tracing), or run as root / "
              "with CAP_PERFMON");
    } else if (!scopes.kernel) {
      out.Add("priv.paranoid", "perf_event_paranoid", Status::kWarn, v + ": user space only",
              "for kernel tracing: sysctl -w kernel.perf_event_paranoid=1, or run as root / with "
              "CAP_PERFMON");
    } else {
      out.Add("priv.paranoid", "perf_event_paranoid", Status::kOk, v);
    }
  }
  if (!priv.ptrace_scope) {
    out.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kOk,
            "no Yama: `attach` works on your own processes");
  } else {
    int64_t s = *priv.ptrace_scope;
    std::string v = std::to_string(s);
    if (s <= 0 || priv.Has(kCapSysPtrace)) {
      out.Add(
          "priv.ptrace_scope", "Yama ptrace_scope", Status::kOk,
          v + (s > 0 ? " (CAP_SYS_PTRACE overrides)" : ": `attach` works on your own processes"));
    } else if (s == 1) {
      out.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` works only on descendants",
              "use `ptsnap run`, run as root, or sysctl -w kernel.yama.ptrace_scope=0");
    } else if (s == 2) {
      out.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` needs CAP_SYS_PTRACE", "use `ptsnap run`, or run as root");
    } else {
      out.Add("priv.ptrace_scope", "Yama ptrace_scope", Status::kWarn,
              v + ": `attach` is disabled until reboot", "use `ptsnap run`");
    }
  }
  std::string v = std::string("user ") + (scopes.user ? "yes" : "no") + ", kernel " +
                  (scopes.kernel ? "yes" : "no") + ", system-wide " +
                  (scopes.system_wide ? "yes" : "no");
  out.Add("priv.scopes", "Allowed tracing scopes", scopes.user ? Status::kOk : Status::kFail, v,
          scopes.user ? "" : "see perf_event_paranoid above");
  return out;
}

// 5. The /proc/kcore gate.
Findings CheckKcore(const ProbeFacts& f) {
  Findings out;
  const sys::Privileges& priv = f.priv;
  std::string env_off = KcoreEnvSwitch(f);
  if (!env_off.empty()) {
    out.Add("kcore.env", "kcore switch (environment)", Status::kInfo,
            "kernel snapshots turned off by " + env_off,
            "unset the variable to snapshot kernel text with kernel-scope traces");
  } else {
    out.Add("kcore.env", "kcore switch (environment)", Status::kOk,
            "on (PTSNAP_NO_KCORE and MAGIC_TRACE_PERF_NO_KCORE unset)");
  }
  KernelGates gates = GatesOf(f);
  if (!gates.version_known) {
    out.Add("kcore.kernel_version", "kcore kernel version", Status::kWarn,
            "unknown kernel version; kcore needs 5.5+");
  } else if (!gates.has_kcore) {
    out.Add("kcore.kernel_version", "kcore kernel version", Status::kWarn,
            "old kernel detected! kernel " + f.kernel->Short() +
                " < 5.5: kcore snapshots of kernel text are unavailable, so kernel-scope "
                "decodes may lose sync wherever the kernel patched itself",
            "install a kernel >= 5.5 to avoid this");
  } else {
    out.Add("kcore.kernel_version", "kcore kernel version", Status::kOk,
            f.kernel->Short() + " >= 5.5");
  }
  CheckKallsyms(f, &out);
  CheckKcoreFile(f, &out);
  if (!priv.lockdown) {
    out.Add("kcore.lockdown", "Kernel lockdown", Status::kOk, "no lockdown LSM");
  } else if (LockdownBlocksKcore(priv)) {
    out.Add("kcore.lockdown", "Kernel lockdown", Status::kWarn,
            "confidentiality: /proc/kcore is refused",
            "boot without lockdown=confidentiality (e.g. Secure Boot lockdown off) for kernel "
            "snapshots");
  } else {
    out.Add("kcore.lockdown", "Kernel lockdown", Status::kOk, *priv.lockdown);
  }
  return out;
}

// 6. Memory.
Findings CheckMemory(const ProbeFacts& f) {
  Findings out;
  const sys::Privileges& priv = f.priv;
  if (!f.online_cpus && f.online_cpus_exists) {
    out.warnings.push_back(f.online_cpus.error().ToString());
  }
  int cpus = OnlineCpus(f);
  std::string v =
      "perf_event_mlock_kb " + (priv.perf_event_mlock_kb ? std::to_string(*priv.perf_event_mlock_kb)
                                                         : std::string("? (516 assumed)"));
  v += ", RLIMIT_MEMLOCK " + (!priv.memlock_known  ? std::string("?")
                              : priv.memlock_bytes ? Bytes(*priv.memlock_bytes)
                                                   : std::string("unlimited"));
  v += ", " + std::to_string(cpus) + " online CPU" + (cpus == 1 ? "" : "s");
  auto largest = LargestAuxBytes(priv, cpus);
  v += "; largest AUX per CPU: " + (largest ? Bytes(*largest) : std::string("no limit")) +
       (largest ? "" : (priv.Has(sys::kCapIpcLock) ? " (CAP_IPC_LOCK)" : " (paranoid -1)"));
  bool small = largest && *largest < 128 * kKiB;
  out.Add("mem.mlock", "perf mlock budget", small ? Status::kWarn : Status::kOk, v,
          small ? "raise it: sysctl -w kernel.perf_event_mlock_kb=2048, or ulimit -l" : "");
  uint64_t snapshot_bytes = DefaultSnapshotBytes(priv, cpus);
  if (snapshot_bytes == 0) {
    out.Add("mem.snapshot_size", "Default snapshot size", Status::kFail,
            "no AUX buffer fits the mlock budget",
            "sysctl -w kernel.perf_event_mlock_kb=2048, raise ulimit -l, or run as root");
  } else {
    out.Add("mem.snapshot_size", "Default snapshot size", Status::kOk,
            Bytes(snapshot_bytes) + " per traced thread or CPU");
  }
  return out;
}

// 7. Live checks.
Findings CheckLive(const ProbeFacts& f) {
  Findings out;
  if (!f.live) {
    for (auto [id, title] : {std::pair{"live.dummy", "Live: software dummy event"},
                             std::pair{"live.breakpoint", "Live: hardware execute breakpoint"},
                             std::pair{"live.uprobe", "Live: uprobe PMU event"}}) {
      out.Add(id, title, Status::kInfo, "skipped (--root: no live syscalls)");
    }
    return out;
  }
  const LiveFacts& live = *f.live;
  bool dummy_ok = live.dummy.has_value();
  out.Add("live.dummy", "Live: software dummy event", dummy_ok ? Status::kOk : Status::kFail,
          Explain(live.dummy, "opened a software dummy event on itself"),
          dummy_ok ? ""
                   : "perf_event_open itself is refused: check perf_event_paranoid, seccomp "
                     "(containers) and CONFIG_PERF_EVENTS");
  bool bp_ok = live.breakpoint.has_value();
  out.Add("live.breakpoint", "Live: hardware execute breakpoint",
          bp_ok ? Status::kOk : Status::kWarn,
          Explain(live.breakpoint,
                  "opened an execute breakpoint at " + Hex(live.breakpoint_addr) + " in itself"),
          bp_ok ? ""
                : "trigger breakpoints (`--trigger`) are unavailable; snapshots are "
                  "taken at exit or Ctrl-C");
  const UprobeFacts& u = live.uprobe;
  const std::string type_path = "/sys/bus/event_source/devices/uprobe/type";
  std::string value;
  if (!u.type_readable) {
    value = "no uprobe PMU (" + type_path + " unreadable)";
  } else if (!u.type) {
    out.warnings.push_back(type_path + ": not a decimal number");
    value = "no uprobe PMU (" + type_path + " is not a number)";
  } else if (u.maps_error) {
    value = "cannot read /proc/self/maps: " + u.maps_error->ToString();
  } else if (u.path.empty()) {
    value = "cannot find this program's text in /proc/self/maps";
  } else {
    value = Explain(u.open, "opened a uprobe (type " + std::to_string(*u.type) + ") on " + u.path +
                                "+" + Hex(u.offset));
  }
  bool uprobe_ok = u.type && !u.maps_error && !u.path.empty() && u.open.has_value();
  out.Add("live.uprobe", "Live: uprobe PMU event", uprobe_ok ? Status::kOk : Status::kWarn, value,
          uprobe_ok ? ""
                    : "uprobe events need CAP_SYS_ADMIN and CONFIG_UPROBE_EVENTS; triggers fall "
                      "back to hardware breakpoints");
  return out;
}

// 8. Emulation.
Findings CheckEmulation(const ProbeFacts& f) {
  Findings out;
  if (f.qemu) {
    out.Add("emulate.qemu", "Emulated PT (qemu-user)", Status::kOk, "found " + *f.qemu);
  } else {
    out.Add("emulate.qemu", "Emulated PT (qemu-user)", Status::kWarn, "qemu-x86_64 not in PATH",
            "apt-get install qemu-user for `ptsnap run --emulate`");
  }
  return out;
}

// 9. Files that exist but could not be read or parsed, and the verdict.
Findings CheckVerdict(const ProbeFacts& f, const std::vector<std::string>& warnings) {
  Findings out;
  if (warnings.empty()) {
    out.Add("files", "Kernel files well-formed", Status::kOk, "every file read parsed");
  } else {
    out.Add("files", "Kernel files well-formed", Status::kWarn, Join(warnings, "; "),
            "these files hold unexpected content; the checks above treat them as absent");
  }
  std::string pt_reason = PtUnavailableReason(f);
  if (pt_reason.empty()) {
    Scopes scopes = ScopesOf(f);
    std::vector<std::string> names = {"user"};
    if (scopes.kernel) names.emplace_back("kernel");
    if (scopes.system_wide) names.emplace_back("system-wide");
    out.Add("verdict.intel_pt", "Intel PT recording", Status::kOk,
            "available (" + Join(names, ", ") + ")");
  } else {
    out.Add("verdict.intel_pt", "Intel PT recording", Status::kFail, "unavailable: " + pt_reason,
            f.qemu ? "record with `ptsnap run --emulate -- PROG` (qemu-user) instead"
                   : "see the failed checks above; `ptsnap run --emulate` needs qemu-user");
  }
  std::vector<std::string> modes = CollectionModes(f);
  out.Add("verdict.modes", "Collection modes", modes.empty() ? Status::kFail : Status::kInfo,
          modes.empty() ? "none" : Join(modes, " "),
          modes.empty() ? "install qemu-user for emulated recording" : "");
  return out;
}

ProbeReport AssembleReport(const ProbeFacts& f) {
  ProbeReport r;
  auto add = [&r](Findings s) {
    for (Check& c : s.checks) r.checks.push_back(std::move(c));
    for (std::string& w : s.warnings) r.warnings.push_back(std::move(w));
  };
  add(CheckKernel(f));
  add(CheckCpu(f));
  add(CheckPmu(f));
  add(CheckPrivileges(f));
  add(CheckKcore(f));
  add(CheckMemory(f));
  add(CheckLive(f));
  add(CheckEmulation(f));
  add(CheckVerdict(f, r.warnings));
  r.scopes = ScopesOf(f);
  r.kcore_usable = KcoreUsable(f);
  r.default_snapshot_bytes = DefaultSnapshotBytes(f.priv, OnlineCpus(f));
  r.pt_reason = PtUnavailableReason(f);
  r.pt_available = r.pt_reason.empty();
  r.modes = CollectionModes(f);
  return r;
}

}  // namespace ptsnap::probe
