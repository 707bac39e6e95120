// The hot path: one call per executed translation block. The block's exit
// was classified at translation (translate.cpp); its outcome is inferred
// here, when the thread's next block starts, and written as packets.
#include <string>

#include "emulate/plugin/plugin.h"
#include "emulate/psb_placement.h"

namespace ptsnap::emulate {

namespace {

// Tracing on, block `tb` follows t->prev (traced, retired just now): the
// packets of the branch that led here, or an asynchronous disable where
// `tb` is neither of its successors (a signal was delivered).
void FollowBranch(ThreadState* t, const TbInfo* tb) {
  const TbInfo* p = t->prev;
  switch (p->kind) {
    case ExitKind::kRep:
    case ExitKind::kNone:
      if (tb->start != p->fallthrough) {
        t->pt.AsyncDisable(p->fallthrough);
        t->enabled = false;
      }
      break;
    case ExitKind::kCond:
      if (tb->start == p->target) {
        t->pt.Tnt(true);
      } else {
        t->pt.Tnt(false);
        // Neither successor: a signal was delivered after the branch. The
        // resume point is unknown here; the fall-through is reported.
        if (tb->start != p->fallthrough) {
          t->pt.AsyncDisable(p->fallthrough);
          t->enabled = false;
        }
      }
      break;
    case ExitKind::kDirectCall:
      if (p->pushes) t->pt.Call(p->fallthrough);
      [[fallthrough]];
    case ExitKind::kDirect:
      if (tb->start != p->target) {
        t->pt.AsyncDisable(p->target);
        t->enabled = false;
      }
      break;
    case ExitKind::kIndirectCall:
      t->pt.Tip(tb->start);
      if (p->pushes) t->pt.Call(p->fallthrough);
      break;
    case ExitKind::kIndirect: t->pt.Tip(tb->start); break;
    case ExitKind::kRet: t->pt.Ret(tb->start); break;
    case ExitKind::kFar: break;
  }
}

}  // namespace

// --slower-than at the start of `tb` (t->prev non-null): takes the snapshot
// of a slow call that returned here. Returns true when the recording stops.
bool Plugin::SlowCallSnapshot(ThreadState* t, const TbInfo* tb) {
  auto slow = SlowCallStep(t, tb);
  if (!slow || opts_.full) return false;
  // As at a trigger: the stream ends at the return, the slow call whole
  // in it (as far as the ring reaches back).
  if (t->enabled) {
    t->pt.AsyncDisable(tb->start);
    t->enabled = false;
  }
  TakeSnapshot("slow-call", SlowCallDetail(t, *slow), t, &*slow);
  t->slow.snapped = true;
  t->slow.last_snap = t->clock;
  t->slow.skipped = 0;
  if (!opts_.multi) {
    flags_.store(kStopped);
    return true;
  }
  return false;
}

// A trigger or stop indicator at `tb` (tb->flags non-zero): its snapshot.
// Returns true when the recording stops.
bool Plugin::TriggerSnapshot(ThreadState* t, const TbInfo* tb) {
  bool hit = false;
  const char* reason = "";
  std::string detail;
  if (tb->flags & kFlagStop) {
    hit = true;
    reason = "stop-indicator";
  } else if (tb->flags & kFlagTrigger) {
    hit = true;
    reason = "trigger";
    detail = opts_.trigger_name;
  }
  if (!hit || opts_.full) return false;
  // Tracing pauses while the snapshot is read, as perf does: the stream
  // ends exactly at the trigger's first instruction.
  if (t->enabled) {
    t->pt.AsyncDisable(tb->start);
    t->enabled = false;
  }
  TakeSnapshot(reason, detail, t);
  if (!opts_.multi) {
    flags_.store(kStopped);
    return true;
  }
  return false;
}

void Plugin::OnTbExec(unsigned vcpu, const TbInfo* tb) {
  if (int f = flags_.load(std::memory_order_relaxed); f != 0) {
    if (f & kStopped) {
      ResetIfDetached();
      return;
    }
    HandleRequests(vcpu < kMaxVcpus ? vcpus_[vcpu].thread : nullptr, f);
    if (flags_.load() & kStopped) return;
  }
  if (vcpu >= kMaxVcpus) return;
  ThreadState* t = vcpus_[vcpu].thread;
  if (t == nullptr) t = StartThread(vcpu);

  // The block starts when the previous one retired its last instruction:
  // that instruction's branch packets carry this time.
  const uint64_t now = t->clock;
  // A rep string instruction's next iteration: it retires once in PT.
  if (t->prev != nullptr && t->prev->kind == ExitKind::kRep && tb->start == t->prev->last_ip)
    return;
  if ((opts_.slow_ns != 0 || opts_.only_in != 0) && t->prev != nullptr) ShadowStep(t, tb);
  // --only-in: paused outside the function (TIP.PGD at the return that
  // pauses, PSB+ and TIP.PGE at the entry that resumes: what clearing and
  // setting TraceEn in pt_event_stop/pt_event_start gives the decoder).
  const bool resumed = opts_.only_in != 0 && OnlyInStep(t, tb);
  // --filter: whether this block is traced (tracing on only inside the
  // filter ranges, never again once a tracestop range was entered).
  const bool trace_stop = (tb->flags & kFlagTraceStop) != 0 && !t->trace_stopped;
  const bool traced = !t->trace_stopped && !trace_stop &&
                      (!opts_.filtering || (tb->flags & kFlagInFilter) != 0) &&
                      (opts_.only_in == 0 || !t->paused);
  if (t->enabled && !traced) {
    t->pt.SetTime(now);
    LeaveFilter(t, t->prev, tb);
    if (trace_stop) t->pt.TraceStop();
    t->enabled = false;
  } else if (t->enabled) {
    t->pt.SetTime(now);
    FollowBranch(t, tb);
  }

  if (opts_.slow_ns != 0 && t->prev != nullptr && SlowCallSnapshot(t, tb)) return;
  if (tb->flags != 0 && TriggerSnapshot(t, tb)) return;

  // Rewritten code: a PSB+ at its first instruction (its FUP), with a TSC
  // of this moment, so the decoder switches to the new bytes exactly here
  // even when a direct branch (no packet) led into them.
  const bool rewritten = tb->jit != nullptr && !tb->jit->done.load(std::memory_order_relaxed) &&
                         CaptureJit(t, tb, now);

  if (trace_stop) t->trace_stopped = true;
  const uint64_t tsc = now;
  t->clock += tb->ninsn;
  if (!traced) {  // outside the filters: nothing of it is in the trace
    t->prev = tb;
    return;
  }
  const PsbAt psb =
      PlacePsb({.tracing = t->enabled,
                .started = t->started,
                .since_psb = t->pt.since_psb(),
                .period = opts_.psb_period,
                .resumed = resumed,
                .rewritten = rewritten,
                .prev = t->prev != nullptr ? std::optional(t->prev->kind) : std::nullopt});
  if (!t->enabled) {
    if (psb == PsbAt::kBeforePge) {
      t->pt.FlushTnt();
      Drain(t);
      // A resume starts a new ring chunk at its PSB (no CYC for the pause).
      if (resumed) t->pt.RestartCycles(tsc);
      t->pt.Psb(tsc, false, 0);
      t->started = true;
    }
    t->pt.Pge(tb->start, tsc);
    t->enabled = true;
  } else if (psb == PsbAt::kInFlow) {
    t->pt.FlushTnt();
    Drain(t);
    t->pt.Psb(tsc, true, tb->start);
  }

  t->insns += tb->ninsn;
  if (opts_.hash) {
    for (uint64_t ip : tb->ips) t->hash = (t->hash ^ ip) * kStreamHashPrime;
  }
  t->prev = tb;
  if (tb->kind == ExitKind::kFar) {
    t->pt.SetTime(t->clock);  // the syscall retires at the end of the block
    t->pt.PgdSuppressed();
    t->enabled = false;
  }
}

}  // namespace ptsnap::emulate
