#include "decode/schedule.h"

#include <algorithm>
#include <variant>

namespace ptsnap::decode {

// PERF_RECORD_SWITCH_CPU_WIDE (linux/perf_event.h): written on the CPU at
// each context switch, twice: on switch-out (misc SWITCH_OUT) with the
// outgoing task in sample_id and the incoming one in next_prev_pid/tid,
// and on switch-in with the incoming task in sample_id and the previous one
// in next_prev. Either says who runs from its time on. ITRACE_START names
// the task running when tracing started on the CPU. Task 0 is the idle task.
void Schedule::Add(const trace::Record& rec) {
  if (rec.type != PERF_RECORD_SWITCH_CPU_WIDE && rec.type != PERF_RECORD_ITRACE_START) return;
  int32_t cpu = static_cast<int32_t>(rec.sample_id.cpu);
  auto thread = [cpu](uint32_t pid, uint32_t tid) {
    if (tid == 0 || tid == UINT32_MAX) return ThreadId{0, -1 - cpu};
    return ThreadId{static_cast<int32_t>(pid), static_cast<int32_t>(tid)};
  };
  ThreadId next, prev;
  bool have_prev = false;
  if (const auto* sw = std::get_if<trace::Switch>(&rec.body)) {
    if (!sw->cpu_wide) return;  // per-thread PERF_RECORD_SWITCH: nothing about the CPU
    ThreadId self = thread(rec.sample_id.pid, rec.sample_id.tid);
    ThreadId other = thread(sw->next_prev_pid, sw->next_prev_tid);
    next = sw->out ? other : self;
    prev = sw->out ? self : other;
    have_prev = true;
  } else if (const auto* it = std::get_if<trace::ItraceStart>(&rec.body)) {
    next = thread(it->pid, it->tid);
  } else {
    return;
  }
  std::vector<Run>& runs = runs_[cpu];
  if (runs.empty() && have_prev) runs.push_back({0, prev});
  uint64_t time = rec.sample_id.time;
  if (!runs.empty() && runs.back().thread == next) return;
  if (!runs.empty() && time < runs.back().time) time = runs.back().time;
  runs.push_back({time, next});
}

ThreadId Schedule::ThreadAt(int32_t cpu, uint64_t time) const {
  auto it = runs_.find(cpu);
  if (it == runs_.end() || it->second.empty()) return {0, -1 - cpu};
  const std::vector<Run>& v = it->second;
  auto r = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Run& x) { return t < x.time; });
  return r == v.begin() ? ThreadId{0, -1 - cpu} : std::prev(r)->thread;
}

std::vector<ThreadId> Schedule::CpuThreads(int32_t cpu) const {
  std::vector<ThreadId> out{{0, -1 - cpu}};
  if (auto it = runs_.find(cpu); it != runs_.end()) {
    for (const Run& r : it->second) {
      if (std::find(out.begin(), out.end(), r.thread) == out.end()) out.push_back(r.thread);
    }
  }
  return out;
}

}  // namespace ptsnap::decode
