#include "pipeline/thin_sink.h"

namespace ptsnap::pipeline {

ThinSink::Thread& ThinSink::ThreadOf(int32_t tid) {
  if (last_ == nullptr || last_tid_ != tid) {
    last_ = &threads_[tid];  // unordered_map references stay valid
    last_tid_ = tid;
  }
  return *last_;
}

void ThinSink::Release(Thread& t, uint64_t now) {
  // Begins are in time order up the stack, so the frames that lasted long
  // enough are a run from the lowest held one; a deep frame is never sent
  // and neither is anything above it.
  while (t.sent < t.stack.size()) {
    const Open& o = t.stack[t.sent];
    if (o.deep || now < o.begin.ts || now - o.begin.ts < options_.min_duration_ns) break;
    to_->OnSlice(o.begin);
    t.sent++;
  }
}

void ThinSink::OnSlice(const model::Slice& s) {
  Thread& t = ThreadOf(s.tid);
  switch (s.kind) {
    case model::Slice::kBegin: {
      if (s.inferred) {
        // The deferred begin of a frame whose end came before.
        auto it = t.dropped_inferred.find({s.name, s.ts});
        if (it != t.dropped_inferred.end()) {
          if (--it->second == 0) t.dropped_inferred.erase(it);
          return;
        }
        to_->OnSlice(s);
        return;
      }
      Release(t, s.ts);
      const bool below_deep = !t.stack.empty() && t.stack.back().deep;
      const bool deep =
          below_deep || (options_.max_depth != 0 && t.stack.size() + 1 > options_.max_depth);
      t.stack.push_back({s, deep});
      Release(t, s.ts);  // at once when there is no minimum duration
      return;
    }
    case model::Slice::kEnd: {
      if (s.inferred || t.stack.empty()) {
        if (TooShort(s.begin_ts, s.ts)) {
          stats_.too_short++;
          if (s.inferred) t.dropped_inferred[{s.name, s.begin_ts}]++;
          return;
        }
        to_->OnSlice(s);
        return;
      }
      Release(t, s.ts);
      const Open o = t.stack.back();
      t.stack.pop_back();
      if (t.sent > t.stack.size()) {  // its begin went out
        t.sent--;
        to_->OnSlice(s);
      } else if (o.deep) {
        stats_.too_deep++;
      } else {
        stats_.too_short++;
      }
      return;
    }
    case model::Slice::kComplete: {
      // "[unknown]" spans, written when the stack is reset.
      if (options_.max_depth != 0 && t.stack.size() + 1 > options_.max_depth) {
        stats_.too_deep++;
        return;
      }
      if (TooShort(s.ts, s.end_ts)) {
        stats_.too_short++;
        return;
      }
      Release(t, s.ts);
      to_->OnSlice(s);
      return;
    }
    case model::Slice::kInstant:
    case model::Slice::kCounter:
      Release(t, s.ts);
      to_->OnSlice(s);
      return;
  }
}

Result<void> ThinSink::Finish() {
  for (auto& [tid, t] : threads_) {
    while (t.sent < t.stack.size() && !t.stack[t.sent].deep) to_->OnSlice(t.stack[t.sent++].begin);
  }
  return to_->Finish();
}

}  // namespace ptsnap::pipeline
