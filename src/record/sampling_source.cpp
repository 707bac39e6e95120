#include "record/sampling_source.h"

#include <cstring>
#include <utility>

#include "base/log.h"
#include "record/hardware_source.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

std::string Who(pid_t tid, int cpu) {
  return cpu >= 0 ? "CPU " + std::to_string(cpu) : "tid " + std::to_string(tid);
}

// Adds what one drain saw to what the next DrainSideband reports.
void Carry(const SidebandEvents& from, SidebandEvents& to) {
  to.new_threads.insert(to.new_threads.end(), from.new_threads.begin(), from.new_threads.end());
  to.exited_threads.insert(to.exited_threads.end(), from.exited_threads.begin(),
                           from.exited_threads.end());
  to.mapped_files.insert(to.mapped_files.end(), from.mapped_files.begin(), from.mapped_files.end());
  to.records += from.records;
}

}  // namespace

Result<std::unique_ptr<SamplingSource>> SamplingSource::Create(SamplingConfig config) {
  return std::unique_ptr<SamplingSource>(new SamplingSource(config));
}

size_t SamplingSource::traced_threads() const {
  size_t n = 0;
  for (const auto& [key, u] : units_) n += u.cpu < 0 && u.sampled;
  return n;
}

Result<void> SamplingSource::Open(Unit& u, const perf_event_attr& attr, size_t pages,
                                  const std::string& what) {
  // (tid, -1) follows a thread over CPUs; (-1, cpu) is every task on a CPU.
  const pid_t pid_arg = u.cpu >= 0 ? -1 : u.tid;
  auto ev = perf::PerfEvent::Open(attr, pid_arg, u.cpu, perf::MapSpec{pages, 0, false}, what);
  if (!ev) return std::move(ev).error();
  u.event = std::make_unique<perf::PerfEvent>(std::move(*ev));
  u.ring = std::make_unique<perf::DataRingReader>(u.event->header(), u.event->data());
  return Ok();
}

Result<void> SamplingSource::AddThread(pid_t pid, pid_t tid, bool trace) {
  if (units_.count(Key{-1, tid}) != 0) return Ok();
  Unit u;
  u.pid = pid;
  u.tid = tid;
  if (trace) {
    PTSNAP_TRY(Open(u, config_.sampling_attr, config_.data_pages,
                    "sampling event for tid " + std::to_string(tid)));
    u.sampled = true;
    if (!config_.full_execution) u.samples = std::make_unique<SampleRing>(config_.snapshot_bytes);
  } else if (config_.sideband_for_untraced_threads) {
    // As HardwarePtSource: one data page keeps many threads in budget; not fatal.
    if (auto r = Open(u, config_.tracking_attr, 1,
                      "sideband (dummy) event for tid " + std::to_string(tid) + " (sideband only)");
        !r)
      PTSNAP_LOG(kInfo) << "no sideband for tid " << tid << ": " << r.error().ToString();
  }
  if (!triggers_.empty())
    PTSNAP_TRY(u.breakpoints.Add(tid, triggers_, config_.single_shot_triggers));
  // A thread found after the start: enable_on_exec will never fire for it.
  if (started_ && u.event) PTSNAP_TRY(u.event->Enable());
  units_.emplace(Key{-1, tid}, std::move(u));
  return Ok();
}

Result<void> SamplingSource::AddCpu(int cpu) {
  if (units_.count(Key{cpu, -1}) != 0) return Ok();
  Unit u;
  u.pid = -1;
  u.tid = -1;
  u.cpu = cpu;
  PTSNAP_TRY(Open(u, config_.sampling_attr, config_.data_pages,
                  "sampling event on CPU " + std::to_string(cpu)));
  u.sampled = true;
  if (!config_.full_execution) u.samples = std::make_unique<SampleRing>(config_.snapshot_bytes);
  if (started_) PTSNAP_TRY(u.event->Enable());
  units_.emplace(Key{cpu, -1}, std::move(u));
  return Ok();
}

Result<void> SamplingSource::ArmTriggers(const std::vector<TriggerPoint>& points) {
  for (auto& [key, u] : units_)
    if (u.cpu < 0) PTSNAP_TRY(u.breakpoints.Add(u.tid, points, config_.single_shot_triggers));
  triggers_.insert(triggers_.end(), points.begin(), points.end());
  return Ok();
}

Result<void> SamplingSource::EnableSideband() {
  // The sampling event is also the sideband event: enabling it for the
  // sideband starts the samples too (a few extra before EnableAll).
  for (auto& [key, u] : units_)
    if (u.event) PTSNAP_TRY(u.event->Enable());
  return Ok();
}

Result<void> SamplingSource::EnableAll() {
  started_ = true;
  return EnableSideband();
}

Result<void> SamplingSource::DrainUnit(Unit& u, SidebandEvents& ev) {
  if (!u.ring) return Ok();
  auto n = u.ring->Drain([&](std::span<const std::byte> rec) {
    perf_event_header h;
    std::memcpy(&h, rec.data(), sizeof(h));
    if (h.type == PERF_RECORD_SAMPLE && u.sampled) {
      if (u.samples) {
        u.samples->Push(rec);
      } else {
        u.pending.insert(u.pending.end(), rec.begin(), rec.end());
      }
      return;
    }
    batch_.insert(batch_.end(), rec.begin(), rec.end());
    perf::AccountRecord(rec, stats_);
    NoteSidebandRecord(rec, ev);
  });
  if (!n) PTSNAP_LOG(kWarning) << "ring of " << Who(u.tid, u.cpu) << ": " << n.error().ToString();
  if (n) ev.records += *n;
  return Ok();
}

Result<SidebandEvents> SamplingSource::DrainSideband(trace::TraceWriter& writer) {
  SidebandEvents ev = std::move(carried_);
  carried_ = {};
  batch_.clear();
  for (auto& [key, u] : units_) PTSNAP_TRY(DrainUnit(u, ev));
  if (!batch_.empty()) PTSNAP_TRY(writer.AppendSideband(batch_));
  writer.manifest().lost_records = stats_.lost_records;
  return ev;
}

Result<void> SamplingSource::WritePending(Unit& u, trace::TraceWriter& writer) {
  if (u.pending.empty()) return Ok();
  if (!u.stream) {
    trace::Stream info;
    info.kind = trace::StreamKind::kSamples;
    info.pid = u.pid;
    info.tid = u.tid;
    info.cpu = u.cpu;
    info.snapshot = 0;
    PTSNAP_ASSIGN_OR_RETURN(uint32_t id, writer.BeginStream(info));
    u.stream = id;
  }
  // A full disk keeps every whole sample that fits: a slow drain's long
  // batch is not lost with the one sample that did not.
  auto appended = writer.AppendStreamKeepingWhatFits(*u.stream, u.pending, [](auto rest) {
    perf_event_header h;
    if (rest.size() < sizeof(h)) return size_t{0};
    std::memcpy(&h, rest.data(), sizeof(h));
    return h.size < sizeof(h) ? size_t{0} : size_t{h.size};
  });
  u.pending.clear();
  return appended;
}

Result<void> SamplingSource::DrainAux(trace::TraceWriter& writer) {
  for (auto& [key, u] : units_) PTSNAP_TRY(WritePending(u, writer));
  return Ok();
}

Result<std::vector<TriggerHit>> SamplingSource::PollTriggers() {
  return PollUnitsKeepingHits(units_, late_hits_);
}

std::vector<int> SamplingSource::WakeFds() const {
  std::vector<int> fds;
  for (const auto& [key, u] : units_) u.breakpoints.AppendFds(fds);
  return fds;
}

Result<void> SamplingSource::ThreadExited(pid_t tid, trace::TraceWriter& writer) {
  auto it = units_.find(Key{-1, tid});
  if (it == units_.end() || it->second.exited) return Ok();
  Unit& u = it->second;
  if (!u.samples) {  // full mode, or sideband/breakpoints only: nothing to keep
    // The ring may still hold the thread's last samples.
    SidebandEvents ev;
    batch_.clear();
    PTSNAP_TRY(DrainUnit(u, ev));
    if (!batch_.empty()) PTSNAP_TRY(writer.AppendSideband(batch_));
    PTSNAP_TRY(WritePending(u, writer));
    Carry(ev, carried_);
    CloseUnitKeepingHits(units_, it->first, late_hits_);
    return Ok();
  }
  u.exited = true;
  exited_.push_back(it->first);
  if (exited_.size() > kMaxExitedKept) {
    CloseUnitKeepingHits(units_, exited_.front(), late_hits_);
    exited_.erase(exited_.begin());
  }
  return Ok();
}

Result<void> SamplingSource::Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) {
  // Everything the kernel wrote up to now; what the drain saw is handed to
  // the orchestration by the next DrainSideband.
  SidebandEvents ev;
  batch_.clear();
  for (auto& [key, u] : units_) PTSNAP_TRY(DrainUnit(u, ev));
  if (!batch_.empty()) PTSNAP_TRY(writer.AppendSideband(batch_));
  writer.manifest().lost_records = stats_.lost_records;
  Carry(ev, carried_);
  if (!resume)
    for (auto& [key, u] : units_)
      if (u.sampled && u.event) PTSNAP_TRY(u.event->Disable());
  Result<void> r = Ok();
  for (auto& [key, u] : units_) {
    if (!u.samples || u.samples->records() == 0) continue;
    trace::Stream s;
    s.kind = trace::StreamKind::kSamples;
    s.pid = u.pid;
    s.tid = u.tid;
    s.cpu = u.cpu;
    s.snapshot = seq;
    s.wrapped = u.samples->wrapped();
    // Listed by the AddSnapshot that follows (Session::TakeSnapshot).
    auto id = writer.AddStreamUnlisted(s, u.samples->Copy());
    if (!id) {
      r = std::move(id).error();
      break;
    }
  }
  // Exited threads' samples are in this snapshot now: close them.
  for (const Key& k : exited_) CloseUnitKeepingHits(units_, k, late_hits_);
  exited_.clear();
  return r;
}

Result<void> SamplingSource::Finish(trace::TraceWriter& writer) {
  if (!config_.full_execution) return Ok();
  for (auto& [key, u] : units_)
    if (u.sampled && u.event) PTSNAP_TRY(u.event->Disable());
  PTSNAP_TRY(DrainSideband(writer));
  PTSNAP_TRY(DrainAux(writer));
  return writer.Flush();
}

std::optional<trace::TimeConv> SamplingSource::time_conv() const {
  for (const auto& [key, u] : units_)
    if (u.event && u.event->mapped()) return ReadTimeConv(u.event->header());
  return std::nullopt;
}

uint64_t SamplingSource::Now() const { return PerfClockNow(time_conv()); }

}  // namespace ptsnap::record
