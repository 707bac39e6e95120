#include "record/breakpoints.h"

#include <cstring>

#include "base/log.h"
#include "perf/attr.h"

namespace ptsnap::record {

Result<void> TriggerBreakpoints::Add(pid_t tid, const std::vector<TriggerPoint>& points,
                                     bool single_shot, int pause_group) {
  for (const TriggerPoint& p : points) {
    perf_event_attr attr = perf::BuildBreakpointAttr(p.address, pause_group >= 0);
    auto ev = perf::PerfEvent::Open(
        attr, tid, -1, perf::MapSpec{1, 0, false},
        "trigger breakpoint " + p.description + " on tid " + std::to_string(tid), pause_group);
    if (!ev) return std::move(ev).error();
    Breakpoint bp;
    bp.event = std::make_unique<perf::PerfEvent>(std::move(*ev));
    bp.ring = std::make_unique<perf::DataRingReader>(bp.event->header(), bp.event->data());
    bp.symbol = p.symbol;
    PTSNAP_TRY(single_shot ? bp.event->Refresh(1) : bp.event->Enable());
    bps_.push_back(std::move(bp));
  }
  return Ok();
}

void TriggerBreakpoints::Poll(pid_t tid, std::vector<TriggerHit>& hits) {
  for (Breakpoint& bp : bps_) {
    auto n = bp.ring->Drain([&](std::span<const std::byte> rec) {
      perf_event_header h;
      std::memcpy(&h, rec.data(), sizeof(h));
      if (h.type != PERF_RECORD_SAMPLE || rec.size() < sizeof(h) + sizeof(perf::BreakpointSample))
        return;
      perf::BreakpointSample s;
      std::memcpy(&s, rec.data() + sizeof(h), sizeof(s));
      hits.push_back({s.ip, s.pid, s.tid, s.time, bp.symbol});
    });
    if (!n) PTSNAP_LOG(kWarning) << "trigger ring of tid " << tid << ": " << n.error().ToString();
  }
}

void TriggerBreakpoints::AppendFds(std::vector<int>& fds) const {
  for (const Breakpoint& bp : bps_) fds.push_back(bp.event->fd());
}

}  // namespace ptsnap::record
