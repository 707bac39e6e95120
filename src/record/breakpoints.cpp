#include "record/breakpoints.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/unique_fd.h"
#include "perf/attr.h"
#include "record/record_errors.h"
#include "record/slow_calls.h"
#include "sys/pmu.h"

namespace ptsnap::record {

namespace {
// The function ExecuteBreakpointsFire() calls under a breakpoint.
[[gnu::noinline]] int BreakpointSelfTest(int x) {
  asm volatile("" ::: "memory");  // keeps the call and the function's first instruction
  return x + 1;
}
}  // namespace

bool ExecuteBreakpointsFire() {
  static const bool fire = [] {
    int (*volatile fn)(int) = &BreakpointSelfTest;
    perf_event_attr attr = perf::BuildBreakpointAttr(reinterpret_cast<uintptr_t>(fn));
    attr.sample_period = 0;  // counting only: no ring to fill
    attr.sample_type = 0;
    attr.wakeup_events = 0;
    attr.disabled = 0;
    base::UniqueFd fd(
        static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!fd) return true;  // cannot tell: the trigger's own open reports why
    int sum = 0;
    for (int i = 0; i < 3; ++i) sum += fn(i);
    uint64_t count = 0;
    if (::read(fd.get(), &count, sizeof count) != static_cast<ssize_t>(sizeof count)) return true;
    PTSNAP_LOG(kDebug) << "execute breakpoint self-test: " << count << " of 3 calls counted ("
                       << sum << ")";
    return count > 0;
  }();
  return fire;
}

namespace {
bool force_uprobes = false;
}  // namespace

void ForceTriggerUprobesForTesting(bool force) { force_uprobes = force; }

namespace {
// An entry uprobe on the trigger's function; `file` must outlive the open
// (config1 points at it).
// A library's function comes with its file and offset (linked_libraries.h);
// the executable's is looked up in the process.
Result<perf_event_attr> TriggerUprobeAttr(pid_t tid, const TriggerPoint& p, bool aux_pause,
                                          std::string& file) {
  uint64_t offset = p.file_offset;
  file = p.file;
  if (file.empty()) {
    PTSNAP_ASSIGN_OR_RETURN(ProbeTarget target, ResolveProbeTarget(p.symbol, tid));
    file = target.file.string();
    offset = target.offset;
  }
  static const sys::PmuInfo pmu = sys::ReadPmu(base::RootPath(), "uprobe");
  return perf::BuildTriggerUprobeAttr(pmu, file.c_str(), offset, aux_pause);
}
}  // namespace

Result<void> TriggerBreakpoints::Add(pid_t tid, const std::vector<TriggerPoint>& points,
                                     bool single_shot, int pause_group) {
  const bool breakpoints_fire = !force_uprobes && ExecuteBreakpointsFire();
  for (const TriggerPoint& p : points) {
    Breakpoint bp;
    std::string file;  // a uprobe's path, read by the kernel during the open
    perf_event_attr attr = perf::BuildBreakpointAttr(p.address, pause_group >= 0);
    std::string kind = "trigger breakpoint ";
    // A library function of `run` has no address yet: only a uprobe on
    // its file can catch it, wherever the loader maps the library.
    const bool unmapped = p.address == 0 && !p.file.empty();
    if (unmapped) {
      PTSNAP_ASSIGN_OR_RETURN(attr, TriggerUprobeAttr(tid, p, pause_group >= 0, file));
      kind = "trigger uprobe ";
    } else if (!breakpoints_fire && !p.symbol.empty()) {
      static bool said = false;
      if (!said && !force_uprobes) {
        PTSNAP_LOG(kInfo) << "this machine counts no hardware execute breakpoint hits (its "
                             "hypervisor keeps the debug registers); triggers are entry uprobes";
        said = true;
      }
      PTSNAP_ASSIGN_OR_RETURN(attr, TriggerUprobeAttr(tid, p, pause_group >= 0, file));
      kind = "trigger uprobe ";
    } else if (!breakpoints_fire) {
      PTSNAP_LOG(kWarning) << "trigger " << p.description
                           << ": this machine counts no hardware execute breakpoint hits (its "
                              "hypervisor keeps the debug registers), and an addr: trigger cannot "
                              "be a uprobe: it will not fire; name a function instead";
    }
    auto ev =
        perf::PerfEvent::Open(attr, tid, -1, perf::MapSpec{1, 0, false},
                              kind + p.description + " on tid " + std::to_string(tid), pause_group);
    if (!ev) {
      const int err = ev.error().errnum();
      if (unmapped && (err == EACCES || err == EPERM))
        return Error(std::string("a trigger on a shared library's function is an entry uprobe, "
                                 "which needs ") +
                     kUprobePrivilege + ": " + ev.error().ToString())
            .WithKind(ErrorKind::kPrivilege);
      return std::move(ev).error();
    }
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
