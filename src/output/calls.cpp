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

CallSink::Function& CallSink::ThreadState::OnStack(const std::string* name) {
  constexpr size_t kRecent = 256;
  if (recent.empty()) recent.resize(kRecent);
  Depth& d = recent[(reinterpret_cast<uintptr_t>(name) >> 4) % kRecent];
  if (d.name != name || d.f == nullptr) d = {name, &on_stack[name]};
  Sync(*d.f);
  return *d.f;
}

void CallSink::ThreadState::Sync(Function& f) const {
  if (f.gen == gen) return;
  f.gen = gen;
  f.segment_total = 0;
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
                     uint64_t child, bool outermost, bool inferred, size_t depth, uint64_t total) {
  const uint64_t dur = end - begin;
  Call c;
  c.pid = s.pid;
  c.tid = s.tid;
  c.name = s.name;
  c.dso = s.dso;
  c.begin = begin;
  c.end = end;
  c.self_ns = dur - std::min(dur, child);
  c.outermost = outermost;
  c.total_ns = total;
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

uint64_t CallSink::thread_spans_ns() const {
  uint64_t sum = 0;
  for (const auto& [tid, t] : threads_)
    if (t.last >= t.first && t.first != UINT64_MAX) sum += t.last - t.first;
  return sum;
}

void CallSink::OnSlice(const model::Slice& s) {
  if (s.kind == model::Slice::kCounter) return;  // no call, no time of the trace's
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
  if (s.kind == model::Slice::kInstant && s.name != nullptr &&
      (s.name->starts_with("[decode error") || s.name->starts_with("[overflow") ||
       s.name->starts_with("[not traced until"))) {
    t.gen++;  // the model restarts the stack: a new segment's inclusive time
  }
  if (s.kind == model::Slice::kInstant) {
    if (IsDecodeError(s)) {
      t.closing = true;
      t.was_cut = std::move(t.cut);
      t.cut.clear();
    } else if (s.name->starts_with("[mark ")) {
      OnMark(s.tid, std::string_view(*s.name).substr(6, s.name->size() - 7), s.ts);
    } else {
      t.cut.clear();  // a snapshot's end, an overflow: what comes next is no one call's rest
    }
  }
  uint64_t begin = s.ts, end = s.ts;
  if (s.kind == model::Slice::kEnd) begin = s.begin_ts;
  if (s.kind == model::Slice::kComplete) end = s.end_ts;
  first_ = std::min(first_, begin);
  last_ = std::max(last_, end);
  t.first = std::min(t.first, begin);
  t.last = std::max(t.last, end);
  end = std::max(end, begin);
  const uint64_t dur = end - begin;
  switch (s.kind) {
    case model::Slice::kBegin:
      if (s.inferred) {
        // Deferred inferred begins come after every frame of the segment
        // has ended: the segment is over.
        t.orphan_ns = 0;
        t.gen++;  // the next frames' inclusive time is a new segment's
        if (t.segment_open) {
          t.segment_open = false;
          OnSegmentEnd(s.tid);
        }
        return;
      }
      slices_++;
      {
        Function& f = t.OnStack(s.name);
        ++f.depth;
        OnEnter(s.tid, s.name, s.ts, t.stack.size());
        t.stack.push_back({s.name, &f, 0});
      }
      return;
    case model::Slice::kEnd: {
      if (s.inferred || t.stack.empty()) {
        // An inferred frame encloses everything that ended with no open
        // parent since the previous inferred frame ended.
        slices_++;
        const uint64_t orphans = t.orphan_ns;
        t.orphan_ns = dur;
        // It began at the segment's start, so it encloses every frame of its
        // function that ended in the segment: only the rest is new time.
        Function& f = t.OnStack(s.name);
        const bool outermost = f.depth == 0;
        uint64_t total = 0;
        if (outermost) {
          const uint64_t inside = f.last_end > begin ? f.segment_total : 0;
          total = dur - std::min(dur, inside);
          f.segment_total = std::max(inside, dur);
          f.last_end = end;
        }
        Ended(t, s, begin, end, orphans, outermost, true, 0, total);
        return;
      }
      Open o = t.stack.back();
      t.stack.pop_back();
      const bool outermost = --o.f->depth == 0;
      if (outermost) {
        t.Sync(*o.f);
        o.f->segment_total += dur;
        o.f->last_end = end;
      }
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      Ended(t, s, begin, end, o.child_ns, outermost, false, t.stack.size(), outermost ? dur : 0);
      return;
    }
    case model::Slice::kComplete:
      slices_++;
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      {
        Function& f = t.OnStack(s.name);
        const bool outermost = f.depth == 0;
        if (outermost) {
          f.segment_total += dur;
          f.last_end = end;
        }
        Ended(t, s, begin, end, 0, outermost, false, t.stack.size(), outermost ? dur : 0);
      }
      return;
    case model::Slice::kInstant:
    case model::Slice::kCounter: return;
  }
}

}  // namespace ptsnap::output
