#include "record/program_end.h"

#include <signal.h>

#include <string>
#include <thread>

namespace ptsnap::record {

void ProgramEnder::Tick(pid_t pid) {
  if (!term_at_) return;
  const auto now = Clock::now();
  if (!term_sent_ && now >= *term_at_) {
    ::kill(pid, SIGTERM);
    term_sent_ = true;
  }
  if (!kill_sent_ && now >= *term_at_ + kTermGrace) {
    ::kill(pid, SIGKILL);
    kill_sent_ = true;
  }
}

int EndProgram(Child& child, const RecordOptions& opts, AfterRecording after, Control& control,
               bool stopped, const EventFn& events, bool announce) {
  int status = 0;
  if (stopped && opts.stop_signal != 0) ::kill(child.pid(), opts.stop_signal);
  if (!stopped && after == AfterRecording::kDetach) {
    Emit(events, {Event::Kind::kInfo, "Recording finished; leaving " + opts.command[0] + " (pid " +
                                          std::to_string(child.pid()) +
                                          ") running, untraced (--after=detach)."});
    child.Release();
    return 0;
  }
  if (!stopped && after == AfterRecording::kWait) {
    if (announce)
      Emit(events, {Event::Kind::kInfo, "Recording finished; waiting for " + opts.command[0] +
                                            " to exit (--after=wait; Ctrl-C ends it)."});
    while (!child.Poll(&status)) {
      if (control.stop_requested()) {
        stopped = true;
        break;
      }
      (void)control.Wait(std::chrono::milliseconds(20));
    }
    if (!stopped) return status;
  }
  Emit(events, {Event::Kind::kInfo,
                "Recording finished; ending " + opts.command[0] +
                    (stopped ? " (stopped: SIGTERM if it is still there in 0.4 s, then SIGKILL)."
                             : " (--after=kill: SIGTERM, then SIGKILL).")});
  ProgramEnder ender;
  // After a stop request the program may be on its way out already (Ctrl-C
  // on a terminal reaches it too): it gets kStopGrace first.
  ender.Arm(ProgramEnder::Clock::now() + (stopped ? kStopGrace : std::chrono::milliseconds(0)));
  while (!child.Poll(&status)) {
    ender.Tick(child.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

}  // namespace ptsnap::record
