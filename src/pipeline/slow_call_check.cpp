#include "pipeline/slow_call_check.h"

#include <cstdio>

#include "base/string_util.h"
#include "output/summary.h"

namespace ptsnap::pipeline {

SlowCallCheck::SlowCallCheck(const std::vector<trace::Snapshot>& snapshots) {
  for (const auto& sn : snapshots) snaps_[sn.seq] = &sn;
}

void SlowCallCheck::Watch(uint32_t snapshot) {
  tid_ = -1;
  first_ = nullptr;
  auto it = snaps_.find(snapshot);
  if (it == snaps_.end() || it->second->call_ns == 0) return;
  tid_ = static_cast<int32_t>(it->second->tid);
  first_ = &first_seen_.emplace(snapshot, UINT64_MAX).first->second;
}

uint64_t SlowCallCheck::FirstSeen(uint32_t snapshot) const {
  auto it = first_seen_.find(snapshot);
  return it != first_seen_.end() ? it->second : UINT64_MAX;
}

std::vector<std::string> SlowCallCheck::Warnings(uint64_t snapshot_size) const {
  std::vector<std::string> warnings;
  for (const auto& [seq, first] : first_seen_) {
    const trace::Snapshot& sn = *snaps_.at(seq);
    if (first == UINT64_MAX || first <= sn.call_begin) continue;
    warnings.push_back("snapshot " + std::to_string(seq) + ": the slow call began at " +
                       PerfClockTime(sn.call_begin) + ", the snapshot starts at " +
                       PerfClockTime(first) + " (" + output::FormatDuration(first - sn.call_begin) +
                       " later): the call's start is not in the trace; use a bigger "
                       "--snapshot-size (this recording's: " +
                       base::ExactSize(snapshot_size) + " per thread)");
  }
  return warnings;
}

std::string PerfClockTime(uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu.%09llu s",
                static_cast<unsigned long long>(ns / 1'000'000'000),
                static_cast<unsigned long long>(ns % 1'000'000'000));
  return buf;
}

}  // namespace ptsnap::pipeline
