// `ptsnap replay TRACE`: the calls of a trace as an indented listing, one
// line per call, in the order they ran, as `uftrace replay` prints them
// (docs/report.md, "Replay"):
//
//   # DURATION     TID     FUNCTION
//               [  1234] | main() {
//      0.012 us [  1234] |   fib();
//      1.234 us [  1234] | } /* main */
//
// A call with no printed callee is one line with its duration; one with
// callees opens with "{" and its duration is on the closing line. Frames
// open at the edges of the window (or of the trace) are shown as such: the
// frames entered before the window open with "{ /* entered before the
// window */" above its first line, one entered before the trace (its start
// not seen) closes with "(entered before the trace)", and a frame still
// running at the window's end gets a closing line without a duration
// saying that.
// Lines of one thread are in time order; threads come as the stream holds
// them (--tid picks one). ReplaySink streams: memory grows with the stack
// depth of the threads, never with the number of calls.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/slice.h"

namespace ptsnap::report {

struct ReplayOptions {
  std::optional<int32_t> tid;  // only this thread
  // Only lines whose time lies within [since, until] ns of the trace's
  // first call (as `report --since/--until` measure).
  uint64_t since_ns = 0;
  std::optional<uint64_t> until_ns;
  size_t depth = 0;  // frames this many levels deep and deeper are left out; 0: none
  size_t limit = 0;  // lines to print; 0: all
};

class ReplaySink : public model::SliceSink {
 public:
  // Each line (with its '\n') goes to `out` as it is settled.
  ReplaySink(ReplayOptions options, std::function<void(std::string_view)> out)
      : options_(options), out_(std::move(out)) {}
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const model::Slice& s) override;
  // Closes what is still open (frames running at the trace's end).
  Result<void> Finish() override;

  // Lines the window, --tid and --depth keep, printed or past the limit.
  [[nodiscard]] uint64_t lines() const { return lines_; }
  [[nodiscard]] uint64_t printed() const { return printed_; }
  // Whether a slice of the --tid thread (of any thread, without --tid) came.
  [[nodiscard]] bool saw_thread() const { return saw_thread_; }

 private:
  struct Frame {
    const std::string* name;
    uint64_t begin;
    bool shown;  // its begin is in the window: its line is printed or pending
  };
  struct Thread {
    std::vector<Frame> stack;
    // The frame (by depth) whose "{" line waits: it is one line if nothing
    // under it is printed before it ends. npos: none.
    size_t pending = std::string::npos;
    bool past = false;  // the window has ended for this thread
  };
  bool InWindow(uint64_t ts) const;
  bool Deep(size_t depth) const { return options_.depth != 0 && depth >= options_.depth; }
  // One line of the window: the openings of the frames entered before the
  // window that are not printed yet, and the thread's pending "{", first.
  void Line(int32_t tid, Thread& t, std::optional<uint64_t> duration, size_t depth,
            const std::string& text);
  void FlushPending(int32_t tid, Thread& t);
  void OpenContext(int32_t tid, Thread& t);
  // The line itself, counted, printed within the limit.
  void Print(int32_t tid, std::optional<uint64_t> duration, size_t depth, const std::string& text);
  // Closing lines, without a duration, for the shown frames still open.
  void CloseOpen(int32_t tid, Thread& t, const char* why);

  ReplayOptions options_;
  std::function<void(std::string_view)> out_;
  std::unordered_map<int32_t, Thread> threads_;
  std::optional<uint64_t> origin_;
  uint64_t lines_ = 0, printed_ = 0;
  bool saw_thread_ = false;
};

// The listing's first line: "# DURATION     TID     FUNCTION\n".
std::string ReplayHeader();
// `name` as a call: "fib()" ("[syscall]", "f(int)" and "g (inlined)" as they are).
std::string CallText(const std::string& name);
// "   1.234 us": ten columns, microseconds up to 1 ms, then ms, then s.
std::string ReplayDuration(uint64_t ns);

}  // namespace ptsnap::report
