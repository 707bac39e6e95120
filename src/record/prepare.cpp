// Prepare (PT recording: the checks and the event attributes) and the CPU
// lists it and system-wide recording use.
#include "record/recorder.h"

#include <dirent.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "base/file_util.h"
#include "base/log.h"
#include "base/string_util.h"
#include "base/version.h"
#include "probe/explain.h"
#include "probe/probe.h"
#include "record/addr_filter.h"
#include "record/child.h"
#include "record/elf_symbols.h"
#include "record/kcore_copy.h"
#include "record/only_in.h"
#include "record/slow_calls.h"
#include "sys/cpus.h"
#include "sys/kallsyms.h"
#include "sys/kernel_version.h"
#include "sys/perf_event.h"
#include "sys/proc_maps.h"
#include "trace/jitdump.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

#include "record/processes.h"

namespace ptsnap::record {

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> SelectCpus(const std::vector<int>& requested,
                                    const std::vector<int>& online) {
  if (requested.empty()) {
    if (online.empty()) return Error("no online CPUs listed in /sys/devices/system/cpu/online");
    return online;
  }
  std::vector<int> offline;
  for (int c : requested)
    if (!std::binary_search(online.begin(), online.end(), c)) offline.push_back(c);
  if (!offline.empty())
    return Error("--cpu " + FormatCpuList(requested) + ": CPU " + FormatCpuList(offline) +
                 (offline.size() == 1 ? " is" : " are") +
                 " not online (online: " + FormatCpuList(online) + ")");
  std::vector<int> out = requested;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<HostFacts> ReadHostFacts(const RecordOptions& opts, const base::RootPath& root,
                                const char* verb, Prepared& p) {
  HostFacts host;
  p.privileges = sys::ReadPrivileges(root);
  p.scope = opts.scope;
  if (auto r = sys::ReadKernelVersion(root)) host.kernel = *r;
  const bool system_wide = opts.all_cpus || !opts.cpus.empty();
  if (system_wide) {
    if (auto ok = probe::CheckSystemWidePrivilege(p.privileges); !ok)
      return std::move(ok).error().WithKind(ErrorKind::kPrivilege);
  }
  if (auto allowed = probe::CheckScopePrivileges(opts.scope != trace::Scope::kUser,
                                                 opts.scope == trace::Scope::kKernel, p.privileges,
                                                 host.kernel);
      !allowed)
    return std::move(allowed).error().WithKind(ErrorKind::kPrivilege);
  host.online = sys::ReadOnlineCpus(root);
  if (system_wide) {
    if (!host.online)
      return Result<std::vector<int>>(std::move(host.online))
          .error()
          .AddContext(std::string("listing the CPUs to ") + verb + " with --all-cpus");
    PTSNAP_ASSIGN_OR_RETURN(p.cpus, SelectCpus(opts.cpus, *host.online));
  }
  return host;
}

Result<Prepared> Prepare(const RecordOptions& opts, const base::RootPath& root,
                         const sys::CpuidSource& cpuid) {
  if (opts.sampling) return PrepareSampling(opts, root, cpuid);
  Prepared p;
  p.cpu = sys::DecodeCpu(cpuid);
  sys::PmuInfo pmu = sys::ReadPmu(root, "intel_pt");
  if (!pmu.present) {
    return Error(probe::NoPmuMessage(p.cpu)).WithKind(ErrorKind::kNoPmu);
  }
  PTSNAP_ASSIGN_OR_RETURN(HostFacts host, ReadHostFacts(opts, root, "trace", p));
  const sys::Privileges& priv = p.privileges;
  const std::optional<sys::KernelVersion>& kv = host.kernel;
  const Result<std::vector<int>>& online = host.online;
  const bool kernel = opts.scope != trace::Scope::kUser;
  const bool user = opts.scope != trace::Scope::kKernel;
  const bool privileged = priv.IsRoot() || priv.PerfmonCapable();
  const bool system_wide = opts.all_cpus || !opts.cpus.empty();
  // One rule for the default, shared with `ptsnap probe`: perf's 4 MiB when
  // memory may be locked freely, else 128 KiB, within the mlock budget.
  // The probe's rule sizes one buffer per CPU. Per-thread mode maps one per
  // traced thread from the same per-user budget, so when attach
  // --multi-thread finds more threads than CPUs, they share it (threads
  // created later are followed as long as the budget lasts).
  uint64_t want = opts.snapshot_size;
  if (want == 0) {
    const int ncpus = online && !online->empty() ? static_cast<int>(online->size()) : 1;
    int threads = 0;
    if (!system_wide && opts.command.empty())
      for (pid_t pid : opts.pids) threads += opts.multi_thread ? CountThreads(root, pid) : 1;
    const int buffers = std::max(ncpus, threads);
    want = probe::DefaultSnapshotBytes(priv, ncpus, buffers);
    if (want == 0)
      return Error(
          "the perf mlock budget leaves no room for " +
          (threads > ncpus ? std::to_string(buffers) + " PT buffers (one per traced thread)"
                           : std::string("a PT buffer")) +
          " (kernel.perf_event_mlock_kb is " +
          (priv.perf_event_mlock_kb ? std::to_string(*priv.perf_event_mlock_kb) + " KiB"
                                    : std::string("unknown")) +
          " per CPU); raise it (`sysctl -w kernel.perf_event_mlock_kb=2048`), run as root" +
          (threads > ncpus ? ", or trace fewer threads (without --multi-thread)" : std::string()));
  }
  bool rounded = false;
  p.aux_bytes = RoundToPowerOfTwoPages(want, &rounded);
  if (rounded)
    p.warnings.push_back("--snapshot-size " + std::to_string(opts.snapshot_size) +
                         " bytes rounded up to " + base::ExactSize(p.aux_bytes) +
                         " (the kernel needs a power-of-two number of pages)");
  PTSNAP_TRY(CheckAuxSize(p.aux_bytes, opts.full_execution));

  perf::PtAttrOptions ao;
  ao.trace_user = user;
  ao.trace_kernel = kernel;
  ao.full_execution = opts.full_execution;
  ao.aux_size = p.aux_bytes;
  // Per-CPU events are not tied to the program's exec: `run` enables them
  // before letting it exec.
  ao.enable_on_exec = !opts.command.empty() && !system_wide;
  ao.timing = opts.timer;
  ao.ptw = opts.ptw;
  ao.pwr_evt = opts.pwr_evt;
  // --only-in: AUX pause/resume (6.13+: the event opens paused), else an
  // address filter on the function, with a note (record/only_in.h).
  PTSNAP_ASSIGN_OR_RETURN(OnlyInPlan only_in, PlanOnlyIn(opts, root, kv, pmu, system_wide));
  ao.start_paused = only_in.probes.has_value();
  if (!only_in.note.empty()) p.warnings.push_back(only_in.note);
  PTSNAP_ASSIGN_OR_RETURN(perf::PtAttr attr, perf::BuildPtAttr(pmu, ao));
  p.warnings.insert(p.warnings.end(), attr.warnings.begin(), attr.warnings.end());
  if (!opts.full_execution) {
    const uint64_t psb =
        perf::PsbPeriodBytes(pmu.Cap("topa_multiple_entries") != 0, attr.timing.psb_period);
    if (auto w = PsbPeriodWarning(p.aux_bytes, psb)) p.warnings.push_back(*w);
  }

  // --filter: resolved against the program's files, checked against the
  // PMU, and set on each intel_pt event before it is enabled.
  RecordOptions filtered = opts;
  if (!only_in.fallback_filter.empty()) {
    // A short-form --filter (one function name) is written out, so the two join.
    if (!filtered.filter.empty() && filtered.filter.find_first_of(" \t,") == std::string::npos)
      filtered.filter = "filter " + filtered.filter;
    filtered.filter += (filtered.filter.empty() ? "" : ",") + only_in.fallback_filter;
  }
  PTSNAP_ASSIGN_OR_RETURN(std::vector<ResolvedAddrFilter> filters,
                          ResolveRecordingFilters(filtered));
  PTSNAP_TRY(CheckAddrFilterSupport(filters, pmu));
  if (!filters.empty()) {
    PTSNAP_ASSIGN_OR_RETURN(p.hw.addr_filter, FormatKernelAddrFilters(filters));
  }

  p.hw.pt_attr = attr.attr;
  p.hw.tracking_attr = perf::BuildTrackingAttr(kernel, ao.enable_on_exec, kv);
  // Per-thread, a kernel scope needs TEXT_POKE and KSYMBOL from every task,
  // which only CPU-wide events get (perf: "Text poke must be collected on
  // all CPUs"); --all-cpus tracking events are CPU-wide already.
  if (kernel && !system_wide) {
    if (auto ks = perf::BuildKernelSidebandAttr(kv)) {
      auto cpu_wide = probe::CheckSystemWidePrivilege(priv);
      if (cpu_wide && online && !online->empty()) {
        p.hw.kernel_sideband_attr = *ks;
        p.hw.kernel_sideband_cpus = *online;
        p.hw.tracking_attr.ksymbol = 0;
        p.hw.tracking_attr.text_poke = 0;
      } else {
        p.warnings.push_back(KernelSidebandWarning(
            cpu_wide ? "the online CPUs are unknown (" + online.error().ToString() + ")"
                     : "that needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
                       "kernel.perf_event_paranoid <= 0 (it is " +
                           probe::ParanoidText(priv) + ")"));
      }
    }
  }
  p.hw.data_pages = privileged ? 128 : 32;
  p.hw.aux_pages = p.aux_bytes / 4096;
  p.hw.full_execution = opts.full_execution;
  p.hw.single_shot_triggers = !opts.multi_snapshot;
  p.hw.only_in = std::move(only_in.probes);
  // #22: a single snapshot's trigger pauses PT in the kernel at the hit.
  p.hw.trigger_aux_pause = perf::HasAuxPause(kv) && !opts.multi_snapshot && !opts.full_execution;
  p.hw.sideband_for_untraced_threads = !system_wide;
  p.mode = opts.full_execution ? trace::Mode::kFull : trace::Mode::kSnapshot;

  p.pt.pmu_type = attr.attr.type;
  p.pt.config = attr.attr.config;
  p.pt.mtc_freq = attr.timing.mtc_period;
  p.pt.nom_freq = pmu.max_nonturbo_ratio.value_or(0);
  p.pt.psb_period = attr.timing.psb_period;
  p.pt.tsc = attr.timing.tsc;
  p.pt.mtc = attr.timing.mtc;
  p.pt.cyc = attr.timing.cyc;
  p.pt.noretcomp = attr.timing.noretcomp;
  p.pt.filter = p.hw.addr_filter;  // perf export writes it into AUXTRACE_INFO
  return p;
}

}  // namespace ptsnap::record
