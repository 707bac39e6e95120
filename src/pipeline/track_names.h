// Track names for DecodeTraceDir: what the sideband says of each thread
// (its last COMM, when it exited) and the process and thread names the
// timeline shows, each named once. Pure: no I/O. Internal to pipeline/.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "decode/schedule.h"
#include "model/slice.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::pipeline {

// What the sideband records say of the threads.
struct SidebandThreads {
  std::map<int32_t, std::string> comms;  // the last COMM of each tid
  // When each thread exited (PERF_RECORD_EXIT): its frames end there, not
  // at a later snapshot of the other threads (CallStackModel::Marker).
  std::map<int32_t, uint64_t> exits;
  // The earliest record's time, where what was recorded began (UINT64_MAX:
  // no records).
  uint64_t earliest_ns = UINT64_MAX;
};
[[nodiscard]] SidebandThreads ReadSidebandThreads(const std::vector<trace::Record>& records);

// A process's track name: "cmdline [pid=P]", the cmdline being the
// recorded command for its first pid, else the process's COMM, "cpus" for
// pid 0 and "process" when nothing names it.
[[nodiscard]] std::string ProcessTrackName(const trace::Manifest& m,
                                           const std::map<int32_t, std::string>& comms,
                                           int32_t pid);

// Names each process and thread a stream shows on `sink`, once (the first
// name given wins), in the order the streams come.
class TrackNamer {
 public:
  // `m`, `comms` and `sink` must outlive the namer.
  TrackNamer(const trace::Manifest& m, const std::map<int32_t, std::string>& comms,
             model::SliceSink& sink)
      : m_(m), comms_(comms), sink_(sink) {}

  // A per-thread stream (tid >= 0), or a per-process one (tid < 0: its pid's
  // track; pid < 0: pid 0's).
  void NameStream(const trace::Stream& s);
  // A per-CPU stream: `threads` are those the switch sideband puts on its
  // CPU (decode::PtDecoder::CpuThreads); tid < 0 stands for the CPU's own
  // track ("cpu N"), for stretches with no thread known (or idle).
  void NameCpuStream(int32_t cpu, const std::vector<decode::ThreadId>& threads);

 private:
  void NameProcess(int32_t pid);
  void NameThread(int32_t pid, int32_t tid, const std::string& name);
  [[nodiscard]] std::string Comm(int32_t tid) const;

  const trace::Manifest& m_;
  const std::map<int32_t, std::string>& comms_;
  model::SliceSink& sink_;
  std::set<int32_t> pids_named_;
  std::set<int32_t> tids_named_;
};

}  // namespace ptsnap::pipeline
