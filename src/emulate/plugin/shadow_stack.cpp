// The shadow return stack and what watches it: --slower-than's slow calls
// and --only-in's pause and resume.
#include <algorithm>
#include <string>

#include "base/string_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

// The shadow return stack (SlowCalls::returns) follows the call or return
// that led from t->prev to `tb` (t->prev retired just now): a call pushes
// its return address, a return pops down to the nearest frame that returns
// to `tb` (a return elsewhere, to a pushed address or a coroutine switch,
// leaves it alone). Shared by --slower-than and --only-in.
void Plugin::ShadowStep(ThreadState* t, const TbInfo* tb) {
  SlowCalls& sc = t->slow;
  const TbInfo* p = t->prev;
  if ((p->kind == ExitKind::kDirectCall || p->kind == ExitKind::kIndirectCall) && p->pushes) {
    if (sc.returns.size() >= kMaxShadowDepth) {
      // Runaway depth: forget the outermost frames (and calls begun there).
      constexpr size_t kDrop = 1024;
      sc.returns.erase(sc.returns.begin(), sc.returns.begin() + kDrop);
      for (std::vector<SlowCallEntry>* watched : {&sc.entries, &t->only_in}) {
        std::erase_if(*watched, [](const SlowCallEntry& e) { return e.depth <= kDrop; });
        for (SlowCallEntry& e : *watched) e.depth -= kDrop;
      }
    }
    sc.returns.push_back(p->fallthrough);
  } else if (p->kind == ExitKind::kRet) {
    constexpr size_t kSearch = 256;
    const size_t n = sc.returns.size();
    for (size_t i = n; i > 0 && n - i < kSearch; --i) {
      if (sc.returns[i - 1] != tb->start) continue;
      sc.returns.resize(i - 1);
      break;
    }
  }
}

namespace {

// After a return to `target` left the shadow `depth` deep: pops the watched
// frames deeper than that, calling ended(frame, returned): `returned` when
// the return went to the frame's return address, false when the frame was
// unwound past (longjmp, an exception) without returning.
template <typename Ended>
void EndWatchedFrames(std::vector<SlowCallEntry>& watched, size_t depth, uint64_t target,
                      Ended&& ended) {
  while (!watched.empty() && watched.back().depth > depth) {
    const SlowCallEntry e = watched.back();
    watched.pop_back();
    ended(e, e.ret == target && e.depth == depth + 1);
  }
}

}  // namespace

// --slower-than at the start of block `tb` of thread `t` (t->prev retired
// just now, ShadowStep has followed it, t->clock is this block's start):
// starts measuring when `tb` is the slow function's entry, and returns the
// call that returned here when it was slow (and the rate limit lets it
// through), else nullopt.
std::optional<SlowCallEntry> Plugin::SlowCallStep(ThreadState* t, const TbInfo* tb) {
  SlowCalls& sc = t->slow;
  std::optional<SlowCallEntry> slow;
  if (t->prev->kind == ExitKind::kRet) {
    EndWatchedFrames(sc.entries, sc.returns.size(), tb->start,
                     [&](const SlowCallEntry& e, bool returned) {
                       if (!returned) return;
                       const uint64_t length = t->clock - e.begin;
                       if (length < opts_.slow_ns || slow) return;
                       const uint64_t gap = std::max<uint64_t>(opts_.slow_ns, 10'000'000);
                       if (sc.snapped && t->clock - sc.last_snap < gap) {
                         ++sc.skipped;
                         slow_skipped_.fetch_add(1, std::memory_order_relaxed);
                         return;
                       }
                       slow = e;
                     });
  }
  if ((tb->flags & kFlagSlow) && !sc.returns.empty())
    sc.entries.push_back({sc.returns.back(), sc.returns.size(), t->clock});
  return slow;
}

// --only-in at the start of block `tb` (after ShadowStep): as Linux 6.13's
// AUX pause/resume with a uprobe on the function's entry (aux_resume) and a
// uretprobe (aux_pause). A return through a frame entered at the entry
// pauses tracing (the uretprobe fires there: in a recursion, at the
// innermost return, as on hardware), the entry resumes it; a frame unwound
// past without returning pauses nothing (no uretprobe fires). Returns true
// when tracing resumes at `tb` after being paused.
bool Plugin::OnlyInStep(ThreadState* t, const TbInfo* tb) {
  const bool was_paused = t->paused;
  if (t->prev != nullptr && t->prev->kind == ExitKind::kRet) {
    EndWatchedFrames(t->only_in, t->slow.returns.size(), tb->start,
                     [&](const SlowCallEntry&, bool returned) {
                       if (returned) t->paused = true;
                     });
  }
  if (tb->flags & kFlagOnlyIn) {
    if (!t->slow.returns.empty())
      t->only_in.push_back({t->slow.returns.back(), t->slow.returns.size(), t->clock});
    t->paused = false;
  }
  return was_paused && !t->paused;
}

// "handle_request took 5.123 ms (from +1.000 ms, thread 42)", and the calls
// the rate limit skipped on this thread since its previous slow-call snapshot.
std::string Plugin::SlowCallDetail(const ThreadState* t, const SlowCallEntry& e) const {
  std::string d = opts_.slow_name + " took " + base::FormatDuration(t->clock - e.begin) +
                  " (from +" + base::FormatDuration(e.begin) + ", thread " +
                  std::to_string(t->tid) + ")";
  if (t->slow.skipped != 0)
    d += "; " + std::to_string(t->slow.skipped) +
         " slow call(s) of this thread skipped before it by the rate limit";
  return d;
}

}  // namespace ptsnap::emulate
