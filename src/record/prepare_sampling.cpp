// PrepareSampling (--sampling: the event, callgraph, frequency and ring
// sizes) and its arithmetic.
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
  PTSNAP_ASSIGN_OR_RETURN(HostFacts host, ReadHostFacts(opts, root, "sample", p));
  const sys::Privileges& priv = p.privileges;
  const std::optional<sys::KernelVersion>& kv = host.kernel;
  const Result<std::vector<int>>& online = host.online;
  const bool kernel = opts.scope != trace::Scope::kUser;
  const bool user = opts.scope != trace::Scope::kKernel;
  const bool system_wide = opts.all_cpus || !opts.cpus.empty();
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

}  // namespace ptsnap::record
