#include "output/plausibility.h"

#include <algorithm>
#include <map>

#include "output/summary.h"

namespace ptsnap::output {

void PlausibilityCheck::OnCall(const Call& c) {
  // Calls come in runs of one thread: its entry is looked up once a run.
  if (last_ == nullptr || last_tid_ != c.tid) {
    last_ = &threads_[c.tid];  // unordered_map references stay valid
    last_tid_ = c.tid;
  }
  Thread& t = *last_;
  t.first = std::min(t.first, c.begin);
  t.last = std::max(t.last, c.end);
  if (c.total_ns != 0) {
    auto [it, fresh] = t.total.try_emplace(c.name);
    if (fresh) it->second.name = *c.name;
    it->second.ns += c.total_ns;
  }
  if (c.inferred && c.tid == full_execution_tid_) {
    Inferred& i = t.inferred[c.begin];
    if (i.count++ == 0) {
      i.first =
          *c.name + " on thread " + std::to_string(c.tid) + ", ending at " + FormatDuration(c.end);
    }
  }
}

Implausible PlausibilityCheck::Result() const {
  Implausible r;
  // Threads in tid order and functions by name, so "first" is stable.
  std::map<int32_t, const Thread*> by_tid;
  for (const auto& [tid, t] : threads_) by_tid[tid] = &t;
  for (const auto& [tid, t] : by_tid) {
    const uint64_t span = t->last > t->first ? t->last - t->first : 0;
    std::map<std::string, uint64_t> over;
    for (const auto& [key, total] : t->total) {
      if (total.ns > span) over[total.name] = total.ns;
    }
    r.over_span += over.size();
    if (r.first_over_span.empty() && !over.empty()) {
      r.first_over_span = over.begin()->first + " on thread " + std::to_string(tid) + ": " +
                          FormatDuration(over.begin()->second) + " in a " + FormatDuration(span) +
                          " span";
    }
    // The model begins an inferred frame at the segment's first time (or
    // one past it) when the trace did not show its start.
    for (const auto& [begin, i] : t->inferred) {
      if (begin > t->first + 1) break;
      r.inferred += i.count;
      if (r.first_inferred.empty()) r.first_inferred = i.first;
    }
  }
  return r;
}

std::string FormatImplausible(const Implausible& r) {
  if (r.count() == 0) return "";
  std::string out = "Impossible results: " + std::to_string(r.count()) +
                    ". These numbers contradict the trace itself (a misread trace, or a bug "
                    "in ptsnap: please report it with the trace directory):\n";
  if (r.over_span != 0) {
    out += "  " + std::to_string(r.over_span) +
           " function(s) with more inclusive time on a thread than the thread's span (first: " +
           r.first_over_span + ")\n";
  }
  if (r.inferred != 0) {
    out += "  " + std::to_string(r.inferred) +
           " frame(s) begun before a full-execution trace that starts at the program's first "
           "instruction (first: " +
           r.first_inferred + ")\n";
  }
  return out;
}

}  // namespace ptsnap::output
