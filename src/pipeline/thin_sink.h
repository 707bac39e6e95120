// ThinSink: thins the slice stream on its way to a timeline writer, so a
// trace fits the viewer (`ptsnap decode --max-depth N --min-duration D`,
// docs/decoding.md "Thinning the timeline"). It drops
//   - frames deeper than `max_depth` (depth 1 = the lowest frame whose start
//     was seen on the thread; frames whose start was not seen, the stack a
//     snapshot began in, are never dropped by depth: their depth is only
//     known once the segment is over), and everything above them;
//   - frames shorter than `min_duration_ns` (end - begin), and so everything
//     under them, which is shorter still.
// Markers, processes and threads pass unchanged; what remains nests as
// before. Dropped frames are counted (stats()), never silently lost.
//
// A frame's begin is held until the thread's stream shows it lasted
// `min_duration_ns` (a later event on the thread at or past begin + D, or
// its end), then sent, with the held begins below it first: memory is one
// held slice per open frame. The downstream sink sees each thread's slices
// in the same order as before, except that a marker can come before the
// begin (earlier in time) of a frame still held at the marker's time;
// Perfetto orders events by timestamp. Borrowing: `to` must outlive it.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/slice.h"

namespace ptsnap::pipeline {

struct ThinOptions {
  size_t max_depth = 0;          // 0: no limit
  uint64_t min_duration_ns = 0;  // 0: keep every length
  [[nodiscard]] bool active() const { return max_depth != 0 || min_duration_ns != 0; }
};

struct ThinStats {
  uint64_t too_deep = 0;   // frames (and [unknown] spans) dropped by max_depth
  uint64_t too_short = 0;  // dropped by min_duration_ns (and not already by depth)
};

class ThinSink : public model::SliceSink {
 public:
  ThinSink(model::SliceSink* to, ThinOptions options) : to_(to), options_(options) {}
  void OnProcess(int32_t pid, const std::string& name) override { to_->OnProcess(pid, name); }
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override {
    to_->OnThread(pid, tid, name);
  }
  void OnSlice(const model::Slice& s) override;
  // Sends the begins still held (frames that never ended), then finishes `to`.
  Result<void> Finish() override;
  [[nodiscard]] const ThinStats& stats() const { return stats_; }

 private:
  struct Open {
    model::Slice begin;
    bool deep = false;
  };
  struct Thread {
    std::vector<Open> stack;  // frames whose start was seen, outermost first
    size_t sent = 0;          // stack[0, sent) have had their begin sent
    // Inferred frames dropped at their end, by (name, begin): their
    // deferred begins come later and are dropped too.
    std::map<std::pair<const std::string*, uint64_t>, int> dropped_inferred;
  };
  Thread& ThreadOf(int32_t tid);
  // Sends the held begins that lasted min_duration_ns by `now`.
  void Release(Thread& t, uint64_t now);
  bool TooShort(uint64_t begin, uint64_t end) const {
    return options_.min_duration_ns != 0 && (end < begin || end - begin < options_.min_duration_ns);
  }

  model::SliceSink* to_;
  ThinOptions options_;
  ThinStats stats_;
  std::unordered_map<int32_t, Thread> threads_;
  int32_t last_tid_ = 0;
  Thread* last_ = nullptr;
};

}  // namespace ptsnap::pipeline
