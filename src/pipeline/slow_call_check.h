// The slow-call check of DecodeTraceDir (--slower-than): whether a slow
// call's snapshot reaches back to the call's start. It watches the first
// time the call's thread shows in the snapshot's streams; a snapshot that
// begins after the call did lost its start to the ring's size. Pure.
// Internal to pipeline/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/manifest.h"

namespace ptsnap::pipeline {

class SlowCallCheck {
 public:
  // `snapshots` (the manifest's) must outlive the check.
  explicit SlowCallCheck(const std::vector<trace::Snapshot>& snapshots);

  // A stream of `snapshot` begins: watch its slow call's thread, if it has one.
  void Watch(uint32_t snapshot);
  // One event of the stream being decoded (time 0: before its first timing
  // packet, not looked at).
  void OnEvent(int32_t tid, uint64_t time) {
    if (first_ != nullptr && tid == tid_ && time != 0 && time < *first_) *first_ = time;
  }

  // When the slow call's thread first showed in `snapshot`; UINT64_MAX: it
  // did not, or the snapshot has no slow call.
  [[nodiscard]] uint64_t FirstSeen(uint32_t snapshot) const;
  // One line per snapshot that began after its slow call did, with the fix
  // (`snapshot_size`: the recording's ring per thread, in bytes).
  [[nodiscard]] std::vector<std::string> Warnings(uint64_t snapshot_size) const;

 private:
  std::map<uint32_t, const trace::Snapshot*> snaps_;
  std::map<uint32_t, uint64_t> first_seen_;  // snapshot -> time
  int32_t tid_ = -1;                         // the thread being watched, -1: none
  uint64_t* first_ = nullptr;
};

// A perf-clock time as seconds with nanoseconds: "4711.000123456 s".
[[nodiscard]] std::string PerfClockTime(uint64_t ns);

}  // namespace ptsnap::pipeline
