#include "record/hardware_source.h"

#include <sys/mman.h>
#include <x86intrin.h>

#include <atomic>
#include <cstring>
#include <ctime>

#include "base/log.h"
#include "perf/attr.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

std::string Tid(pid_t tid) { return "tid " + std::to_string(tid); }

}  // namespace

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

uint64_t TscToPerfNs(const trace::TimeConv& tc, uint64_t tsc) {
  const uint64_t quot = tsc >> tc.time_shift;
  const uint64_t rem = tsc & ((uint64_t{1} << tc.time_shift) - 1);
  return tc.time_zero + quot * tc.time_mult + ((rem * tc.time_mult) >> tc.time_shift);
}

Result<std::unique_ptr<HardwarePtSource>> HardwarePtSource::Create(HardwareConfig config) {
  return std::unique_ptr<HardwarePtSource>(new HardwarePtSource(std::move(config)));
}

size_t HardwarePtSource::traced_threads() const {
  size_t n = 0;
  for (const auto& [tid, t] : threads_) n += t.tracking != nullptr;
  return n;
}

Result<void> HardwarePtSource::AddBreakpoints(Thread& t, const std::vector<TriggerPoint>& points) {
  for (const TriggerPoint& p : points) {
    perf_event_attr attr = perf::BuildBreakpointAttr(p.address);
    auto ev = perf::PerfEvent::Open(attr, t.tid, -1, perf::MapSpec{1, 0, false},
                                    "trigger breakpoint " + p.description + " on " + Tid(t.tid));
    if (!ev) return std::move(ev).error();
    Breakpoint bp;
    bp.event = std::make_unique<perf::PerfEvent>(std::move(*ev));
    bp.ring = std::make_unique<perf::DataRingReader>(bp.event->header(), bp.event->data());
    bp.symbol = p.symbol;
    PTSNAP_TRY(bp.event->Enable());
    t.breakpoints.push_back(std::move(bp));
  }
  return Ok();
}

Result<void> HardwarePtSource::AddThread(pid_t pid, pid_t tid, bool trace_pt) {
  if (threads_.count(tid) != 0) return Ok();
  Thread t;
  t.pid = pid;
  t.tid = tid;
  if (trace_pt) {
    if (config_.pt_attr) {
      perf::MapSpec map{config_.data_pages, config_.aux_pages, config_.full_execution};
      auto pt =
          perf::PerfEvent::Open(*config_.pt_attr, tid, -1, map, "intel_pt event for " + Tid(tid));
      if (!pt) return std::move(pt).error();
      t.pt = std::make_unique<perf::PerfEvent>(std::move(*pt));
      auto tr = perf::PerfEvent::Open(config_.tracking_attr, tid, -1, perf::MapSpec{},
                                      "sideband (dummy) event for " + Tid(tid));
      if (!tr) return std::move(tr).error();
      t.tracking = std::make_unique<perf::PerfEvent>(std::move(*tr));
      PTSNAP_TRY(t.tracking->SetOutput(*t.pt));
      t.ring = std::make_unique<perf::DataRingReader>(t.pt->header(), t.pt->data());
      if (config_.full_execution) {
        t.full = std::make_unique<perf::AuxFullReader>(t.pt->header(), t.pt->aux());
      } else {
        t.snapshot = std::make_unique<perf::AuxSnapshotReader>(t.pt->header(), t.pt->aux());
      }
    } else {
      auto tr = perf::PerfEvent::Open(config_.tracking_attr, tid, -1,
                                      perf::MapSpec{config_.data_pages, 0, false},
                                      "sideband (dummy) event for " + Tid(tid));
      if (!tr) return std::move(tr).error();
      t.tracking = std::make_unique<perf::PerfEvent>(std::move(*tr));
      t.ring = std::make_unique<perf::DataRingReader>(t.tracking->header(), t.tracking->data());
    }
  }
  PTSNAP_TRY(AddBreakpoints(t, triggers_));
  threads_.emplace(tid, std::move(t));
  return Ok();
}

Result<void> HardwarePtSource::ArmTriggers(const std::vector<TriggerPoint>& points) {
  for (auto& [tid, t] : threads_) PTSNAP_TRY(AddBreakpoints(t, points));
  triggers_.insert(triggers_.end(), points.begin(), points.end());
  return Ok();
}

Result<void> HardwarePtSource::EnableAll() {
  for (auto& [tid, t] : threads_) {
    // Tracking first, so the PT event's ITRACE_START finds its mappings.
    if (t.tracking) PTSNAP_TRY(t.tracking->Enable());
    if (t.pt) PTSNAP_TRY(t.pt->Enable());
  }
  return Ok();
}

Result<SidebandEvents> HardwarePtSource::DrainSideband(trace::TraceWriter& writer) {
  SidebandEvents ev;
  batch_.clear();
  for (auto& [tid, th] : threads_) {
    Thread& t = th;  // clang 14 lambdas cannot capture structured bindings
    if (!t.ring) continue;
    bool reenable = false;
    auto n = t.ring->Drain([&](std::span<const std::byte> rec) {
      batch_.insert(batch_.end(), rec.begin(), rec.end());
      reenable |= perf::AccountRecord(rec, stats_);
      perf_event_header h;
      std::memcpy(&h, rec.data(), sizeof(h));
      if (h.type == PERF_RECORD_MMAP2) {
        auto parsed = trace::ParseRecord(rec);
        if (parsed) {
          if (auto* m = std::get_if<trace::Mmap2>(&parsed->record.body);
              m != nullptr && (m->prot & PROT_EXEC) != 0 && !m->filename.empty() &&
              m->filename[0] == '/')
            ev.mapped_files.push_back(m->filename);
        }
      }
      if ((h.type == PERF_RECORD_FORK || h.type == PERF_RECORD_EXIT) &&
          rec.size() >= sizeof(h) + 16) {
        uint32_t f[4];  // pid, ppid, tid, ptid
        std::memcpy(f, rec.data() + sizeof(h), sizeof(f));
        if (h.type == PERF_RECORD_FORK) {
          ev.new_threads.emplace_back(static_cast<pid_t>(f[0]), static_cast<pid_t>(f[2]));
        } else {
          ev.exited_threads.push_back(static_cast<pid_t>(f[2]));
        }
      }
    });
    if (!n) PTSNAP_LOG(kWarning) << "sideband of " << Tid(tid) << ": " << n.error().ToString();
    if (n) ev.records += *n;
    if (reenable && t.pt) {
      // Full mode: the kernel disabled the event after TRUNCATED
      // (perf_aux_output_end); make room first, then restart it.
      if (t.full) {
        t.full->Drain([&](std::span<const std::byte> c) {
          t.full_bytes.insert(t.full_bytes.end(), c.begin(), c.end());
        });
      }
      PTSNAP_TRY(t.pt->Enable());
    }
  }
  if (!batch_.empty()) PTSNAP_TRY(writer.AppendSideband(batch_));
  writer.manifest().lost_records = stats_.lost_records;
  writer.manifest().aux_truncated = stats_.aux_truncated;
  return ev;
}

Result<void> HardwarePtSource::DrainAux() {
  for (auto& entry : threads_) {
    Thread& t = entry.second;
    if (!t.full) continue;
    t.full->Drain([&](std::span<const std::byte> c) {
      t.full_bytes.insert(t.full_bytes.end(), c.begin(), c.end());
    });
  }
  return Ok();
}

Result<std::vector<TriggerHit>> HardwarePtSource::PollTriggers() {
  std::vector<TriggerHit> hits;
  for (auto& [tid, t] : threads_) {
    for (Breakpoint& bp : t.breakpoints) {
      auto n = bp.ring->Drain([&](std::span<const std::byte> rec) {
        perf_event_header h;
        std::memcpy(&h, rec.data(), sizeof(h));
        if (h.type != PERF_RECORD_SAMPLE || rec.size() < sizeof(h) + sizeof(perf::BreakpointSample))
          return;
        perf::BreakpointSample s;
        std::memcpy(&s, rec.data() + sizeof(h), sizeof(s));
        hits.push_back({s.ip, s.pid, s.tid, s.time, bp.symbol});
      });
      if (!n)
        PTSNAP_LOG(kWarning) << "trigger ring of " << Tid(tid) << ": " << n.error().ToString();
    }
  }
  return hits;
}

Result<void> HardwarePtSource::Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) {
  // Stop every PT event first (IOC_DISABLE is synchronous: aux_head is
  // published when it returns), then copy, then restart.
  for (auto& [tid, t] : threads_)
    if (t.pt) PTSNAP_TRY(t.pt->Disable());
  for (auto& [tid, t] : threads_) {
    if (!t.snapshot) continue;
    perf::AuxSnapshot snap = t.snapshot->Copy();
    if (snap.bytes.empty()) continue;
    trace::Stream s;
    s.pid = t.pid;
    s.tid = t.tid;
    s.snapshot = seq;
    s.wrapped = snap.wrapped;
    PTSNAP_TRY(writer.AddStream(s, snap.bytes));
  }
  if (resume) {
    for (auto& [tid, t] : threads_)
      if (t.pt) PTSNAP_TRY(t.pt->Enable());
  }
  return Ok();
}

Result<void> HardwarePtSource::Finish(trace::TraceWriter& writer) {
  if (!config_.full_execution) return Ok();
  for (auto& [tid, t] : threads_)
    if (t.pt) PTSNAP_TRY(t.pt->Disable());
  PTSNAP_TRY(DrainAux());
  for (auto& [tid, t] : threads_) {
    if (!t.pt || t.full_bytes.empty()) continue;
    trace::Stream s;
    s.pid = t.pid;
    s.tid = t.tid;
    s.snapshot = 0;
    PTSNAP_TRY(writer.AddStream(s, t.full_bytes));
    t.full_bytes.clear();
  }
  return Ok();
}

std::optional<trace::TimeConv> HardwarePtSource::time_conv() const {
  for (const auto& [tid, t] : threads_) {
    if (t.pt) return ReadTimeConv(t.pt->header());
    if (t.tracking && t.tracking->mapped()) return ReadTimeConv(t.tracking->header());
  }
  return std::nullopt;
}

uint64_t HardwarePtSource::Now() const {
  if (auto tc = time_conv(); tc && tc->cap_user_time_zero) return TscToPerfNs(*tc, __rdtsc());
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace ptsnap::record
