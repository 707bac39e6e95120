#include "pipeline/snapshot_markers.h"

#include "output/summary.h"

namespace ptsnap::pipeline {

std::string SnapshotEndMarker(const trace::Snapshot& sn, std::string_view last_mark,
                              uint64_t slow_first_seen) {
  std::string cut;
  if (slow_first_seen != UINT64_MAX && slow_first_seen > sn.call_begin)
    cut = "; it began " + output::FormatDuration(slow_first_seen - sn.call_begin) +
          " before the snapshot starts: use a bigger --snapshot-size";
  // A slow call's snapshot names the request it served, where the
  // program marks them (docs/decoding.md, "Marks").
  std::string mark;
  if (sn.reason == trace::SnapshotReason::kSlowCall && !last_mark.empty())
    mark = "; mark in force " + std::string(last_mark);
  return "[snapshot " + std::to_string(sn.seq) + ": " + std::string(trace::ToString(sn.reason)) +
         (sn.detail.empty() ? "" : " " + sn.detail) + mark + cut + "]";
}

std::string SignalMarker(const trace::Snapshot& sn, int32_t pid, int32_t tid) {
  if (sn.reason != trace::SnapshotReason::kFatalSignal) return "";
  const bool killed = sn.tid != 0 ? static_cast<int32_t>(sn.tid) == tid : tid == pid;
  return killed ? "[signal " + sn.detail + "]" : "";
}

}  // namespace ptsnap::pipeline
