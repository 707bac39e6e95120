// The per-CPU schedule: who ran on each CPU when, from the switch sideband
// (PERF_RECORD_SWITCH_CPU_WIDE, ITRACE_START). Owns one time-sorted list of
// runs per CPU; per-CPU streams ask it which thread a stretch of trace
// belongs to. Pure: built from records, no I/O.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "trace/perf_record.h"

namespace ptsnap::decode {

// A thread: {pid, tid}; {0, -1 - cpu} is a CPU's own track (idle or
// unknown).
struct ThreadId {
  int32_t pid = 0, tid = 0;
  friend bool operator==(const ThreadId&, const ThreadId&) = default;
};

class Schedule {
 public:
  // Takes one sideband record, in time order: a cpu-wide switch (either
  // half) or an ITRACE_START says who runs on its CPU from its time on;
  // every other record is ignored.
  void Add(const trace::Record& rec);

  // Who ran on `cpu` at perf time `time`: {pid, tid}, or {0, -1 - cpu} when
  // unknown or idle (the CPU's own track).
  [[nodiscard]] ThreadId ThreadAt(int32_t cpu, uint64_t time) const;
  // Every thread ThreadAt can return for `cpu` (the CPU's own track first).
  [[nodiscard]] std::vector<ThreadId> CpuThreads(int32_t cpu) const;

 private:
  // From `time` on, `thread` runs.
  struct Run {
    uint64_t time = 0;
    ThreadId thread;
  };
  std::unordered_map<int32_t, std::vector<Run>> runs_;  // per CPU, sorted by time
};

}  // namespace ptsnap::decode
