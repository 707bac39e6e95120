// Stack samples to spans (docs/decoding.md, "Sampled traces"): per thread,
// consecutive samples whose stacks share a prefix continue those frames;
// at the first level that differs the old frames end and new ones begin.
//
// A frame is the same as the one open at its level when it is the same
// function (symbol start) called from the same return address in the
// frame below it, where both samples show one (a leaf shows none), so a
// call from another site is a new call. Compared outermost first. A span begins at
// the first sample that shows it and ends at the first sample where it is
// gone; when a thread's samples stop (a gap longer than `gap_periods`
// periods, another space, the end of a stream or snapshot), at its last
// sample + one period. So each edge is known to within one period.
//
// Slices go to a SliceSink, as the call-stack model's do. Memory is bounded
// by the number of threads and the stack depth.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decode/samples.h"
#include "decode/symbols.h"
#include "model/slice.h"

namespace ptsnap::model {

struct SampleSpanStats {
  uint64_t samples = 0;       // samples taken
  uint64_t spans = 0;         // frames begun
  uint64_t gaps = 0;          // threads' samples stopping for longer than the gap
  uint64_t out_of_order = 0;  // samples older than their thread's last (skipped)
};

class SampleSpanModel {
 public:
  // `symbols` resolves frames, `sink` receives slices; both outlive this.
  // `period_ns` is the sampling period (> 0).
  SampleSpanModel(decode::Symbolizer* symbols, SliceSink* sink, uint64_t period_ns,
                  uint64_t gap_periods = 10);

  // One sample of thread `tid` (process `pid`) at `time`, its frames
  // outermost first, resolved in Symbolizer key `space`. Per thread, times
  // must not decrease (older samples are counted and skipped).
  void OnSample(int32_t pid, int32_t tid, int32_t space, uint64_t time,
                std::span<const decode::StackFrame> frames);
  // Ends every open frame of every thread at its last sample + one period
  // (the end of a stream or snapshot). With a `marker` name, each thread
  // that had samples since the last EndAll then gets that zero-length
  // marker (the snapshot's) at `marker_ts`, or at its frames' end if later.
  void EndAll(std::string_view marker = {}, uint64_t marker_ts = 0);
  // A zero-length marker on thread `tid` at its last sample, inside the
  // frames still open there (a fatal signal's "[signal SIGSEGV]"); nothing
  // when the thread has no open frames.
  void MarkThread(int32_t tid, std::string_view name);

  [[nodiscard]] const SampleSpanStats& stats() const { return stats_; }
  [[nodiscard]] uint64_t period_ns() const { return period_; }

 private:
  struct Frame {
    uint64_t fn_start = 0;
    uint64_t call_site = 0;  // the return address into it; 0: leaf, not known
    const std::string* name = nullptr;
    const std::string* dso = nullptr;
    int32_t space = 0;
    uint64_t begin = 0;
  };
  struct Thread {
    int32_t pid = 0, space = 0;
    uint64_t last = 0;
    bool active = false;  // has open frames / samples since the last end
    std::vector<Frame> stack;
  };
  void EndFrames(int32_t tid, Thread& t, size_t from_level, uint64_t ts);
  Slice SliceOf(int32_t tid, const Thread& t, const Frame& f, uint64_t ts) const;

  decode::Symbolizer* symbols_;
  SliceSink* sink_;
  uint64_t period_;
  uint64_t gap_;
  SampleSpanStats stats_;
  std::unordered_map<int32_t, Thread> threads_;
  std::vector<int32_t> order_;  // tids in first-seen order (stable EndAll output)
  std::vector<Frame> scratch_;
};

}  // namespace ptsnap::model
