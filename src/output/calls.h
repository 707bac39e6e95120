// CallSink: the slice stream (model/slice.h) as calls. Each frame is
// reported once, when it ends, with its self time and whether another frame
// of the same function encloses it on the thread, which is what inclusive
// time counted once needs (docs/decoding.md, "The summary"). The summary
// and `ptsnap report` are built on it.
//
// Frames whose start was not seen (inferred: the stack a snapshot starts
// in) have no kBegin before their kEnd: an inferred frame encloses every
// frame that ended with no open parent since the previous inferred frame
// ended, innermost first. Memory grows with stack depth and the number of
// distinct function names only.
//
// A decode error closes every open frame of its thread right after its
// "[decode error: ...]" marker (model/call_stack.h): those frames are cut,
// their end was not seen (Call::cut). After the resync the model infers
// the stack again; an inferred frame of a function the error cut on that
// thread is the same call going on (Call::continued), not a new one
// (docs/report.md, "Damaged traces").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/slice.h"

namespace ptsnap::output {

struct Call {
  int32_t pid = 0, tid = 0;
  const std::string* name = nullptr;
  const std::string* dso = nullptr;  // the frame's file (model::Slice::dso); null: unknown
  uint64_t begin = 0, end = 0;       // end >= begin
  uint64_t self_ns = 0;              // exclusive of callees
  bool outermost = true;             // no other open frame of this function on the thread
  // What the call adds to its function's inclusive time with recursion
  // counted once (the union of its frames' intervals on the thread): its
  // length when outermost, else 0; an inferred frame (which began at the
  // segment's start and so encloses every earlier frame of its function in
  // the segment) adds only what those did not already cover.
  uint64_t total_ns = 0;
  bool inferred = false;  // the start was not seen: `begin` is the segment's start
  // A decode error ended it: its end was not seen, `end` is the error's time.
  bool cut = false;
  // Inferred after a decode error that cut a frame of the same function on
  // the thread: the rest of that call, counted there (no new call).
  bool continued = false;
  // Open frames below it whose start was seen (OpenFrames before it).
  size_t depth = 0;
};

class CallSink : public model::SliceSink {
 public:
  CallSink() = default;
  // Not copyable: the caches point into its own maps.
  CallSink(const CallSink&) = delete;
  CallSink& operator=(const CallSink&) = delete;
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const model::Slice& s) final;
  Result<void> Finish() override { return Ok(); }

  [[nodiscard]] uint64_t first_ns() const { return first_; }
  [[nodiscard]] uint64_t last_ns() const { return last_; }
  // Threads that had slices.
  [[nodiscard]] size_t threads() const { return threads_.size(); }
  // Each thread's span (its first slice to its last) added up: what the
  // threads' streams hold of their own time, where first_ns..last_ns is the
  // span across threads (a 4 KiB ring per thread can keep microseconds of
  // each inside milliseconds between them).
  [[nodiscard]] uint64_t thread_spans_ns() const;
  [[nodiscard]] uint64_t slices() const { return slices_; }

 protected:
  // A frame ended (callees before their callers).
  virtual void OnCall(const Call& c) = 0;
  // A frame whose start was seen began, above `depth` open frames.
  virtual void OnEnter(int32_t /*tid*/, const std::string* /*name*/, uint64_t /*ts*/,
                       size_t /*depth*/) {}
  // Every frame of the thread's segment has ended (its inferred frames
  // included): what was buffered for the segment can be settled.
  virtual void OnSegmentEnd(int32_t /*tid*/) {}
  // A mark (docs/decoding.md, "Marks") on `tid` at `ts`: `text` is what
  // follows "[mark " in its name, "0x1234" or "0x6f6c6c6548 \"Hello\"".
  virtual void OnMark(int32_t /*tid*/, std::string_view /*text*/, uint64_t /*ts*/) {}
  // OnSegmentEnd for every thread whose segment is still open (at Finish).
  void EndAllSegments();
  // The open frames of `tid` whose start was seen, outermost first.
  [[nodiscard]] std::vector<const std::string*> OpenFrames(int32_t tid) const;

 private:
  // Per thread and function: its open frames whose start was seen, and the
  // inclusive time its calls added in segment `gen` (Call::total_ns).
  // A segment ends where the model restarts the stack: inferred begins,
  // a decode error, an overflow, a snapshot gap. Where nothing marks the
  // end (a stream without inferred frames), `last_end` tells the earlier
  // segment's time from this one's: it ended before this segment began.
  struct Function {
    int depth = 0;
    uint32_t gen = 0;
    uint64_t segment_total = 0;
    uint64_t last_end = 0;  // of the last call that added to segment_total
  };
  struct Open {
    const std::string* name;
    Function* f;  // the thread's entry for the function (ThreadState::on_stack)
    uint64_t child_ns;
  };
  struct ThreadState {
    int32_t pid = 0;
    uint64_t first = UINT64_MAX, last = 0;  // the thread's span (thread_spans_ns)
    std::vector<Open> stack;                // non-inferred open frames
    uint64_t orphan_ns = 0;                 // time of ended frames with no open parent
    bool segment_open = false;
    // A decode error's marker came, and the frames it closes follow it.
    bool closing = false;
    // The functions of the frames the last decode error cut, one entry per
    // frame, until an inferred frame after it continues each; while
    // `closing`, the previous error's (was_cut) and this one's (cut).
    std::vector<const std::string*> cut, was_cut;
    std::unordered_map<const std::string*, Function> on_stack;
    uint32_t gen = 1;  // the current segment (inferred frames end one)
    // In front of on_stack, by name pointer (its values never move).
    struct Depth {
      const std::string* name = nullptr;
      Function* f = nullptr;
    };
    std::vector<Depth> recent;
    Function& OnStack(const std::string* name);
    // Starts `f`'s segment total over when it is from an earlier segment.
    void Sync(Function& f) const;
  };
  ThreadState& Thread(int32_t tid);
  void Ended(ThreadState& t, const model::Slice& s, uint64_t begin, uint64_t end, uint64_t child,
             bool outermost, bool inferred, size_t depth, uint64_t total);
  // Whether a decode error's marker: "[decode error: ...]".
  static bool IsDecodeError(const model::Slice& s);

  uint64_t first_ = UINT64_MAX, last_ = 0;
  uint64_t slices_ = 0;
  std::unordered_map<int32_t, ThreadState> threads_;
  int32_t last_tid_ = 0;
  ThreadState* last_thread_ = nullptr;
};

}  // namespace ptsnap::output
