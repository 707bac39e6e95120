// TriggerBreakpoints: the trigger breakpoints of one traced thread, shared
// by every PtSource that opens perf events itself (HardwarePtSource,
// SamplingSource). One execute breakpoint per trigger point
// (perf::BuildBreakpointAttr), each with a one-page ring that receives its
// samples (wakeup_events 1, so the ring's fd wakes the session's poll()).
// Threads only: a CPU-wide breakpoint would fire in every process.
//
// Some hypervisors do not pass the debug registers through (Firecracker
// guests, seen on our own CI VMs): the kernel opens execute breakpoints
// there, but they never count a hit, so a trigger would silently never
// fire. ExecuteBreakpointsFire() finds that out once per process by
// calling a function of ptsnap's own under a breakpoint; where it counts
// nothing, a trigger on a function symbol is armed as an entry uprobe on
// the same code instead (one int3 trap per call, as a breakpoint costs a
// debug trap), with the same one-sample-per-hit ring. `addr:` triggers
// have no file offset and stay breakpoints, with a warning. A trigger on
// a shared library's function of `run` is an entry uprobe everywhere: it
// has no runtime address before the loader maps the library.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "ptsnap/result.h"
#include "record/elf_symbols.h"
#include "record/pt_source.h"

namespace ptsnap::record {

// True unless an execute breakpoint on a function of this process counts
// no hit when the function is called (the result is kept; an open the
// kernel refuses counts as true, so the real open reports the error).
bool ExecuteBreakpointsFire();
// Tests: arm every function trigger as a uprobe, whatever the self-test said.
void ForceTriggerUprobesForTesting(bool force);

class TriggerBreakpoints {
 public:
  // Opens and enables a breakpoint (or, where breakpoints do not fire, an
  // entry uprobe) on `tid` for each point; a point with no address (a
  // shared library's function of `run`, not mapped yet) is always an entry
  // uprobe on its file and file offset, which the kernel places wherever
  // the library gets mapped (refused without root or CAP_PERFMON: kind
  // kPrivilege, saying so). `single_shot`:
  // each fires once and then disables itself (PERF_EVENT_IOC_REFRESH 1, as
  // magic-trace does). `pause_group` >= 0 (Linux 6.13+): the fd of the
  // thread's intel_pt event; each breakpoint joins its group with
  // aux_pause, so a hit stops the AUX ring in the kernel before the reader
  // wakes (perf::BuildBreakpointAttr). Errors name the point and the thread.
  Result<void> Add(pid_t tid, const std::vector<TriggerPoint>& points, bool single_shot,
                   int pause_group = -1);
  // Appends the hits since the last call to `hits`; a corrupt ring is
  // logged, not fatal.
  void Poll(pid_t tid, std::vector<TriggerHit>& hits);
  // The breakpoints' fds, for poll().
  void AppendFds(std::vector<int>& fds) const;
  [[nodiscard]] bool empty() const { return bps_.empty(); }

 private:
  struct Breakpoint {
    std::unique_ptr<perf::PerfEvent> event;
    std::unique_ptr<perf::DataRingReader> ring;
    std::string symbol;
  };
  std::vector<Breakpoint> bps_;
};

// Closes `units[key]` (a source's per-thread unit: its `breakpoints` and
// `tid`), appending its breakpoints' unread hits to `late` first: a hit
// between the loop's last PollTriggers and the EXIT that closes the thread
// (one that calls the trigger and exits at once) is not closed with its
// ring. The source's next PollTriggers returns `late` first.
template <class Units>
void CloseUnitKeepingHits(Units& units, const typename Units::key_type& key,
                          std::vector<TriggerHit>& late) {
  auto it = units.find(key);
  if (it == units.end()) return;
  it->second.breakpoints.Poll(it->second.tid, late);
  units.erase(it);
}
// A source's PollTriggers: the hits CloseUnitKeepingHits kept in `late`
// (taken from it), then every open unit's.
template <class Units>
std::vector<TriggerHit> PollUnitsKeepingHits(Units& units, std::vector<TriggerHit>& late) {
  std::vector<TriggerHit> hits = std::exchange(late, {});
  for (auto& [key, u] : units) u.breakpoints.Poll(u.tid, hits);
  return hits;
}

}  // namespace ptsnap::record
