// The snapshot-overlap filter of DecodeTraceDir (docs/decoding.md,
// "Overlapping snapshots"). Snapshot mode keeps the AUX ring between
// snapshots, so a thread's later snapshot can repeat the end of its earlier
// one: per thread, the filter keeps the last time decoded in earlier
// snapshots (`covered`) and in this one (`seen`), with the number of events
// at that time. Events before `covered`, and at it as many as were decoded
// there, are that repeat and are skipped (a snapshot can end between two
// events of one timestamp: a trigger's disable and the resume after it).
//
// Where a stitched thread's next snapshot repeats none of the last one (its
// ring wrapped in between), the filter says so at the stream's first new
// event: the stretch between is not traced (CallStackModel::Gap).
//
// Pure: it sees (pid, tid, time) and answers; the caller acts on the model.
// Internal to pipeline/.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

namespace ptsnap::pipeline {

class SnapshotOverlap {
 public:
  // `active`: the trace is in snapshot mode; else every event is kept.
  explicit SnapshotOverlap(bool active) : active_(active) {}

  // A stream begins. `stitching`: its thread's stack goes on from its
  // earlier snapshot's (per-thread streams of snapshot mode), so a stream
  // that repeats none of it opens a gap.
  void BeginStream(bool stitching);

  struct Verdict {
    bool skip = false;  // a repeat of an earlier snapshot: leave it out
    // Not skipped, and the first new event of a stitched stream that
    // repeated nothing: the thread was not traced from `gap_from` (the
    // time its earlier snapshots covered) to this event.
    bool gap = false;
    uint64_t gap_from = 0;
  };
  // One event, in decoding order. Time 0 (before the stream's first timing
  // packet) is skipped where an earlier snapshot covered the thread and the
  // stream is stitched, else kept.
  Verdict OnEvent(int32_t pid, int32_t tid, uint64_t time) {
    // (An event before this stream's first timing packet has time 0: for
    // a thread an earlier snapshot covered, it is part of the repeat.)
    if (!active_ || (time == 0 && !stitching_)) return {};  // inline: the common case
    return Filter(pid, tid, time);
  }

  // A snapshot's streams are done (a model segment ended): what they saw
  // is covered from now on.
  void EndSegment();

  [[nodiscard]] bool active() const { return active_; }
  [[nodiscard]] uint64_t skipped() const { return skipped_; }
  [[nodiscard]] uint64_t gaps() const { return gaps_; }

 private:
  struct Cover {
    uint64_t time = 0, at_time = 0;
    uint64_t tie_skipped = 0;  // `seen` only: repeated events at covered's time
  };
  using Thread = std::pair<int32_t, int32_t>;  // pid, tid
  Verdict Filter(int32_t pid, int32_t tid, uint64_t time);

  const bool active_;
  bool stitching_ = false;
  // This stream: whether it repeated any event of the thread's earlier
  // snapshots, and whether its first new event was looked at.
  bool stream_repeats_ = false, stream_checked_ = false;
  std::map<Thread, Cover> covered_, seen_;
  // The thread of the previous event and its entries: events come in runs
  // of one thread, so the maps are looked up once per run, not per event.
  struct {
    Thread thread{INT32_MIN, INT32_MIN};
    const Cover* covered = nullptr;  // null: no earlier snapshot of it
    Cover* seen = nullptr;
  } run_;
  uint64_t skipped_ = 0, gaps_ = 0;
};

}  // namespace ptsnap::pipeline
