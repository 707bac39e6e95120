// --filter (docs/recording.md, "Address filters"): the filter ranges at
// their run-time addresses and the packets where tracing leaves them.
#include <algorithm>

#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

// Adds the --filter ranges in [addr, addr + len), file offset `pgoff` of
// `path`, mapped executable: what the kernel does with a file filter
// (perf_addr_filter_vma_adjust: vm_start + offset - pgoff).
void Plugin::MapFilterRanges(uint64_t addr, uint64_t len, uint64_t pgoff, const char* path) {
  if (opts_.filters.empty()) return;
  std::lock_guard lock(range_mu_);
  for (const FilterRange& f : opts_.filters) {
    if (f.path != path) continue;
    const uint64_t lo = std::max(f.offset, pgoff);
    const uint64_t hi = std::min(f.offset + f.size, pgoff + len);
    if (lo >= hi) continue;
    ranges_.push_back({addr + (lo - pgoff), addr + (hi - pgoff), f.trace_stop});
  }
}

// Arms the shared-library triggers in [addr, addr + len), file offset
// `pgoff` of `path`, mapped executable: at addr + offset - pgoff, as the
// kernel places a uprobe on a file.
void Plugin::MapLibTriggers(uint64_t addr, uint64_t len, uint64_t pgoff, const char* path) {
  if (opts_.lib_trigger.empty()) return;
  std::lock_guard lock(range_mu_);
  for (const FileOffset& t : opts_.lib_trigger)
    if (t.path == path && t.offset >= pgoff && t.offset < pgoff + len)
      trigger_rt_.push_back(addr + (t.offset - pgoff));
}

// The --filter flags of a block starting at `ip`.
uint8_t Plugin::FilterFlags(uint64_t ip) {
  if (opts_.filters.empty()) return 0;
  uint8_t flags = 0;
  std::lock_guard lock(range_mu_);
  for (const RuntimeRange& r : ranges_)
    if (ip >= r.lo && ip < r.hi) flags |= r.trace_stop ? kFlagTraceStop : kFlagInFilter;
  return flags;
}

// --filter: block `p` (traced) was followed by `tb`, which lies outside
// every filter range (or in a tracestop range). The CPU stops packet
// generation at the branch that left (SDM 33.2.5.3, "Filtering by IP"):
// TIP.PGD with the branch's target instead of its TNT bit or TIP, which
// libipt binds to that branch. Leaving by sequential flow (no branch) or
// by a signal is an asynchronous disable, FUP(next IP) + TIP.PGD.
void Plugin::LeaveFilter(ThreadState* t, const TbInfo* p, const TbInfo* tb) {
  switch (p->kind) {
    case ExitKind::kRep:
    case ExitKind::kNone: t->pt.AsyncDisable(p->fallthrough); break;
    case ExitKind::kCond:
      if (tb->start == p->target || tb->start == p->fallthrough) {
        t->pt.Pgd(tb->start);
      } else {  // a signal after the branch, as in OnTbExec
        t->pt.Tnt(false);
        t->pt.AsyncDisable(p->fallthrough);
      }
      break;
    case ExitKind::kDirectCall:
    case ExitKind::kDirect:
      if (tb->start == p->target) {
        t->pt.Pgd(tb->start);
      } else {
        t->pt.AsyncDisable(p->target);
      }
      break;
    case ExitKind::kIndirectCall:
    case ExitKind::kIndirect:
    case ExitKind::kRet: t->pt.Pgd(tb->start); break;
    case ExitKind::kFar: break;  // tracing went off at the far transfer already
  }
}

}  // namespace ptsnap::emulate
