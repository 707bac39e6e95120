#include "pipeline/snapshot_overlap.h"

namespace ptsnap::pipeline {

void SnapshotOverlap::BeginStream(bool stitching) {
  stitching_ = stitching;
  stream_repeats_ = stream_checked_ = false;
}

SnapshotOverlap::Verdict SnapshotOverlap::Filter(int32_t pid, int32_t tid, uint64_t time) {
  if (const Thread thread{pid, tid}; thread != run_.thread) {
    auto c = covered_.find(thread);
    run_.thread = thread;
    run_.covered = c == covered_.end() ? nullptr : &c->second;
    run_.seen = &seen_[thread];
  }
  if (run_.covered != nullptr &&
      (time < run_.covered->time ||
       (time == run_.covered->time && run_.seen->tie_skipped < run_.covered->at_time))) {
    if (time == run_.covered->time) run_.seen->tie_skipped++;
    skipped_++;
    stream_repeats_ = stream_repeats_ || time != 0;
    return {.skip = true};
  }
  if (time == 0) return {};  // the thread's first snapshot: nothing to skip
  if (time > run_.seen->time) {
    run_.seen->time = time;
    run_.seen->at_time = 1;
  } else if (time == run_.seen->time) {
    run_.seen->at_time++;
  }
  if (!stitching_ || run_.covered == nullptr || stream_checked_) return {};
  stream_checked_ = true;
  if (stream_repeats_) return {};
  gaps_++;
  return {.gap = true, .gap_from = run_.covered->time};
}

void SnapshotOverlap::EndSegment() {
  for (const auto& [thread, t] : seen_) {
    Cover& c = covered_[thread];
    if (t.time > c.time) {
      c = {t.time, t.at_time, 0};
    } else if (t.time == c.time) {
      c.at_time += t.at_time;
    }
  }
  seen_.clear();
  run_ = {};
}

}  // namespace ptsnap::pipeline
