// The end of a program `run` started, once recording is over (--after).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "record/child.h"
#include "record/control.h"
#include "record/options.h"

namespace ptsnap::record {

// Ends the program `run` started once recording is over (--after): SIGTERM
// at `term_at`, SIGKILL kTermGrace later; Tick() sends what is due.
class ProgramEnder {
 public:
  using Clock = std::chrono::steady_clock;
  [[nodiscard]] bool armed() const { return term_at_.has_value(); }
  void Arm(Clock::time_point term_at) {
    if (!term_at_) term_at_ = term_at;
  }
  // Sends SIGTERM and SIGKILL to `pid` when they are due.
  void Tick(pid_t pid);

 private:
  std::optional<Clock::time_point> term_at_;
  bool term_sent_ = false, kill_sent_ = false;
};

// The program outlived the recording: ends it as `after` says (a stop
// request while waiting ends it too) and returns its status. `after` is
// opts.after, or kWait where the program runs on untraced after a failure
// (which says so itself: `announce` false); `stopped`: a stop request ended
// the recording.
int EndProgram(Child& child, const RecordOptions& opts, AfterRecording after, Control& control,
               bool stopped, const EventFn& events, bool announce = true);

}  // namespace ptsnap::record
