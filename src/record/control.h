// What a running recording is told (Control) and what it tells (Event).
// The session loops (record/recorder.h for hardware, emulate/emulate.h for
// the emulator) read a Control and report through an EventFn; they install
// no signal handlers. Whoever drives them (the public ptsnap::Recording,
// hence the CLI) turns signals, API calls and socket messages into Control
// requests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::record {

// A line of progress or a fact worth acting on, in the order it happened.
struct Event {
  enum class Kind {
    kStarted,       // tracing is on (run: the program is running)
    kInfo,          // progress ("Trigger armed: ...", "Attached to 3 thread(s) ...")
    kWarning,       // something the user should know; recording goes on
    kSnapshot,      // snapshot `snapshot` was written (or, emulated, taken)
    kDataLost,      // PT bytes or sideband records were lost
    kTargetExited,  // the program (run) or every traced process (attach) exited
  };
  Kind kind = Kind::kInfo;
  std::string message;  // one line, no "ptsnap:" prefix
  uint32_t snapshot = 0;
  int exit_status = 0;  // kTargetExited of `run`: shell-style status
};
using EventFn = std::function<void(const Event&)>;
// Calls `events` if there is one.
inline void Emit(const EventFn& events, const Event& e) {
  if (events) events(e);
}

// Requests to a running session loop, from any thread. RequestSnapshot and
// RequestStop only touch atomics and an eventfd, so they are safe in a
// signal handler. Snapshot() is the synchronous form: it waits until the
// loop has written the snapshot and returns its number.
class Control {
 public:
  Control();
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;

  // Async-signal-safe: a snapshot (reason "signal") / the end of recording.
  void RequestSnapshot() noexcept;
  void RequestStop() noexcept;

  // Posts a snapshot request with `reason` (the manifest's detail) and waits
  // until the loop completes it or the recording ends (an error then).
  Result<uint32_t> Snapshot(const std::string& reason);

  // The loop's side.
  struct Pending {
    uint64_t ticket = 0;  // 0: a RequestSnapshot (signal)
    std::string reason;
  };
  // Snapshot requests since the last call, oldest first.
  std::vector<Pending> TakeSnapshotRequests();
  void Complete(uint64_t ticket, Result<uint32_t> seq);
  [[nodiscard]] bool stop_requested() const { return stop_.load(); }
  // Sleeps until a request arrives, one of `fds` is readable, or `timeout`
  // passes. Returns the indexes of the readable `fds`.
  std::vector<size_t> Wait(std::chrono::milliseconds timeout, const std::vector<int>& fds = {});
  // The loop ended: Snapshot() callers still waiting get an error, later
  // ones at once.
  void Close(const std::string& why);

 private:
  void Wake() noexcept;

  base::UniqueFd event_fd_;
  std::atomic<int> signal_snapshots_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 1;
  std::vector<Pending> pending_;
  std::map<uint64_t, Result<uint32_t>> done_;
  std::optional<std::string> closed_;
};

}  // namespace ptsnap::record
