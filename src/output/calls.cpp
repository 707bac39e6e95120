#include "output/calls.h"

#include <algorithm>

namespace ptsnap::output {

CallSink::ThreadState& CallSink::Thread(int32_t tid) {
  if (last_thread_ == nullptr || last_tid_ != tid) {
    last_thread_ = &threads_[tid];  // unordered_map references stay valid
    last_tid_ = tid;
  }
  return *last_thread_;
}

int& CallSink::ThreadState::OnStack(const std::string* name) {
  constexpr size_t kRecent = 256;
  if (recent.empty()) recent.resize(kRecent);
  Depth& d = recent[(reinterpret_cast<uintptr_t>(name) >> 4) % kRecent];
  if (d.name != name || d.depth == nullptr) d = {name, &on_stack[name]};
  return *d.depth;
}

std::vector<const std::string*> CallSink::OpenFrames(int32_t tid) const {
  std::vector<const std::string*> out;
  auto it = threads_.find(tid);
  if (it == threads_.end()) return out;
  out.reserve(it->second.stack.size());
  for (const Open& o : it->second.stack) out.push_back(o.name);
  return out;
}

void CallSink::EndAllSegments() {
  for (auto& [tid, t] : threads_) {
    if (!t.segment_open) continue;
    t.segment_open = false;
    OnSegmentEnd(tid);
  }
}

void CallSink::Ended(ThreadState& t, const model::Slice& s, uint64_t begin, uint64_t end,
                     uint64_t child, bool outermost, bool inferred, size_t depth) {
  const uint64_t dur = end - begin;
  Call c;
  c.pid = s.pid;
  c.tid = s.tid;
  c.name = s.name;
  c.begin = begin;
  c.end = end;
  c.self_ns = dur - std::min(dur, child);
  c.outermost = outermost;
  c.inferred = inferred;
  c.depth = depth;
  if (inferred) {
    // Inferred after a decode error that cut a frame of this function:
    // the rest of that call (itself cut again, when this error closes it).
    std::vector<const std::string*>& before = t.closing ? t.was_cut : t.cut;
    if (auto it = std::find(before.begin(), before.end(), s.name); it != before.end()) {
      before.erase(it);
      c.continued = true;
    }
  }
  if (t.closing) {
    c.cut = true;
    t.cut.push_back(s.name);
  }
  t.segment_open = true;
  OnCall(c);
}

bool CallSink::IsDecodeError(const model::Slice& s) {
  return s.kind == model::Slice::kInstant && s.name != nullptr &&
         s.name->starts_with("[decode error");
}

void CallSink::OnSlice(const model::Slice& s) {
  ThreadState& t = Thread(s.tid);
  t.pid = s.pid;
  if (t.closing && s.kind != model::Slice::kEnd) {
    // The frames the decode error closed have ended. A call cut before
    // whose rest did not show again before this error (the stretch
    // between them decoded nothing of it) may still go on after it.
    t.closing = false;
    t.cut.insert(t.cut.end(), t.was_cut.begin(), t.was_cut.end());
    t.was_cut.clear();
  }
  if (s.kind == model::Slice::kInstant) {
    if (IsDecodeError(s)) {
      t.closing = true;
      t.was_cut = std::move(t.cut);
      t.cut.clear();
    } else {
      t.cut.clear();  // a snapshot's end, an overflow: what comes next is no one call's rest
    }
  }
  uint64_t begin = s.ts, end = s.ts;
  if (s.kind == model::Slice::kEnd) begin = s.begin_ts;
  if (s.kind == model::Slice::kComplete) end = s.end_ts;
  first_ = std::min(first_, begin);
  last_ = std::max(last_, end);
  end = std::max(end, begin);
  const uint64_t dur = end - begin;
  switch (s.kind) {
    case model::Slice::kBegin:
      if (s.inferred) {
        // Deferred inferred begins come after every frame of the segment
        // has ended: the segment is over.
        t.orphan_ns = 0;
        if (t.segment_open) {
          t.segment_open = false;
          OnSegmentEnd(s.tid);
        }
        return;
      }
      slices_++;
      {
        int& depth = t.OnStack(s.name);
        ++depth;
        OnEnter(s.tid, s.name, s.ts, t.stack.size());
        t.stack.push_back({s.name, &depth, 0});
      }
      return;
    case model::Slice::kEnd: {
      if (s.inferred || t.stack.empty()) {
        // An inferred frame encloses everything that ended with no open
        // parent since the previous inferred frame ended.
        slices_++;
        const uint64_t orphans = t.orphan_ns;
        t.orphan_ns = dur;
        Ended(t, s, begin, end, orphans, t.OnStack(s.name) == 0, true, 0);
        return;
      }
      Open o = t.stack.back();
      t.stack.pop_back();
      const bool outermost = --*o.depth == 0;
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      Ended(t, s, begin, end, o.child_ns, outermost, false, t.stack.size());
      return;
    }
    case model::Slice::kComplete:
      slices_++;
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      Ended(t, s, begin, end, 0, t.OnStack(s.name) == 0, false, t.stack.size());
      return;
    case model::Slice::kInstant: return;
  }
}

}  // namespace ptsnap::output
