#include "record/hardware_source.h"

#include <sys/mman.h>
#include <x86intrin.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <utility>

#include "base/log.h"
#include "perf/attr.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

std::string Tid(pid_t tid) { return "tid " + std::to_string(tid); }

}  // namespace

void NoteSidebandRecord(std::span<const std::byte> rec, SidebandEvents& ev) {
  perf_event_header h;
  if (rec.size() < sizeof(h)) return;
  std::memcpy(&h, rec.data(), sizeof(h));
  if (h.type == PERF_RECORD_MMAP2) {
    auto parsed = trace::ParseRecord(rec);
    if (parsed)
      if (auto* m = std::get_if<trace::Mmap2>(&parsed->record.body);
          m != nullptr && (m->prot & PROT_EXEC) != 0 && !m->filename.empty() &&
          m->filename[0] == '/')
        ev.mapped_files.push_back(m->filename);
  }
  if ((h.type == PERF_RECORD_FORK || h.type == PERF_RECORD_EXIT) && rec.size() >= sizeof(h) + 16) {
    uint32_t f[4];  // pid, ppid, tid, ptid
    std::memcpy(f, rec.data() + sizeof(h), sizeof(f));
    if (h.type == PERF_RECORD_FORK) {
      ev.new_threads.emplace_back(static_cast<pid_t>(f[0]), static_cast<pid_t>(f[2]));
    } else {
      ev.exited_threads.push_back(static_cast<pid_t>(f[2]));
    }
  }
}

std::string KernelSidebandWarning(const std::string& why) {
  return "kernel code that other tasks patch while recording (static keys, ftrace, kprobes, BPF "
         "programs) may decode wrongly, with the bytes of the kcore copy: their TEXT_POKE and "
         "KSYMBOL records need a CPU-wide event, and " +
         why + "; root or --all-cpus records them";
}

AuxRestart AuxRestartAfterDrain(bool truncated_seen, bool finishing) {
  if (finishing) return AuxRestart::kNone;
  return truncated_seen ? AuxRestart::kDisableEnable : AuxRestart::kEnable;
}

trace::TimeConv ReadTimeConv(const perf_event_mmap_page* page) {
  trace::TimeConv tc;
  auto* lock = const_cast<__u32*>(&page->lock);
  for (int tries = 0; tries < 1000; ++tries) {
    const uint32_t seq = std::atomic_ref<__u32>(*lock).load(std::memory_order_acquire);
    tc.time_zero = page->time_zero;
    tc.time_mult = page->time_mult;
    tc.time_shift = page->time_shift;
    tc.cap_user_time_zero = page->cap_user_time_zero;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (std::atomic_ref<__u32>(*lock).load(std::memory_order_relaxed) == seq) break;
  }
  return tc;
}

Result<std::unique_ptr<HardwarePtSource>> HardwarePtSource::Create(HardwareConfig config) {
  auto source = std::unique_ptr<HardwarePtSource>(new HardwarePtSource(std::move(config)));
  source->OpenKernelSideband();
  return source;
}

void HardwarePtSource::OpenKernelSideband() {
  if (!config_.kernel_sideband_attr) return;
  const perf_event_attr& attr = *config_.kernel_sideband_attr;
  for (int cpu : config_.kernel_sideband_cpus) {
    Thread t;
    t.pid = -1;
    t.tid = -1;
    t.cpu = cpu;
    // perf_event_open(pid -1, cpu): every task on the CPU, so every task's
    // code patches and BPF loads (kernel/events/core.c perf_iterate_sb).
    auto r =
        OpenSidebandOnly(t, attr, "KSYMBOL/TEXT_POKE (dummy) event on CPU " + std::to_string(cpu),
                         config_.kernel_sideband_pages);
    if (!r) {
      PTSNAP_LOG(kWarning) << KernelSidebandWarning("opening one failed: " + r.error().ToString());
      kernel_sideband_.clear();
      config_.tracking_attr.ksymbol = attr.ksymbol;
      config_.tracking_attr.text_poke = attr.text_poke;
      return;
    }
    kernel_sideband_.push_back(std::move(t));
  }
}

size_t HardwarePtSource::traced_threads() const {
  size_t n = 0;
  for (const auto& [key, t] : units_) n += t.cpu < 0 && t.tracking != nullptr;
  return n;
}

size_t HardwarePtSource::traced_cpus() const {
  size_t n = 0;
  for (const auto& [key, t] : units_) n += t.cpu >= 0;
  return n;
}

Result<void> HardwarePtSource::AddBreakpoints(Thread& t, const std::vector<TriggerPoint>& points) {
  if (t.cpu >= 0) return Ok();  // a CPU-wide breakpoint would fire in every process
  // A thread without PT (breakpoints only) has no group to pause.
  const int pause_group = config_.trigger_aux_pause && t.pt ? t.pt->fd() : -1;
  return t.breakpoints.Add(t.tid, points, config_.single_shot_triggers, pause_group);
}

Result<std::vector<perf::PerfEvent>> OpenAuxActionProbes(const AuxActionProbes& probes,
                                                         int leader_fd, pid_t pid, int cpu,
                                                         const std::string& where,
                                                         const GroupMemberOpener& open) {
  std::vector<perf::PerfEvent> out;
  // Resume first: a pause without its resume open would leave the event
  // paused for good, which is what it starts as anyway.
  for (bool ret : {false, true}) {
    perf_event_attr attr = ret ? probes.pause : probes.resume;
    // perf_uprobe_init copies the path (strndup_user) during the open.
    attr.config1 = reinterpret_cast<uintptr_t>(probes.path.c_str());
    const std::string what =
        std::string(ret ? "return probe (aux_pause)" : "entry probe (aux_resume)") + " on " +
        probes.symbol + " " + where;
    auto ev = open ? open(attr, pid, cpu, leader_fd, what)
                   : perf::PerfEvent::Open(attr, pid, cpu, perf::MapSpec{}, what, leader_fd);
    if (!ev) return std::move(ev).error();
    out.push_back(std::move(*ev));
  }
  return out;
}

Result<void> HardwarePtSource::OpenEvents(Thread& t, const std::string& what) {
  // perf_event_open's (pid, cpu): (tid, -1) follows a thread over CPUs;
  // (-1, cpu) is every task on one CPU (system-wide).
  const pid_t pid_arg = t.cpu >= 0 ? -1 : t.tid;
  if (config_.pt_attr) {
    perf::MapSpec map{config_.data_pages, config_.aux_pages, config_.full_execution};
    auto pt =
        perf::PerfEvent::Open(*config_.pt_attr, pid_arg, t.cpu, map, "intel_pt event " + what);
    if (!pt) return std::move(pt).error();
    t.pt = std::make_unique<perf::PerfEvent>(std::move(*pt));
    // Address filters go on the disabled event, before it is enabled
    // (pt-kernel-interface.md 5.1; perf sets them the same way).
    if (!config_.addr_filter.empty()) PTSNAP_TRY(t.pt->SetFilter(config_.addr_filter));
    // --only-in: the group's members, on the leader's (pid, cpu).
    if (config_.only_in) {
      PTSNAP_ASSIGN_OR_RETURN(
          t.aux_probes, OpenAuxActionProbes(*config_.only_in, t.pt->fd(), pid_arg, t.cpu, what));
    }
    auto tr = perf::PerfEvent::Open(config_.tracking_attr, pid_arg, t.cpu, perf::MapSpec{},
                                    "sideband (dummy) event " + what);
    if (!tr) return std::move(tr).error();
    t.tracking = std::make_unique<perf::PerfEvent>(std::move(*tr));
    // SET_OUTPUT needs the same task (per-thread) or the same CPU.
    PTSNAP_TRY(t.tracking->SetOutput(*t.pt));
    t.ring = std::make_unique<perf::DataRingReader>(t.pt->header(), t.pt->data());
    if (config_.full_execution) {
      trace::Stream info;
      info.pid = t.pid;
      info.tid = t.tid;
      info.cpu = t.cpu;
      info.snapshot = 0;
      t.full = std::make_unique<AuxStreamer>(t.pt->header(), t.pt->aux(), info);
    } else {
      t.snapshot = std::make_unique<perf::AuxSnapshotReader>(t.pt->header(), t.pt->aux());
    }
  } else {
    PTSNAP_TRY(OpenSidebandOnly(t, config_.tracking_attr, what, config_.data_pages));
  }
  return Ok();
}

Result<void> HardwarePtSource::OpenSidebandOnly(Thread& t, const perf_event_attr& attr,
                                                const std::string& what, size_t pages) {
  const pid_t pid_arg = t.cpu >= 0 ? -1 : t.tid;
  auto tr = perf::PerfEvent::Open(attr, pid_arg, t.cpu, perf::MapSpec{pages, 0, false},
                                  "sideband (dummy) event " + what);
  if (!tr) return std::move(tr).error();
  t.tracking = std::make_unique<perf::PerfEvent>(std::move(*tr));
  t.ring = std::make_unique<perf::DataRingReader>(t.tracking->header(), t.tracking->data());
  return Ok();
}

Result<void> HardwarePtSource::AddThread(pid_t pid, pid_t tid, bool trace_pt) {
  if (units_.count(Key{-1, tid}) != 0) return Ok();
  Thread t;
  t.pid = pid;
  t.tid = tid;
  if (trace_pt) {
    PTSNAP_TRY(OpenEvents(t, "for " + Tid(tid)));
  } else if (config_.sideband_for_untraced_threads) {
    // A thread's mmaps and comms are a few records: one data page (8 KiB
    // locked with the header page) keeps many threads inside an
    // unprivileged user's mlock budget. Not fatal: the thread then only
    // hosts its breakpoints, as before.
    if (auto r =
            OpenSidebandOnly(t, config_.tracking_attr, "for " + Tid(tid) + " (sideband only)", 1);
        !r)
      PTSNAP_LOG(kInfo) << "no sideband for " << Tid(tid) << ": " << r.error().ToString();
  }
  PTSNAP_TRY(AddBreakpoints(t, triggers_));
  if (started_) {
    // A thread found after the start (FORK sideband): its attrs carry
    // enable_on_exec, which will never fire now, so enable it here.
    if (t.tracking) PTSNAP_TRY(t.tracking->Enable());
    if (t.pt) PTSNAP_TRY(t.pt->Enable());
  }
  units_.emplace(Key{-1, tid}, std::move(t));
  return Ok();
}

Result<void> HardwarePtSource::AddCpu(int cpu) {
  if (units_.count(Key{cpu, -1}) != 0) return Ok();
  Thread t;
  t.pid = -1;
  t.tid = -1;
  t.cpu = cpu;
  PTSNAP_TRY(OpenEvents(t, "on CPU " + std::to_string(cpu)));
  if (started_) {
    if (t.tracking) PTSNAP_TRY(t.tracking->Enable());
    if (t.pt) PTSNAP_TRY(t.pt->Enable());
  }
  units_.emplace(Key{cpu, -1}, std::move(t));
  return Ok();
}

Result<void> HardwarePtSource::ArmTriggers(const std::vector<TriggerPoint>& points) {
  for (auto& [key, t] : units_) PTSNAP_TRY(AddBreakpoints(t, points));
  triggers_.insert(triggers_.end(), points.begin(), points.end());
  return Ok();
}

Result<void> HardwarePtSource::EnableSideband() {
  for (auto& [key, t] : units_)
    if (t.tracking) PTSNAP_TRY(t.tracking->Enable());
  return Ok();
}

Result<void> HardwarePtSource::EnableAll() {
  started_ = true;
  for (auto& [key, t] : units_) {
    // Tracking first, so the PT event's ITRACE_START finds its mappings.
    if (t.tracking) PTSNAP_TRY(t.tracking->Enable());
    if (t.pt) PTSNAP_TRY(t.pt->Enable());
  }
  return Ok();
}

Result<SidebandEvents> HardwarePtSource::DrainSideband(trace::TraceWriter& writer) {
  SidebandEvents ev;
  batch_.clear();
  // The CPU-wide KSYMBOL/TEXT_POKE rings first; sideband.data is read back
  // sorted by time (TraceReader::ReadSideband), so their records take their
  // place among the threads' whatever the order of the rings.
  for (Thread& t : kernel_sideband_) {
    auto n = t.ring->Drain([&](std::span<const std::byte> rec) {
      batch_.insert(batch_.end(), rec.begin(), rec.end());
      (void)perf::AccountRecord(rec, stats_);  // LOST records count; no AUX here
    });
    if (!n)
      PTSNAP_LOG(kWarning) << "kernel sideband of CPU " << t.cpu << ": " << n.error().ToString();
    if (n) ev.records += *n;
  }
  for (auto& [key, th] : units_) {
    Thread& t = th;  // clang 14 lambdas cannot capture structured bindings
    if (!t.ring) continue;
    bool reenable = false;
    auto n = t.ring->Drain([&](std::span<const std::byte> rec) {
      batch_.insert(batch_.end(), rec.begin(), rec.end());
      reenable |= perf::AccountRecord(rec, stats_);
      NoteSidebandRecord(rec, ev);
      perf_event_header h;
      std::memcpy(&h, rec.data(), sizeof(h));
      if (h.type == PERF_RECORD_AUX && t.full) {
        auto parsed = trace::ParseRecord(rec);
        if (parsed)
          if (auto* a = std::get_if<trace::Aux>(&parsed->record.body)) t.full->NoteAux(*a, writer);
      }
    });
    const std::string who = t.cpu >= 0 ? "CPU " + std::to_string(t.cpu) : Tid(t.tid);
    if (!n) PTSNAP_LOG(kWarning) << "sideband of " << who << ": " << n.error().ToString();
    if (n) ev.records += *n;
    if (reenable && t.full) {
      // The kernel disabled the event after TRUNCATED (perf_aux_output_end):
      // make room and restart it now rather than at the next DrainAux.
      t.truncated = true;
      PTSNAP_TRY(DrainAndRestart(t, writer));
    } else if (reenable && t.pt && !finishing_) {
      PTSNAP_TRY(t.pt->Enable());
    }
  }
  if (!batch_.empty()) PTSNAP_TRY(writer.AppendSideband(batch_));
  writer.manifest().lost_records = stats_.lost_records;
  writer.manifest().aux_truncated = stats_.aux_truncated;
  return ev;
}

Result<void> HardwarePtSource::DrainAndRestart(Thread& t, trace::TraceWriter& writer) {
  // Make room first: enabling onto a full buffer is disabled again at once.
  PTSNAP_TRY(t.full->Drain(writer));
  if (!t.pt) return Ok();
  switch (AuxRestartAfterDrain(t.truncated, finishing_)) {
    case AuxRestart::kNone: return Ok();
    case AuxRestart::kDisableEnable: PTSNAP_TRY(t.pt->Disable()); break;
    case AuxRestart::kEnable: break;
  }
  t.truncated = false;
  return t.pt->Enable();
}

Result<void> HardwarePtSource::DrainAux(trace::TraceWriter& writer) {
  for (auto& [key, t] : units_)
    if (t.full) PTSNAP_TRY(DrainAndRestart(t, writer));
  return Ok();
}

Result<std::vector<TriggerHit>> HardwarePtSource::PollTriggers() {
  return PollUnitsKeepingHits(units_, late_hits_);
}

Result<void> HardwarePtSource::ThreadExited(pid_t tid, trace::TraceWriter& writer) {
  auto it = units_.find(Key{-1, tid});
  if (it == units_.end() || it->second.exited) return Ok();
  Thread& t = it->second;
  if (t.full) {
    PTSNAP_TRY(t.full->Drain(writer));
    CloseUnitKeepingHits(units_, it->first, late_hits_);
    return Ok();
  }
  if (!t.snapshot) {  // breakpoints or sideband only: nothing to keep
    CloseUnitKeepingHits(units_, it->first, late_hits_);
    return Ok();
  }
  t.exited = true;
  exited_.push_back(it->first);
  if (exited_.size() > kMaxExitedKept) {
    CloseUnitKeepingHits(units_, exited_.front(), late_hits_);
    exited_.erase(exited_.begin());
  }
  return Ok();
}

std::vector<int> HardwarePtSource::WakeFds() const {
  std::vector<int> fds;
  for (const auto& [key, t] : units_) t.breakpoints.AppendFds(fds);
  return fds;
}

Result<void> RunSnapshot(const SnapshotSteps& steps, bool resume) {
  auto disabled = steps.disable_all();
  auto copies =
      disabled ? steps.copy_all() : std::vector<std::pair<trace::Stream, std::vector<std::byte>>>{};
  if (resume) PTSNAP_TRY(steps.enable_all());
  if (!disabled) return disabled;
  for (const auto& [stream, bytes] : copies) PTSNAP_TRY(steps.write(stream, bytes));
  return Ok();
}

Result<void> HardwarePtSource::Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) {
  // Every PT event (every CPU's, system-wide) stops first; RunSnapshot has
  // the order and why.
  SnapshotSteps steps;
  steps.disable_all = [&]() -> Result<void> {
    for (auto& [key, t] : units_)
      if (t.pt) PTSNAP_TRY(t.pt->Disable());
    return Ok();
  };
  steps.copy_all = [&] {
    std::vector<std::pair<trace::Stream, std::vector<std::byte>>> out;
    for (auto& [key, t] : units_) {
      if (!t.snapshot) continue;
      perf::AuxSnapshot snap = t.snapshot->Copy();
      if (snap.bytes.empty()) continue;
      trace::Stream s;
      s.pid = t.pid;
      s.tid = t.tid;
      s.cpu = t.cpu;
      s.snapshot = seq;
      s.wrapped = snap.wrapped;
      out.emplace_back(s, std::move(snap.bytes));
    }
    return out;
  };
  steps.enable_all = [&]() -> Result<void> {
    for (auto& [key, t] : units_)
      if (t.pt) PTSNAP_TRY(t.pt->Enable());
    return Ok();
  };
  steps.write = [&](const trace::Stream& s, const std::vector<std::byte>& bytes) -> Result<void> {
    // Listed by the AddSnapshot that follows (Session::TakeSnapshot).
    auto id = writer.AddStreamUnlisted(s, bytes);
    if (!id) return std::move(id).error();
    return Ok();
  };
  auto r = RunSnapshot(steps, resume);
  // Exited threads' rings are in this snapshot now: close them.
  for (const Key& k : exited_) CloseUnitKeepingHits(units_, k, late_hits_);
  exited_.clear();
  return r;
}

Result<void> HardwarePtSource::Finish(trace::TraceWriter& writer) {
  if (!config_.full_execution) return Ok();
  finishing_ = true;
  for (auto& [key, t] : units_)
    if (t.pt) PTSNAP_TRY(t.pt->Disable());
  // The disable emits the last AUX records; count them, then drain.
  PTSNAP_TRY(DrainSideband(writer));
  PTSNAP_TRY(DrainAux(writer));
  return writer.Flush();
}

std::optional<trace::TimeConv> HardwarePtSource::time_conv() const {
  for (const auto& [key, t] : units_) {
    if (t.pt) return ReadTimeConv(t.pt->header());
    if (t.tracking && t.tracking->mapped()) return ReadTimeConv(t.tracking->header());
  }
  return std::nullopt;
}

uint64_t HardwarePtSource::Now() const { return PerfClockNow(time_conv()); }

uint64_t PerfClockNow(const std::optional<trace::TimeConv>& tc) {
  if (tc && tc->cap_user_time_zero) return trace::TscToPerfTime(*tc, __rdtsc());
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace ptsnap::record
