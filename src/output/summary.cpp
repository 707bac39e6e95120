#include "output/summary.h"

#include <algorithm>
#include <cstdio>

namespace ptsnap::output {

// Threads are counted when they have slices: per-CPU traces name every
// thread the switch sideband mentions, and the CPUs' own tracks.
void SummarySink::OnThread(int32_t, int32_t, const std::string&) {}

FunctionTime& SummarySink::Fn(const std::string* name) {
  FunctionTime& f = functions_[name];
  if (f.name.empty()) f.name = *name;
  return f;
}

void SummarySink::Account(FunctionTime& f, bool outermost, uint64_t dur, uint64_t child_ns) {
  f.calls++;
  f.self_ns += dur - std::min(dur, child_ns);
  if (outermost) f.total_ns += dur;  // not inside another frame of itself
}

void SummarySink::OnSlice(const model::Slice& s) {
  if (last_thread_ == nullptr || last_tid_ != s.tid) {
    last_thread_ = &threads_[s.tid];  // unordered_map references stay valid
    last_tid_ = s.tid;
  }
  ThreadState& t = *last_thread_;
  uint64_t begin = s.ts, end = s.ts;
  if (s.kind == model::Slice::kEnd) begin = s.begin_ts;
  if (s.kind == model::Slice::kComplete) end = s.end_ts;
  first_ = std::min(first_, begin);
  last_ = std::max(last_, end);
  uint64_t dur = end >= begin ? end - begin : 0;
  switch (s.kind) {
    case model::Slice::kBegin:
      if (s.inferred) {
        // Deferred inferred begins come after every frame of the segment
        // has ended: the segment is over.
        t.orphan_ns = 0;
        return;
      }
      slices_++;
      {
        int& depth = t.on_stack[s.name];
        ++depth;
        t.stack.push_back({&Fn(s.name), &depth, 0});
      }
      return;
    case model::Slice::kEnd: {
      if (s.inferred || t.stack.empty()) {
        // An inferred frame encloses everything that ended with no open
        // parent since the previous inferred frame ended.
        slices_++;
        Account(Fn(s.name), t.on_stack[s.name] == 0, dur, t.orphan_ns);
        t.orphan_ns = dur;
        return;
      }
      Open o = t.stack.back();
      t.stack.pop_back();
      Account(*o.fn, --*o.depth == 0, dur, o.child_ns);
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      return;
    }
    case model::Slice::kComplete:
      slices_++;
      Account(Fn(s.name), t.on_stack[s.name] == 0, dur, 0);
      if (!t.stack.empty()) {
        t.stack.back().child_ns += dur;
      } else {
        t.orphan_ns += dur;
      }
      return;
    case model::Slice::kInstant: return;
  }
}

std::vector<FunctionTime> SummarySink::Top(size_t n, bool by_self) const {
  std::vector<FunctionTime> all;
  all.reserve(functions_.size());
  for (const auto& [k, v] : functions_) all.push_back(v);
  auto key = [by_self](const FunctionTime& f) { return by_self ? f.self_ns : f.total_ns; };
  std::sort(all.begin(), all.end(), [&](const FunctionTime& a, const FunctionTime& b) {
    if (key(a) != key(b)) return key(a) > key(b);
    return a.name < b.name;
  });
  if (all.size() > n) all.resize(n);
  return all;
}

std::string FormatDuration(uint64_t ns) {
  char buf[32];
  if (ns < 1000) {
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  } else if (ns < 1000000) {
    std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 1000000000) {
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

}  // namespace ptsnap::output
