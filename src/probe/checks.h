// The probe's judgement: pure functions from ProbeFacts (facts.h) to checks.
//
// One Check*() per section of the report, in report order; each returns the
// section's checks (ids and messages in docs/probe.md) and the files it met
// that existed but did not parse. AssembleReport() runs them all and fills
// the ProbeReport's verdict fields from the conclusion functions below, so
// RunProbe() is GatherFacts() then AssembleReport(). Nothing here does I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probe/facts.h"
#include "probe/probe.h"

namespace ptsnap::probe {

// What one section found.
struct Findings {
  std::vector<Check> checks;  // in report order
  // "<path>: why" for each file that existed but could not be read or parsed.
  std::vector<std::string> warnings;

  void Add(std::string id, std::string title, Status status, std::string value,
           std::string fix = "");
};

// kernel.version, kernel.features.
Findings CheckKernel(const ProbeFacts& f);
// cpu.identity, cpu.hypervisor, cpu.pt_cpuid, cpu.tsc_ratio.
Findings CheckCpu(const ProbeFacts& f);
// pmu.intel_pt, pmu.format, pmu.caps, pmu.addr_filters, pmu.timing,
// pmu.timer_resolution (the last five skipped without a PMU).
Findings CheckPmu(const ProbeFacts& f);
// priv.user, priv.paranoid, priv.ptrace_scope, priv.scopes.
Findings CheckPrivileges(const ProbeFacts& f);
// kcore.env, kcore.kernel_version, kcore.kallsyms, kcore.file, kcore.lockdown.
Findings CheckKcore(const ProbeFacts& f);
// mem.mlock, mem.snapshot_size.
Findings CheckMemory(const ProbeFacts& f);
// live.dummy, live.breakpoint, live.uprobe (skipped without live syscalls).
Findings CheckLive(const ProbeFacts& f);
// emulate.qemu.
Findings CheckEmulation(const ProbeFacts& f);
// files (every warning of the sections before, `warnings`),
// verdict.intel_pt, verdict.modes.
Findings CheckVerdict(const ProbeFacts& f, const std::vector<std::string>& warnings);

// All of the above, in order, with the report's verdict fields.
ProbeReport AssembleReport(const ProbeFacts& f);

// Conclusions the sections share.

// What the kernel version allows. With the version unknown the probe
// assumes the AUX area and CAP_PERFMON are there, and kcore is not.
struct KernelGates {
  bool version_known = false;
  bool has_aux = true;          // aux_area (4.1): Intel PT at all
  bool has_kcore = false;       // kcore (5.5): kernel text snapshots
  bool has_cap_perfmon = true;  // 5.8: CAP_PERFMON counts
};
KernelGates GatesOf(const ProbeFacts& f);

// Scopes this user may trace (AllowedScopes with the kernel's CAP_PERFMON).
Scopes ScopesOf(const ProbeFacts& f);

// Online CPUs; 1 when the file is missing or does not parse.
int OnlineCpus(const ProbeFacts& f);

// [_stext, _etext) from kallsyms, when it was read with real addresses and
// both symbols in order.
struct TextRange {
  uint64_t start = 0;
  uint64_t end = 0;
};
std::optional<TextRange> KernelTextRange(const Result<sys::Kallsyms>& kallsyms);

// Why the kernel would refuse this process an open of /proc/kcore, from its
// permission bits (nullopt: unknown) and the process's capabilities. Empty
// when nothing refuses it, or when the capabilities are unknown (then the
// open itself tells).
std::vector<std::string> KcoreRefusals(std::optional<unsigned> mode, const sys::Privileges& priv);

// "PTSNAP_NO_KCORE=1" for the first switch set non-empty; empty when none.
std::string KcoreEnvSwitch(const ProbeFacts& f);

// /proc/kcore opened and the kernel text read through it (kcore.file ok).
bool KcoreTextReadable(const ProbeFacts& f);

// Kernel images can be snapshotted: no switch, kernel 5.5+, kcore.file ok
// and no confidentiality lockdown.
bool KcoreUsable(const ProbeFacts& f);

// Why Intel PT recording is unavailable; empty when it is available.
std::string PtUnavailableReason(const ProbeFacts& f);

// The collection modes (ProbeReport::modes), in their fixed order.
std::vector<std::string> CollectionModes(const ProbeFacts& f);

}  // namespace ptsnap::probe
