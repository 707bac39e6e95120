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

namespace ptsnap::record {
namespace {

bool IsStopIndicator(std::string_view symbol) {
  for (auto s : kStopIndicatorSymbols)
    if (s == symbol) return true;
  return false;
}

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// The error from opening a thread's events, with the explanation in front.
// Its kind: a vanished thread, a refusal by privilege (perf_event_open's
// EACCES/EPERM; from mmap they mean the locked-memory limit), or the kind the
// perf layer gave it (kBufferMapping).
Error ExplainThreadError(const Error& e, const Prepared& p) {
  const bool mmap = e.kind() == ErrorKind::kBufferMapping;
  ErrorKind kind = e.kind();
  if (e.errnum() == ESRCH) kind = ErrorKind::kProcessGone;
  if (!mmap && (e.errnum() == EACCES || e.errnum() == EPERM)) kind = ErrorKind::kPrivilege;
  if (e.errnum() == 0) return Error(e).WithKind(kind);
  return Error(probe::ExplainOpenFailure(e.errnum(), p.scope != trace::Scope::kUser, p.privileges,
                                         mmap, (p.hw.aux_pages + p.hw.data_pages + 1) * 4096,
                                         !p.cpus.empty()) +
               " (" + e.ToString() + ")")
      .WithKind(kind);
}

// Every traced thread holds fds (its events, its ring, its breakpoints and
// probes) and the trace's files need a few of their own (a snapshot's stream,
// the manifest's temporary, the directory to fsync, binary copies). Threads
// are only added while kFdsForWriting stay free: running out leaves threads
// untraced (or fails attach before recording) instead of failing the
// snapshot that keeps the rest. Counting /proc/self/fd is O(fds), so it is
// recounted only when an estimate (kFdsPerThread per thread added since)
// comes near the limit.
class FdBudget {
 public:
  static constexpr int64_t kFdsForWriting = 16;
  static constexpr int64_t kFdsPerThread = 4;

  Result<void> TakeForThread() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return Ok();
    const auto limit = static_cast<int64_t>(lim.rlim_cur);
    if (counted_ < 0 || counted_ + kFdsPerThread * (added_ + 1) + kFdsForWriting > limit) {
      counted_ = CountOpenFds();
      added_ = 0;
      if (counted_ < 0) return Ok();  // no /proc/self/fd: the kernel's EMFILE decides
      if (counted_ + kFdsPerThread + kFdsForWriting > limit) {
        return Error("keeping " + std::to_string(kFdsForWriting) +
                         " fds free for writing the trace (" + std::to_string(counted_) + " of " +
                         std::to_string(limit) + " open)",
                     EMFILE);
      }
    }
    ++added_;
    return Ok();
  }

 private:
  static int64_t CountOpenFds() {
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int64_t n = -1;  // the directory's own fd
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return n;
  }

  int64_t counted_ = -1;
  int64_t added_ = 0;
};

// A refused uprobe: privilege (the uprobe PMU needs CAP_PERFMON or
// CAP_SYS_ADMIN, or perf_event_paranoid -1) or what the kernel said.
Error ExplainUprobeError(const Error& e) {
  if (e.errnum() == EACCES || e.errnum() == EPERM)
    return Error(
               "--slower-than needs root, CAP_PERFMON or kernel.perf_event_paranoid=-1 (its "
               "entry and return probes are uprobes): " +
               e.ToString())
        .WithKind(ErrorKind::kPrivilege);
  return Error(e).WithKind(ErrorKind::kTrigger);
}

// "handle_request took 5.123 ms (from +1.000 ms, thread 42)": +T counts
// from the start of the recording.
std::string SlowCallDetail(const std::string& symbol, const SlowCall& c, uint64_t start) {
  std::string d = symbol + " took " + base::FormatDuration(c.end - c.begin) + " (from +" +
                  base::FormatDuration(c.begin > start ? c.begin - start : 0) + ", thread " +
                  std::to_string(c.tid) + ")";
  if (c.skipped_before != 0)
    d += "; " + std::to_string(c.skipped_before) +
         " slow call(s) of this thread skipped before it by the rate limit";
  return d;
}

}  // namespace

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

namespace {

// Threads of `pid` under `root` (/proc/PID/task), at least 1.
int CountThreads(const base::RootPath& root, pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it(root.Resolve("/proc/" + std::to_string(pid) + "/task"),
                                         ec);
  int n = 0;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) ++n;
  return std::max(n, 1);
}

}  // namespace

bool LiveOpenProbe(const perf_event_attr& attr) {
  return sys::PerfEventOpen(attr, 0, -1, -1).has_value();
}

uint64_t DefaultSamplingSnapshotBytes(uint64_t frequency, uint64_t record_bytes) {
  const uint64_t second = frequency * record_bytes;  // both small: no overflow
  return std::clamp(second, kSamplingSnapshotMinBytes, kSamplingSnapshotMaxBytes);
}

uint64_t SampleRecordBytes(perf::CallgraphMode mode) {
  // header 8 + IDENTIFIER, IP, TID, TIME, CPU, PERIOD 48 + callchain nr 8.
  constexpr uint64_t kFixed = 64;
  constexpr uint64_t kFrames = uint64_t{64} * 8;       // a 64-frame callchain
  constexpr uint64_t kLbrEntries = uint64_t{32} * 24;  // nr, then {from, to, flags} each
  switch (mode) {
    case perf::CallgraphMode::kFp: {
      // REGS_USER abi + BP, SP, IP; STACK_USER size, the copy, dyn_size.
      const uint64_t regs =
          8 + 8 * static_cast<uint64_t>(__builtin_popcountll(perf::kFpUserRegsMask));
      return kFixed + kFrames + regs + 8 + perf::kFpStackBytes + 8;
    }
    case perf::CallgraphMode::kLbr: return kFixed + kFrames + 8 + kLbrEntries;
    case perf::CallgraphMode::kDwarf: {
      // Kernel frames only; REGS_USER abi + one u64 per mask bit; STACK_USER
      // size, the copy, dyn_size.
      const uint64_t regs =
          8 + 8 * static_cast<uint64_t>(__builtin_popcountll(perf::kX86UserRegsMask));
      return kFixed + uint64_t{16} * 8 + regs + 8 + perf::kDwarfStackBytes + 8;
    }
  }
  return kFixed;
}

size_t SamplingDataPages(uint64_t frequency, uint64_t record_bytes,
                         std::optional<uint64_t> budget_bytes) {
  constexpr uint64_t kPage = 4096;
  const uint64_t want = frequency * record_bytes / 40;  // 25 ms worth
  size_t pages = 16;
  while (pages < 1024 && pages * kPage < want) pages *= 2;
  if (budget_bytes)
    while (pages > 1 && (pages + 1) * kPage > *budget_bytes) pages /= 2;
  if ((budget_bytes && (pages + 1) * kPage > *budget_bytes) || pages * kPage < 2 * record_bytes)
    return 0;
  return pages;
}

namespace {

// The ring's share of what the user may lock (kernel/events/core.c
// perf_mmap, as probe::LargestAuxBytes reads it): nullopt when nothing
// limits it (CAP_IPC_LOCK, perf_event_paranoid -1, RLIMIT_MEMLOCK unlimited).
std::optional<uint64_t> RingBudget(const sys::Privileges& priv, int cpus, int rings) {
  if (priv.Has(sys::kCapIpcLock) || (priv.perf_event_paranoid && *priv.perf_event_paranoid < 0))
    return std::nullopt;
  if (priv.memlock_known && !priv.memlock_bytes) return std::nullopt;
  const uint64_t per_cpu =
      static_cast<uint64_t>(std::max<int64_t>(priv.perf_event_mlock_kb.value_or(516), 0)) << 10;
  const uint64_t memlock = priv.memlock_bytes.value_or(64 << 10);
  return (per_cpu * static_cast<uint64_t>(std::max(cpus, 1)) + memlock) /
         static_cast<uint64_t>(std::max(rings, 1));
}

}  // namespace

Result<Prepared> PrepareSampling(const RecordOptions& opts, const base::RootPath& root,
                                 const sys::CpuidSource& cpuid, const OpenProbe& can_open) {
  Prepared p;
  p.cpu = sys::DecodeCpu(cpuid);
  p.privileges = sys::ReadPrivileges(root);
  const sys::Privileges& priv = p.privileges;
  std::optional<sys::KernelVersion> kv;
  if (auto r = sys::ReadKernelVersion(root)) kv = *r;
  const bool kernel = opts.scope != trace::Scope::kUser;
  const bool user = opts.scope != trace::Scope::kKernel;
  p.scope = opts.scope;
  const bool system_wide = opts.all_cpus || !opts.cpus.empty();
  // perf_event_open's rules do not depend on the event: the same checks as PT.
  if (system_wide) {
    if (auto ok = probe::CheckSystemWidePrivilege(priv); !ok)
      return std::move(ok).error().WithKind(ErrorKind::kPrivilege);
  }
  if (auto allowed =
          probe::CheckScopePrivileges(kernel, opts.scope == trace::Scope::kKernel, priv, kv);
      !allowed)
    return std::move(allowed).error().WithKind(ErrorKind::kPrivilege);
  auto online = sys::ReadOnlineCpus(root);
  if (system_wide) {
    if (!online)
      return std::move(online).error().AddContext("listing the CPUs to sample with --all-cpus");
    PTSNAP_ASSIGN_OR_RETURN(p.cpus, SelectCpus(opts.cpus, *online));
  }
  const int ncpus = online && !online->empty() ? static_cast<int>(online->size()) : 1;

  // The event: cycles where a hardware PMU counts them (a live try: VMs
  // often have a `cpu` PMU in sysfs that cannot count), else cpu-clock, an
  // hrtimer that works per thread and per CPU alike.
  perf::SamplingAttrOptions so;
  so.trace_user = user;
  so.trace_kernel = kernel;
  so.kernel = kv;
  so.enable_on_exec = !opts.command.empty() && !system_wide;
  so.event = perf::SamplingEvent::kCycles;
  so.frequency = 1000;
  so.callgraph = perf::CallgraphMode::kFp;
  // Probes are user-only and disabled: they must not need more than the recording.
  perf::SamplingAttrOptions probe_opts = so;
  probe_opts.trace_user = true;
  probe_opts.trace_kernel = false;
  probe_opts.enable_on_exec = false;
  const bool cycles = can_open(perf::BuildSamplingAttr(probe_opts));
  if (!cycles) so.event = perf::SamplingEvent::kCpuClock;
  probe_opts.callgraph = perf::CallgraphMode::kLbr;
  const bool lbr =
      cycles && sys::FlagOnEveryCpu(root, "pdcm") && can_open(perf::BuildSamplingAttr(probe_opts));
  PTSNAP_ASSIGN_OR_RETURN(perf::CallgraphChoice cg,
                          perf::ChooseCallgraph(opts.callgraph_mode, lbr));
  if (!cg.note.empty()) p.warnings.push_back(cg.note);
  so.callgraph = cg.mode;

  uint64_t max_rate = 100000;  // the kernel's DEFAULT_MAX_SAMPLE_RATE
  if (auto text = base::ReadFile(root.Resolve("/proc/sys/kernel/perf_event_max_sample_rate"), 64))
    if (auto v = sys::ParseSysctlInt(*text); v && *v > 0) max_rate = static_cast<uint64_t>(*v);
  PTSNAP_ASSIGN_OR_RETURN(so.frequency, perf::SamplingFrequency(opts.timer, max_rate, &p.warnings));

  SamplingConfig sc;
  sc.sampling_attr = perf::BuildSamplingAttr(so);
  sc.tracking_attr = perf::BuildTrackingAttr(kernel, so.enable_on_exec, kv);
  const uint64_t record_bytes = SampleRecordBytes(cg.mode);
  sc.snapshot_bytes = opts.snapshot_size != 0
                          ? opts.snapshot_size
                          : DefaultSamplingSnapshotBytes(so.frequency, record_bytes);
  sc.full_execution = opts.full_execution;
  sc.single_shot_triggers = !opts.multi_snapshot;
  sc.sideband_for_untraced_threads = !system_wide;
  int rings = 1;
  if (system_wide) {
    rings = static_cast<int>(p.cpus.size());
  } else if (opts.command.empty()) {
    rings = 0;
    for (pid_t pid : opts.pids) rings += opts.multi_thread ? CountThreads(root, pid) : 1;
  }
  sc.data_pages = SamplingDataPages(so.frequency, record_bytes, RingBudget(priv, ncpus, rings));
  if (sc.data_pages == 0)
    return Error("the perf mlock budget leaves no room for " +
                 (rings > 1 ? std::to_string(rings) + " sampling rings (one per " +
                                  (system_wide ? "CPU" : "traced thread") + ")"
                            : std::string("a sampling ring")) +
                 " of at least two samples (" + base::ExactSize(record_bytes) +
                 " each with --callgraph-mode " + std::string(perf::ToString(cg.mode)) +
                 "; kernel.perf_event_mlock_kb is " +
                 (priv.perf_event_mlock_kb ? std::to_string(*priv.perf_event_mlock_kb) + " KiB"
                                           : std::string("unknown")) +
                 " per CPU, RLIMIT_MEMLOCK " +
                 (priv.memlock_bytes ? base::ExactSize(*priv.memlock_bytes)
                                     : std::string("unknown")) +
                 "); raise it (`sysctl -w kernel.perf_event_mlock_kb=2048` or `ulimit -l`)" +
                 (cg.mode == perf::CallgraphMode::kFp
                      ? std::string(" or run as root")
                      : std::string(", run as root, or use --callgraph-mode fp (smaller samples)")))
        .WithKind(ErrorKind::kBufferMapping);
  p.sampling = sc;

  trace::Sampling& info = p.sampling_info;
  info.event = std::string(perf::ToString(so.event));
  info.type = sc.sampling_attr.type;
  info.config = sc.sampling_attr.config;
  info.sample_type = sc.sampling_attr.sample_type;
  info.frequency = so.frequency;
  info.period = 0;
  info.callgraph = std::string(perf::ToString(cg.mode));
  info.regs_user = sc.sampling_attr.sample_regs_user;
  info.stack_user = sc.sampling_attr.sample_stack_user;
  info.max_stack = sc.sampling_attr.sample_max_stack;

  // hw: only what ExplainThreadError reads (the bytes one unit maps).
  p.hw.data_pages = sc.data_pages;
  p.hw.aux_pages = 0;
  p.aux_bytes = sc.snapshot_bytes;
  p.mode = opts.full_execution ? trace::Mode::kFull : trace::Mode::kSnapshot;
  return p;
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
  p.privileges = sys::ReadPrivileges(root);
  const sys::Privileges& priv = p.privileges;
  // The release gates CAP_PERFMON (5.8) and the tracking event's bits.
  std::optional<sys::KernelVersion> kv;
  if (auto r = sys::ReadKernelVersion(root)) kv = *r;
  const bool kernel = opts.scope != trace::Scope::kUser;
  const bool user = opts.scope != trace::Scope::kKernel;
  p.scope = opts.scope;
  const bool privileged = priv.IsRoot() || priv.PerfmonCapable();
  const bool system_wide = opts.all_cpus || !opts.cpus.empty();
  if (system_wide) {
    if (auto ok = probe::CheckSystemWidePrivilege(priv); !ok) {
      return std::move(ok).error().WithKind(ErrorKind::kPrivilege);
    }
  }
  if (auto allowed =
          probe::CheckScopePrivileges(kernel, opts.scope == trace::Scope::kKernel, priv, kv);
      !allowed) {
    return std::move(allowed).error().WithKind(ErrorKind::kPrivilege);
  }
  auto online = sys::ReadOnlineCpus(root);
  if (system_wide) {
    if (!online)
      return std::move(online).error().AddContext("listing the CPUs to trace with --all-cpus");
    PTSNAP_ASSIGN_OR_RETURN(p.cpus, SelectCpus(opts.cpus, *online));
  }
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

Result<std::vector<pid_t>> ListThreads(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return Error::FromErrno("listing threads of process " + std::to_string(pid), ec.value());
  for (const auto& entry : it) {
    auto tid = base::ParseUint(entry.path().filename().string());
    if (tid) tids.push_back(static_cast<pid_t>(*tid));
  }
  std::sort(tids.begin(), tids.end(), [pid](pid_t a, pid_t b) {
    if ((a == pid) != (b == pid)) return a == pid;
    return a < b;
  });
  return tids;
}

std::vector<pid_t> ListProcesses(const base::RootPath& root) {
  std::vector<pid_t> pids;
  std::error_code ec;
  std::filesystem::directory_iterator it(root.Resolve("/proc"), ec);
  if (ec) return pids;
  for (const auto& entry : it) {
    auto pid = base::ParseUint(entry.path().filename().string());
    if (pid && *pid > 0 && *pid <= INT32_MAX) pids.push_back(static_cast<pid_t>(*pid));
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

Result<std::string> SynthesizeSideband(pid_t pid, uint64_t time) {
  auto maps = sys::ReadProcMaps(base::RootPath(), pid);
  if (!maps && !ProcessExists(pid)) {
    // Gone between attach's checks and this read (the raw error was ENOENT
    // on /proc/PID/maps, naming no cause).
    return Error("process " + std::to_string(pid) +
                 " exited while ptsnap was attaching to it: nothing of it was traced (" +
                 maps.error().ToString() + ")")
        .WithKind(ErrorKind::kProcessGone);
  }
  if (!maps) return std::move(maps).error();
  std::string out;
  trace::SampleId sid;
  sid.pid = static_cast<uint32_t>(pid);
  sid.tid = static_cast<uint32_t>(pid);
  sid.time = time;
  auto tids = ListThreads(pid);
  for (pid_t tid : tids ? *tids : std::vector<pid_t>{pid}) {
    auto comm = base::ReadFileTrimmed("/proc/" + std::to_string(pid) + "/task/" +
                                      std::to_string(tid) + "/comm");
    if (!comm) continue;
    trace::Record r;
    r.type = PERF_RECORD_COMM;
    r.sample_id = sid;
    r.sample_id.tid = static_cast<uint32_t>(tid);
    r.body = trace::Comm{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), *comm, false};
    out += trace::SerializeRecord(r);
  }
  for (const sys::MapEntry& m : *maps) {
    if (!m.exec || m.path.empty()) continue;
    trace::Mmap2 mm;
    mm.pid = static_cast<uint32_t>(pid);
    mm.tid = static_cast<uint32_t>(pid);
    mm.addr = m.start;
    mm.len = m.end - m.start;
    mm.pgoff = m.offset;
    mm.maj = m.dev_major;
    mm.min = m.dev_minor;
    mm.ino = m.inode;
    mm.prot = (m.read ? PROT_READ : 0) | (m.write ? PROT_WRITE : 0) | (m.exec ? PROT_EXEC : 0);
    mm.flags = m.shared ? MAP_SHARED : MAP_PRIVATE;
    mm.filename = m.path;
    trace::Record r;
    r.type = PERF_RECORD_MMAP2;
    r.misc = PERF_RECORD_MISC_USER;
    r.sample_id = sid;
    r.body = mm;
    out += trace::SerializeRecord(r);
  }
  return out;
}

namespace {

// The line announcing a snapshot: "Snapshot 2 taken (signal: SIGUSR2)."
std::string SnapshotLine(const trace::Snapshot& s) {
  return "Snapshot " + std::to_string(s.seq) + " taken (" + std::string(trace::ToString(s.reason)) +
         (s.detail.empty() ? "" : ": " + s.detail) + ").";
}

// Ends the program `run` started once recording is over (--after): SIGTERM
// at `term_at`, SIGKILL kTermGrace later; Tick() sends what is due.
class ProgramEnder {
 public:
  using Clock = std::chrono::steady_clock;
  [[nodiscard]] bool armed() const { return term_at_.has_value(); }
  void Arm(Clock::time_point term_at) {
    if (!term_at_) term_at_ = term_at;
  }
  void Tick(pid_t pid) {
    if (!term_at_) return;
    const auto now = Clock::now();
    if (!term_sent_ && now >= *term_at_) {
      ::kill(pid, SIGTERM);
      term_sent_ = true;
    }
    if (!kill_sent_ && now >= *term_at_ + kTermGrace) {
      ::kill(pid, SIGKILL);
      kill_sent_ = true;
    }
  }

 private:
  std::optional<Clock::time_point> term_at_;
  bool term_sent_ = false, kill_sent_ = false;
};

// The program outlived the recording: ends it as `after` says (a stop
// request while waiting ends it too) and returns its status. `after` is
// opts.after, or kWait where the program runs on untraced after a failure
// (which says so itself: `announce` false); `stopped`: a stop request ended
// the recording.
int EndProgram(Child& child, const RecordOptions& opts, AfterRecording after, Control& control,
               bool stopped, const EventFn& events, bool announce = true) {
  int status = 0;
  if (stopped && opts.stop_signal != 0) ::kill(child.pid(), opts.stop_signal);
  if (!stopped && after == AfterRecording::kDetach) {
    Emit(events, {Event::Kind::kInfo, "Recording finished; leaving " + opts.command[0] + " (pid " +
                                          std::to_string(child.pid()) +
                                          ") running, untraced (--after=detach)."});
    child.Release();
    return 0;
  }
  if (!stopped && after == AfterRecording::kWait) {
    if (announce)
      Emit(events, {Event::Kind::kInfo, "Recording finished; waiting for " + opts.command[0] +
                                            " to exit (--after=wait; Ctrl-C ends it)."});
    while (!child.Poll(&status)) {
      if (control.stop_requested()) {
        stopped = true;
        break;
      }
      (void)control.Wait(std::chrono::milliseconds(20));
    }
    if (!stopped) return status;
  }
  Emit(events, {Event::Kind::kInfo,
                "Recording finished; ending " + opts.command[0] +
                    (stopped ? " (stopped: SIGTERM if it is still there in 0.4 s, then SIGKILL)."
                             : " (--after=kill: SIGTERM, then SIGKILL).")});
  ProgramEnder ender;
  // After a stop request the program may be on its way out already (Ctrl-C
  // on a terminal reaches it too): it gets kStopGrace first.
  ender.Arm(ProgramEnder::Clock::now() + (stopped ? kStopGrace : std::chrono::milliseconds(0)));
  while (!child.Poll(&status)) {
    ender.Tick(child.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

struct Session {
  const RecordOptions& opts;
  Prepared& prepared;
  PtSource& source;
  trace::TraceWriter& writer;
  std::vector<pid_t> pids;
  uint32_t seq = 0;

  const EventFn& events;

  // `call`: the slow call a kSlowCall snapshot is taken for.
  Result<uint32_t> TakeSnapshot(trace::SnapshotReason reason, std::string detail, uint64_t time,
                                uint32_t tid, bool resume, const SlowCall* call = nullptr) {
    ++seq;
    if (prepared.mode == trace::Mode::kSnapshot) PTSNAP_TRY(source.Snapshot(writer, seq, resume));
    trace::Snapshot s;
    s.seq = seq;
    s.reason = reason;
    s.detail = std::move(detail);
    s.time = time != 0 ? time : source.Now();
    s.tid = tid;
    if (call != nullptr) {
      s.call_begin = call->begin;
      s.call_ns = call->end - call->begin;
    }
    std::string line = SnapshotLine(s);
    PTSNAP_TRY(writer.AddSnapshot(std::move(s)));
    Emit(events, {Event::Kind::kSnapshot, std::move(line), seq});
    return seq;
  }
};

// Build-ids (and with --copy-binaries, copies) of the executable files the
// traced processes mapped, and the vdso, which exists only in memory. The
// vdso is the kernel's, the same for every process of one ABI on this
// kernel, so ptsnap dumps its own (getauxval(AT_SYSINFO_EHDR)) for each pid.
void RecordBinaries(trace::TraceWriter& writer, const std::set<std::string>& files, bool copy,
                    const std::vector<pid_t>& pids, bool host_vdso) {
  for (const std::string& f : files) {
    trace::Binary b;
    b.path = f;
    if (!copy) {
      // The notes only: a mapped library can be hundreds of MB.
      b.build_id = elf::ReadBuildIdOf(f);
      if (b.build_id.empty()) PTSNAP_LOG(kInfo) << "no build-id for " << f;
    } else if (auto bytes = base::ReadFile(f, size_t{1} << 30); bytes) {
      b.build_id = elf::ReadBuildId(std::as_bytes(std::span(bytes->data(), bytes->size())));
      const std::string rel = "binaries/" + (b.build_id.empty() ? "no-build-id" : b.build_id) +
                              "/" + std::filesystem::path(f).filename().string();
      (void)trace::MakeTraceDirs((writer.dir() / rel).parent_path());  // WriteFileAtomic says why
      if (auto w = base::WriteFileAtomic(writer.dir() / rel, *bytes, 0600); w) {
        b.copy = rel;
      } else {
        PTSNAP_LOG(kWarning) << "--copy-binaries: " << w.error().ToString();
      }
    } else {
      PTSNAP_LOG(kInfo) << "no build-id for " << f << ": " << bytes.error().ToString();
    }
    writer.manifest().binaries.push_back(std::move(b));
  }
  if (!host_vdso) return;
  const auto vdso = static_cast<uintptr_t>(::getauxval(AT_SYSINFO_EHDR));
  if (vdso == 0) return;
  auto maps = sys::ReadProcMaps(base::RootPath(), 0);
  if (!maps) return;
  for (const sys::MapEntry& m : *maps) {
    if (m.path != "[vdso]" || m.start != vdso) continue;
    // The vDSO is mapped in this process at the address the auxv gives.
    std::string image(reinterpret_cast<const char*>(vdso),  // NOLINT(performance-no-int-to-ptr)
                      m.end - m.start);
    std::error_code ec;
    (void)trace::MakeTraceDirs(writer.dir() / "vdso");  // WriteFileAtomic says why
    // One file, hard-linked under every pid (system-wide mode lists many).
    std::filesystem::path first;
    for (pid_t pid : pids) {
      const auto path = writer.dir() / "vdso" / (std::to_string(pid) + ".so");
      if (!first.empty()) {
        std::filesystem::create_hard_link(first, path, ec);
        if (!ec) continue;
      }
      if (auto w = base::WriteFileAtomic(path, image, 0600); !w) {
        PTSNAP_LOG(kWarning) << "vdso dump: " << w.error().ToString();
      } else if (first.empty()) {
        first = path;
      }
    }
  }
}

// The kernel image copy, gated like `ptsnap probe` (record/kcore_copy.h).
void CopyKernel(const Prepared& p, const base::RootPath& root, trace::TraceWriter& writer) {
  if (p.scope == trace::Scope::kUser) return;
  if (p.sampling) {
    // Samples hold addresses, not code: the kernel's symbols name their
    // kernel frames, no /proc/kcore needed.
    trace::Kcore& k = writer.manifest().kcore;
    auto copied = CopyKernelSymbols(root, writer.dir() / "kcore");
    if (!copied) {
      PTSNAP_LOG(kWarning) << "kernel frames will be shown as addresses: "
                           << copied.error().ToString();
      return;
    }
    k.dir = "kcore";
    if (*copied) writer.manifest().kernel_start = *copied;
    return;
  }
  KernelImage img = SnapshotKernelImage(root, writer.dir(), probe::GetenvFromProcess);
  trace::Kcore& k = writer.manifest().kcore;
  k.status = img.status;
  k.reason = img.reason;
  k.dir = img.dir;
  if (img.kernel_start) writer.manifest().kernel_start = img.kernel_start;
  for (const std::string& w : img.warnings) PTSNAP_LOG(kWarning) << w;
}

}  // namespace

Result<Outcome> Record(const RecordOptions& opts, Prepared prepared,
                       const std::filesystem::path& trace_dir, const base::RootPath& root,
                       Control& control, const EventFn& events, const SourceFactory& make_source) {
  Outcome outcome;
  std::error_code ec;
  if (std::filesystem::exists(trace_dir, ec) && (!std::filesystem::is_directory(trace_dir, ec) ||
                                                 !std::filesystem::is_empty(trace_dir, ec))) {
    return Error("trace directory " + trace_dir.string() +
                 " already exists; remove it or choose another with --trace-dir (or -o)")
        .WithKind(ErrorKind::kTraceDirExists);
  }
  const bool run = !opts.command.empty();
  const bool system_wide = !prepared.cpus.empty();
  std::unique_ptr<PtSource> source;
  if (make_source) {
    PTSNAP_ASSIGN_OR_RETURN(source, make_source(prepared.hw));
  } else if (prepared.sampling) {
    PTSNAP_ASSIGN_OR_RETURN(auto sampling, SamplingSource::Create(*prepared.sampling));
    source = std::move(sampling);
  } else {
    PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(prepared.hw));
    source = std::move(hw);
  }
  // System-wide: one PT + tracking event per CPU, opened and enabled before
  // the program execs (run) or the mappings are synthesized (attach).
  // Threads of the traced program then only host trigger breakpoints.
  auto open_cpus = [&]() -> Result<void> {
    for (int cpu : prepared.cpus) {
      if (auto r = source->AddCpu(cpu); !r) return ExplainThreadError(r.error(), prepared);
    }
    if (auto r = source->EnableAll(); !r) return ExplainThreadError(r.error(), prepared);
    return Ok();
  };
  const bool trace_threads = !system_wide;
  // The emulator follows the program, its trigger and its end itself
  // (pt_source.h, "A source that drives itself").
  const bool self_driven = source->self_driven();

  std::optional<Child> child;
  FdBudget fd_budget;
  std::vector<pid_t> pids;
  std::vector<TriggerPoint> points;
  if (run) {
    PTSNAP_ASSIGN_OR_RETURN(PtSource::Launch launch, source->LaunchCommand(opts.command));
    // --ptw: ptsnap_mark() (<ptsnap/mark.h>) uses PTWRITE when it sees this.
    std::vector<std::string> env;
    if (opts.ptw) env.push_back("PTSNAP_PTWRITE=1");
    PTSNAP_ASSIGN_OR_RETURN(Child c, Child::Spawn(launch.argv, &::fork, launch.inherit_fds,
                                                  opts.after != AfterRecording::kDetach, env));
    child.emplace(std::move(c));
    pids.push_back(child->pid());
    if (system_wide) PTSNAP_TRY(open_cpus());
    if (auto r = source->AddThread(child->pid(), child->pid(), trace_threads); !r)
      return ExplainThreadError(r.error(), prepared);
    PTSNAP_TRY(child->Exec());
    // enable_on_exec has fired; enabling again is a no-op for these events
    // but marks the source started, so threads found later start enabled.
    if (auto r = source->EnableAll(); !r) return ExplainThreadError(r.error(), prepared);
    if (!opts.trigger.empty() && !self_driven) {
      auto resolved = ResolveTrigger(opts.trigger, child->pid(),
                                     opts.slower_than_ns != 0 ? 1 : kMaxTriggerFunctions);
      if (!resolved) return std::move(resolved).error().WithKind(ErrorKind::kTrigger);
      points = std::move(*resolved);
    }
  } else {
    if (self_driven) return Error("this source records only a program it starts (run)");
    if (opts.pids.empty() && !system_wide) return Error("attach needs -p PID[,PID...] or -a");
    if (!opts.trigger.empty() && opts.pids.empty())
      return Error("--trigger needs -p PID: the process whose code holds the trigger");
    for (pid_t pid : opts.pids) {
      if (pid <= 0 || !ProcessExists(pid)) {
        return Error("process " + std::to_string(pid) +
                     " does not exist (it may have exited before ptsnap could attach)")
            .WithKind(ErrorKind::kProcessGone);
      }
      // Its memory map names the code the samples or the trace land in; an
      // unreadable one (hidepid, another user's process, a container's
      // masked /proc) would leave a trace nothing can decode. Asked before
      // any event opens or the trace directory is made.
      if (auto maps = base::ReadFileHead("/proc/" + std::to_string(pid) + "/maps", 1); !maps) {
        return Error("cannot read the memory map of process " + std::to_string(pid) + " (" +
                     maps.error().ToString() +
                     "): ptsnap needs the process's memory map to name its code; attach as "
                     "root or as the process's user, on a /proc mounted without hidepid")
            .WithKind(ErrorKind::kPrivilege);
      }
    }
    pids = opts.pids;
    if (!opts.trigger.empty()) {
      auto resolved = ResolveTrigger(opts.trigger, pids[0],
                                     opts.slower_than_ns != 0 ? 1 : kMaxTriggerFunctions);
      if (!resolved) return std::move(resolved).error().WithKind(ErrorKind::kTrigger);
      points = std::move(*resolved);
    }
    // Two passes: a thread created before its creator's event opened is
    // in no FORK record, so the second listing catches it. A thread other
    // than the main one that exits between the listing and its open
    // (ESRCH) is not an error: a process that starts and ends threads
    // all the time must still be attachable.
    for (int pass = 0; pass < 2; ++pass) {
      for (pid_t pid : pids) {
        auto tids = ListThreads(pid);
        if (!tids) {
          return Error("process " + std::to_string(pid) + " exited before ptsnap could attach (" +
                       tids.error().ToString() + ")")
              .WithKind(ErrorKind::kProcessGone);
        }
        for (pid_t tid : *tids) {
          if (source->HasThread(tid)) continue;
          if (auto fds = fd_budget.TakeForThread(); !fds)
            return ExplainThreadError(fds.error(), prepared);
          if (auto r =
                  source->AddThread(pid, tid, trace_threads && (opts.multi_thread || tid == pid));
              !r) {
            if (r.error().errnum() == ESRCH && tid != pid) continue;
            return ExplainThreadError(r.error(), prepared);
          }
        }
      }
    }
    // System-wide attach enables the CPUs' events after the mappings are
    // synthesized (below), like per-thread attach.
    if (system_wide) {
      for (int cpu : prepared.cpus) {
        if (auto r = source->AddCpu(cpu); !r) return ExplainThreadError(r.error(), prepared);
      }
    }
  }
  // --slower-than: entry and return probes on the trigger function instead
  // of its breakpoint. `run`: one inherited pair on the program (its
  // threads follow); attach: a pair per thread found (inherited by the
  // threads those create).
  std::unique_ptr<SlowCallProbes> slow_probes;
  if (opts.slower_than_ns != 0 && !points.empty()) {
    const pid_t target_pid = run ? child->pid() : pids[0];
    auto target = ResolveProbeTarget(opts.trigger, target_pid);
    if (!target) return std::move(target).error().WithKind(ErrorKind::kTrigger);
    PTSNAP_ASSIGN_OR_RETURN(
        slow_probes,
        SlowCallProbes::Create(root, std::move(*target), opts.slower_than_ns, opts.multi_snapshot));
    std::vector<pid_t> tids{target_pid};
    if (!run) {
      if (auto listed = ListThreads(target_pid)) tids = *listed;
    }
    for (pid_t tid : tids) {
      if (auto r = slow_probes->AddThread(tid); !r) {
        if (r.error().errnum() == ESRCH) continue;  // the thread exited meanwhile
        return ExplainUprobeError(r.error());
      }
    }
    Emit(events, {Event::Kind::kInfo, "Timing calls of " + slow_probes->target().symbol + " (" +
                                          slow_probes->target().file.string() + " +" +
                                          base::Hex(slow_probes->target().offset) +
                                          "): a snapshot when one takes " +
                                          base::FormatDuration(opts.slower_than_ns) + " or more"});
    points.clear();
  }
  if (!points.empty()) {
    if (auto r = source->ArmTriggers(points); !r) return ExplainThreadError(r.error(), prepared);
    for (const auto& p : points)
      Emit(events, {Event::Kind::kInfo, "Trigger armed: " + p.description});
  }

  trace::Manifest m;
  m.source = !prepared.emulator.empty() ? trace::Source::kEmulated
             : prepared.sampling        ? trace::Source::kSampled
                                        : trace::Source::kHardware;
  m.emulator = prepared.emulator;
  if (prepared.sampling) m.sampling = prepared.sampling_info;
  m.ptsnap_version = base::kVersion;
  m.created_unix_ns = UnixNowNs();
  m.command = opts.command;
  for (pid_t pid : pids) m.pids.push_back(pid);
  if (utsname u{}; ::uname(&u) == 0) m.kernel_release = u.release;
  m.cpu.vendor = prepared.cpu.vendor;
  m.cpu.family = prepared.cpu.family;
  m.cpu.model = prepared.cpu.model;
  m.cpu.stepping = prepared.cpu.stepping;
  if (prepared.cpu.leaf15) {
    m.cpu.cpuid_15_eax = prepared.cpu.leaf15->eax;
    m.cpu.cpuid_15_ebx = prepared.cpu.leaf15->ebx;
  }
  m.pt = prepared.pt;
  m.scope = prepared.scope;
  m.mode = prepared.mode;
  m.snapshot_size = prepared.aux_bytes;
  if (auto tc = source->time_conv()) m.time_conv = *tc;
  auto created = trace::TraceWriter::Create(trace_dir, std::move(m));
  if (!created) return std::move(created).error().AddContext("creating the trace directory");
  trace::TraceWriter writer = std::move(*created);

  Session session{opts, prepared, *source, writer, pids, 0, events};
  std::set<std::string> mapped_files;
  std::set<pid_t> vdso_pids(pids.begin(), pids.end());  // system-wide: every process seen
  std::vector<uint64_t> waiting;  // self-driven: tickets of asked snapshots, in the order asked
  bool source_ended = false;      // self-driven: the source took its last snapshot
  ProgramEnder ender;             // self-driven: the program outlived the recording
  auto announce_taken = [&] {
    for (const trace::Snapshot& snap : source->TakenSnapshots()) {
      Emit(events, {Event::Kind::kSnapshot, SnapshotLine(snap), snap.seq});
      // The source stopped recording (its single snapshot, --duration): the
      // program is ended as --after says.
      const bool single = snap.reason == trace::SnapshotReason::kTrigger ||
                          snap.reason == trace::SnapshotReason::kStopIndicator ||
                          snap.reason == trace::SnapshotReason::kSlowCall;
      if (snap.reason == trace::SnapshotReason::kDuration || (single && !opts.multi_snapshot))
        source_ended = true;
      if (snap.reason != trace::SnapshotReason::kSignal || waiting.empty()) continue;
      if (waiting.front() != 0) control.Complete(waiting.front(), snap.seq);
      waiting.erase(waiting.begin());
    }
  };
  bool resumed = false;           // run: the program is running (not stopped at its exec)
  uint64_t untraced_threads = 0;  // threads found while recording that could not be traced
  std::string first_untraced;     // and why the first one could not
  auto body = [&]() -> Result<void> {
    PTSNAP_TRY(source->Begin(writer));
    // Mappings that existed before the events were opened: the traced
    // processes' (attach), or every process's (system-wide). Processes that
    // exit meanwhile are skipped.
    std::vector<pid_t> synthesize;
    if (!run) PTSNAP_TRY(source->EnableSideband());
    if (system_wide) {
      synthesize = ListProcesses(base::RootPath());
    } else if (!run) {
      synthesize = pids;
    }
    for (pid_t pid : synthesize) {
      auto sb = SynthesizeSideband(pid, source->Now());
      if (!sb) {
        if (!system_wide) return std::move(sb).error();
        continue;
      }
      if (auto maps = sys::ReadProcMaps(base::RootPath(), pid)) {
        for (const auto& m : *maps)
          if (m.exec && !m.path.empty() && m.path[0] == '/') mapped_files.insert(m.path);
      }
      vdso_pids.insert(pid);
      PTSNAP_TRY(writer.AppendSideband(std::as_bytes(std::span(sb->data(), sb->size()))));
    }
    // The kernel image is copied before anything traced runs, as perf does:
    // the program is still stopped at its exec (run), the events are not
    // enabled yet (attach). Only `run -a` has its CPUs tracing already
    // (they must be on before the exec), so the copy itself is in that trace.
    CopyKernel(prepared, root, writer);
    if (run) {
      PTSNAP_TRY(child->Resume());
      resumed = true;
    } else {
      PTSNAP_TRY(source->EnableAll());
      if (system_wide) {
        Emit(events, {Event::Kind::kInfo, "Tracing CPUs " + FormatCpuList(prepared.cpus) +
                                              " system-wide. Press Ctrl-C to stop recording."});
      } else {
        Emit(events,
             {Event::Kind::kInfo, "Attached to " + std::to_string(source->traced_threads()) +
                                      " thread(s). Press Ctrl-C to stop recording."});
      }
    }
    PTSNAP_TRY(writer.Flush());
    Emit(events, {Event::Kind::kStarted, "Recording."});

    auto take_trigger = [&](const TriggerHit& h) -> Result<void> {
      auto seq =
          session.TakeSnapshot(IsStopIndicator(h.symbol) ? trace::SnapshotReason::kStopIndicator
                                                         : trace::SnapshotReason::kTrigger,
                               h.symbol.empty() ? "addr:" + base::Hex(h.ip) : h.symbol, h.time,
                               h.tid, opts.multi_snapshot);
      if (!seq) return std::move(seq).error();
      return Ok();
    };
    const auto start = std::chrono::steady_clock::now();
    const uint64_t start_perf = source->Now();  // slow calls' "+T" counts from here
    auto last_flush = start;
    std::optional<trace::SnapshotReason> end_reason;
    std::string end_detail;
    bool recording = true;
    std::vector<pid_t> gone;
    bool stop_sent = false;  // self-driven
    while (recording) {
      // Sleeps until a trigger's breakpoint fires, a request arrives, or
      // the next drain is due. A hit is handled first: Snapshot disables PT
      // before the sideband and the streams are touched.
      std::vector<int> wake = source->WakeFds();
      if (slow_probes) slow_probes->AppendFds(wake);
      control.Wait(std::chrono::milliseconds(5), wake);
      if (slow_probes) {
        bool ended = false;
        for (const SlowCall& c : slow_probes->Poll()) {
          PTSNAP_TRY(session.TakeSnapshot(trace::SnapshotReason::kSlowCall,
                                          SlowCallDetail(opts.trigger, c, start_perf), c.end, c.tid,
                                          opts.multi_snapshot, &c));
          if (!opts.multi_snapshot) {
            ended = true;
            break;
          }
        }
        if (ended) break;
      }
      PTSNAP_ASSIGN_OR_RETURN(auto hits, source->PollTriggers());
      if (!hits.empty()) {
        PTSNAP_TRY(take_trigger(hits.front()));
        if (!opts.multi_snapshot) break;
      }
      PTSNAP_ASSIGN_OR_RETURN(SidebandEvents ev, source->DrainSideband(writer));
      mapped_files.insert(ev.mapped_files.begin(), ev.mapped_files.end());
      announce_taken();
      for (auto [pid, tid] : ev.new_threads) {
        if (system_wide) vdso_pids.insert(pid);
        if (slow_probes && !pids.empty() && pid == pids[0]) {
          if (auto r = slow_probes->AddThread(tid); !r)
            PTSNAP_LOG(kInfo) << "new thread " << tid
                              << " not timed for --slower-than: " << r.error().ToString();
        }
        if (std::find(pids.begin(), pids.end(), pid) == pids.end() || source->HasThread(tid))
          continue;
        auto r = fd_budget.TakeForThread();
        if (r) r = source->AddThread(pid, tid, trace_threads && opts.multi_thread);
        if (!r) {
          // A thread that has exited already is no loss; any other refusal
          // (no fds left, no locked memory) leaves it out of the trace.
          const Error why = ExplainThreadError(r.error(), prepared);
          if (why.kind() != ErrorKind::kProcessGone && untraced_threads++ == 0) {
            first_untraced = why.ToString();
            Emit(events, {Event::Kind::kWarning, "new thread " + std::to_string(tid) +
                                                     " is not traced: " + first_untraced});
          } else {
            PTSNAP_LOG(kInfo) << "new thread " << tid << " not traced: " << why.ToString();
          }
        }
      }
      for (pid_t tid : ev.exited_threads) {
        if (slow_probes) slow_probes->ThreadExited(tid);
        if (std::find(pids.begin(), pids.end(), tid) != pids.end()) gone.push_back(tid);
        PTSNAP_TRY(source->ThreadExited(tid, writer));
      }
      if (prepared.mode == trace::Mode::kFull) {
        PTSNAP_TRY(source->DrainAux(writer));
        // The streams grow on disk at every drain; the manifest that lists
        // their sizes is rewritten about once a second.
        if (std::chrono::steady_clock::now() - last_flush >= std::chrono::seconds(1)) {
          PTSNAP_TRY(writer.Flush());
          last_flush = std::chrono::steady_clock::now();
        }
      }

      // Asked for (SIGUSR2, Recording::Snapshot): the recording goes on
      // after it unless it was the single snapshot of a triggerless run.
      bool single_taken = false;
      for (const Control::Pending& req : control.TakeSnapshotRequests()) {
        if (self_driven) {
          // Taken by the source when it next can; TakenSnapshots completes it.
          if (auto r = source->RequestSnapshot(req.ticket == 0 ? "SIGUSR2" : req.reason); !r) {
            control.Complete(req.ticket, std::move(r).error());
          } else {
            waiting.push_back(req.ticket);
          }
          continue;
        }
        auto seq = session.TakeSnapshot(trace::SnapshotReason::kSignal,
                                        req.ticket == 0 ? "SIGUSR2" : req.reason, 0, 0,
                                        opts.multi_snapshot || req.ticket != 0);
        control.Complete(req.ticket, seq);
        if (!seq) return std::move(seq).error();
        if (!opts.multi_snapshot && req.ticket == 0) single_taken = true;
      }
      if (single_taken) break;
      if (control.stop_requested() && self_driven) {
        // The source takes the last snapshot and stops the program; the
        // recording ends when the program has exited.
        if (!stop_sent) source->RequestStop();
        stop_sent = true;
        outcome.interrupted = true;
      } else if (control.stop_requested()) {
        end_reason = trace::SnapshotReason::kCtrlC;
        outcome.interrupted = true;
        recording = false;
      } else if (opts.duration && !self_driven &&
                 std::chrono::steady_clock::now() - start >= *opts.duration) {
        end_reason = trace::SnapshotReason::kDuration;
        end_detail = std::to_string(opts.duration->count()) + "ms";
        recording = false;
      }
      if (recording && run && self_driven && child) {
        // The source ends the recording only when the program exits: a stop
        // request gives the program kStopGrace to exit by the signal the
        // source passed on, and --after=kill ends it once the source took
        // its last snapshot.
        const auto now = ProgramEnder::Clock::now();
        if (stop_sent) ender.Arm(now + kStopGrace);
        if (source_ended && !stop_sent && opts.after == AfterRecording::kDetach) {
          // The program runs on; the source records no more (EndProgram
          // lets the program go once the trace is written).
          PTSNAP_TRY(source->Detach());
          recording = false;
        }
        if (source_ended && opts.after == AfterRecording::kKill) {
          if (!ender.armed())
            Emit(events, {Event::Kind::kInfo, "Recording finished; ending " + opts.command[0] +
                                                  " (--after=kill: SIGTERM, then SIGKILL)."});
          ender.Arm(now);
        }
        ender.Tick(child->pid());
      }
      if (recording && run) {
        int status = 0;
        if (child->Poll(&status)) {
          if (self_driven) {
            PTSNAP_TRY(source->TargetExited(status));
          }
          outcome.program_status = status;
          if (const int sig = child->term_signal(); sig != 0) {
            // Killed by a signal (a crash, abort, a kill): the last
            // snapshot names it (a self-driven source took its own).
            end_reason = trace::SnapshotReason::kFatalSignal;
            end_detail = base::SignalName(sig);
          } else {
            end_reason = trace::SnapshotReason::kExit;
            end_detail = "status " + std::to_string(status);
          }
          recording = false;
          Emit(events,
               {Event::Kind::kTargetExited,
                opts.command[0] + " exited with status " + std::to_string(status), 0, status});
        }
      } else if (recording && !run && !pids.empty()) {
        bool all_gone = true;
        for (pid_t pid : pids) {
          const bool exited = std::find(gone.begin(), gone.end(), pid) != gone.end();
          if (!exited && ProcessExists(pid)) all_gone = false;
        }
        if (all_gone) {
          end_reason = trace::SnapshotReason::kExit;
          recording = false;
          Emit(events, {Event::Kind::kTargetExited, "every traced process exited"});
        }
      }
    }
    // Slow calls that returned after the loop's last look (the program
    // exited right after one): their snapshots come before the last one.
    if (slow_probes && end_reason && prepared.mode == trace::Mode::kSnapshot &&
        (opts.multi_snapshot || session.seq == 0)) {
      for (const SlowCall& c : slow_probes->Poll()) {
        PTSNAP_TRY(session.TakeSnapshot(trace::SnapshotReason::kSlowCall,
                                        SlowCallDetail(opts.trigger, c, start_perf), c.end, c.tid,
                                        opts.multi_snapshot, &c));
        if (!opts.multi_snapshot) break;
      }
    }
    // Likewise a trigger hit after the loop's last PollTriggers: a thread
    // that calls it and exits, or the program's last call before its exit,
    // within one turn of the loop. Its snapshot replaces the exit's.
    if (!self_driven && end_reason && prepared.mode == trace::Mode::kSnapshot &&
        (opts.multi_snapshot || session.seq == 0)) {
      PTSNAP_ASSIGN_OR_RETURN(auto hits, source->PollTriggers());
      for (const TriggerHit& h : hits) {
        PTSNAP_TRY(take_trigger(h));
        if (!opts.multi_snapshot) break;
      }
    }
    PTSNAP_ASSIGN_OR_RETURN(SidebandEvents last, source->DrainSideband(writer));
    mapped_files.insert(last.mapped_files.begin(), last.mapped_files.end());
    if (self_driven) {
      // Its last snapshots (at the program's exit) were read by
      // TargetExited and that DrainSideband.
      announce_taken();
      PTSNAP_TRY(source->Finish(writer));
    } else if (end_reason && prepared.mode == trace::Mode::kSnapshot &&
               (opts.trigger.empty() || session.seq == 0)) {
      // A fatal signal's snapshot names the program's main thread (which
      // thread it killed is not known here).
      const uint32_t tid = end_reason == trace::SnapshotReason::kFatalSignal && child
                               ? static_cast<uint32_t>(child->pid())
                               : 0;
      PTSNAP_TRY(session.TakeSnapshot(*end_reason, end_detail, 0, tid, false));
    }
    if (prepared.mode == trace::Mode::kFull && !self_driven) {
      PTSNAP_TRY(source->Finish(writer));
      PTSNAP_TRY(session.TakeSnapshot(trace::SnapshotReason::kFull,
                                      end_reason ? std::string(trace::ToString(*end_reason)) : "",
                                      0, 0, false));
      uint64_t truncated = 0, lost = 0;
      // A full-execution recording's streams all stay in the writer's memory.
      for (const trace::Stream& s : writer.manifest().streams) {
        truncated += s.truncated;
        lost += s.lost_bytes;
      }
      if (truncated > 0 || lost > 0)
        Emit(events, {Event::Kind::kDataLost,
                      "PT data was lost: the AUX buffer filled " + std::to_string(truncated) +
                          " time(s) before ptsnap drained it" +
                          (lost > 0 ? " and " + std::to_string(lost) + " bytes were skipped" : "") +
                          "; the trace has gaps there (`truncated` and `lost_bytes` per stream in "
                          "manifest.json); a larger --snapshot-size helps"});
    }
    // A trigger that never fired leaves the end's snapshot: say so, or the
    // user takes it for the trigger's (an addr: trigger on code that never
    // runs once did that silently).
    if (!opts.trigger.empty() && prepared.mode == trace::Mode::kSnapshot) {
      const auto& snaps = writer.snapshot_reasons();
      const bool fired = std::any_of(snaps.begin(), snaps.end(), [](trace::SnapshotReason r) {
        return r == trace::SnapshotReason::kTrigger || r == trace::SnapshotReason::kStopIndicator ||
               r == trace::SnapshotReason::kSlowCall;
      });
      if (!fired && !snaps.empty())
        outcome.warnings.push_back("the trigger " + opts.trigger + " never fired (" +
                                   (opts.slower_than_ns != 0
                                        ? std::string("no call was slower than --slower-than")
                                        : std::string("the code never ran")) +
                                   "): the snapshot was taken at the end instead (" +
                                   std::string(trace::ToString(snaps.back())) + ")");
    }
    if (untraced_threads != 0)
      outcome.warnings.push_back(std::to_string(untraced_threads) +
                                 " thread(s) created while recording were not traced (the "
                                 "trace has none of their samples or PT); the first: " +
                                 first_untraced);
    if (slow_probes) {
      const SlowCallTracker& t = slow_probes->tracker();
      if (t.skipped() != 0)
        outcome.warnings.push_back(
            std::to_string(t.skipped()) + " slow call(s) of " + opts.trigger +
            " were not snapshotted: --multi-snapshot takes at most one slow-call snapshot per "
            "thread every " +
            base::FormatDuration(SlowCallGapNs(opts.slower_than_ns)));
      if (slow_probes->lost() != 0)
        outcome.warnings.push_back("the slow-call probes lost " +
                                   std::to_string(slow_probes->lost()) +
                                   " batch(es) of hits (the function is called faster than ptsnap "
                                   "reads them): some slow calls may have been missed");
      if (session.seq == 0 || end_reason)
        PTSNAP_LOG(kInfo) << "slow-call probes: " << t.calls() << " call(s) of " << opts.trigger
                          << " timed, " << t.unmatched_returns() << " return(s) without entry";
    }
    return Ok();
  };
  auto result = body();
  if (!result && self_driven) (void)source->Finish(writer);  // what it wrote, tidied up
  // A runtime's jitdump (node --perf-prof, the JVM agent, .NET) shows as
  // the marker mapping of its file: copied as a jitdump, not a binary.
  for (auto it = mapped_files.begin(); it != mapped_files.end();) {
    const auto pid = trace::JitdumpMarkerPid(*it);
    if (!pid) {
      ++it;
      continue;
    }
    if (auto r = writer.CopyJitdump(*pid, *it); !r)
      outcome.warnings.push_back("jitdump not copied: " + r.error().ToString());
    it = mapped_files.erase(it);
  }
  // What the trace needs to decode, also when recording failed: the mapped
  // files' build-ids (and copies), the vDSO, the JIT maps as they are now
  // (docs/trace-format.md, binaries/, vdso/, jit/).
  RecordBinaries(writer, mapped_files, opts.copy_binaries,
                 std::vector<pid_t>(vdso_pids.begin(), vdso_pids.end()), source->host_vdso());
  // Every snapshot taken is in the manifest (a self-driven source's too).
  outcome.snapshots = writer.snapshot_count();
  if (auto r = writer.CopyPerfMaps(writer.manifest().pids); !r)
    outcome.warnings.push_back("JIT symbol maps not copied: " + r.error().ToString());
  if (!result) {
    Error err = std::move(result).error();
    // The cause stays in the manifest (`ptsnap info` shows it).
    (void)writer.Finish(trace::State::kInterrupted, err.ToString());
    // The emulator's errors say themselves where its data is.
    if (self_driven) return err;
    const std::string kept = "what was captured is kept in " + trace_dir.string();
    if (err.errnum() == ENOSPC) {
      err = Error("the file system holding " + trace_dir.string() + " is full (" + err.ToString() +
                  "): recording stopped; " + kept +
                  " and decodes: free space or choose another --trace-dir");
    } else {
      err.AddContext("recording (" + kept + ")");
    }
    // A program that was running when recording failed runs on untraced,
    // as it would have without ptsnap, and `run` waits for it as usual.
    int status = 0;
    if (run && child && resumed && !child->Poll(&status)) {
      source.reset();  // its events close: nothing is traced any more
      slow_probes.reset();
      Emit(events, {Event::Kind::kWarning, err.ToString() + "; " + opts.command[0] +
                                               " runs on untraced; waiting for it to exit"});
      status = EndProgram(*child, opts, AfterRecording::kWait, control, false, events, false);
      err = Error(err.ToString() + "; " + opts.command[0] +
                  " ran on untraced and exited with status " + std::to_string(status))
                .WithKind(err.kind());
    }
    return err;
  }
  // docs/trace-format.md: "interrupted" after Ctrl-C (or a source that fell
  // short of its end), else "complete".
  PTSNAP_TRY(writer.Finish(outcome.interrupted || !source->complete() ? trace::State::kInterrupted
                                                                      : trace::State::kComplete));
  if (run && child) {
    int status = 0;
    if (!child->Poll(&status))
      status = EndProgram(*child, opts, opts.after, control, outcome.interrupted, events);
    outcome.program_status = status;
  }
  return outcome;
}

}  // namespace ptsnap::record
