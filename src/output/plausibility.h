// Results that cannot be true, counted after every decode (docs/decoding.md,
// "Impossible results"). A timeline built from a misread trace can still
// add up to numbers that look precise; these checks catch the ones that
// contradict the trace itself, so the summary, `report` and the exit status
// say so instead of printing them as fact:
// - a function whose inclusive time on a thread (recursion counted once)
//   exceeds that thread's span: its frames overlap themselves, which no
//   execution does (a frame longer than its thread's span is one such);
// - in a full-execution recording, frames whose start the trace did not
//   see (inferred) on the thread whose trace began at the program's first
//   instruction (`run`'s program; a thread or process it creates starts
//   inside frames its parent began, so theirs are not counted): every
//   frame's start is in it (a decode error or an
//   overflow restarts the stack, inferring frames from its time on: those
//   are counted on the summary's own lines, not here).
// Memory grows with the number of distinct (thread, function) pairs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "output/calls.h"

namespace ptsnap::output {

struct Implausible {
  // (thread, function) pairs whose inclusive total exceeds the thread's span.
  uint64_t over_span = 0;
  // Full-execution only: frames begun before the trace.
  uint64_t inferred = 0;
  // The first of each, in words ("" when none): "FUNC on thread T: 12 ms
  // in a 3 ms span", "FUNC on thread T, ending at 1.234 ms".
  std::string first_over_span, first_inferred;
  [[nodiscard]] uint64_t count() const { return over_span + inferred; }
};

class PlausibilityCheck {
 public:
  // Every ended frame (CallSink::OnCall).
  void OnCall(const Call& c);
  // Frames of thread `tid` begun before the trace are impossible: a
  // full-execution recording of a program ptsnap started, whose first
  // thread is `tid`.
  void SetFullExecution(int32_t tid) { full_execution_tid_ = tid; }
  [[nodiscard]] Implausible Result() const;

 private:
  struct Inferred {
    uint64_t count = 0;
    std::string first;  // the first one, in words
  };
  struct Thread {
    uint64_t first = UINT64_MAX, last = 0;
    struct Total {
      std::string name;  // a copy: a file reader's names live only while it reads
      uint64_t ns = 0;   // outermost frames only
    };
    std::unordered_map<const std::string*, Total> total;
    // Inferred frames by begin time: those at the thread's first time began
    // before the trace; later ones follow a decode error or an overflow.
    std::map<uint64_t, Inferred> inferred;
  };
  std::unordered_map<int32_t, Thread> threads_;
  Thread* last_ = nullptr;  // threads_[last_tid_]
  int32_t last_tid_ = 0;
  int32_t full_execution_tid_ = -1;  // -1: none
};

// "Impossible results: N ..." lines for a summary or report, "" when none.
std::string FormatImplausible(const Implausible& r);

}  // namespace ptsnap::output
