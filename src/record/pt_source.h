// PtSource: where a recording's Intel PT bytes and sideband come from. The
// one session loop (record::Record in recorder.h: the program, threads,
// triggers, requests, snapshots, the trace writer) talks only to this
// interface. HardwarePtSource implements it with perf_event_open,
// SamplingSource with sampling events, and the emulator's source
// (emulate/emulated_source.h) with qemu-user and ptsnap's TCG plugin.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptsnap/result.h"
#include "record/elf_symbols.h"
#include "trace/manifest.h"

namespace ptsnap::trace {
class TraceWriter;
}

namespace ptsnap::record {

// A hit of a trigger breakpoint.
struct TriggerHit {
  uint64_t ip = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;   // perf clock ns
  std::string symbol;  // the trigger point's symbol ("" for addr:)
};

// What a sideband drain saw that the orchestration must act on.
struct SidebandEvents {
  std::vector<std::pair<pid_t, pid_t>> new_threads;  // {pid, tid} from PERF_RECORD_FORK
  std::vector<pid_t> exited_threads;                 // PERF_RECORD_EXIT tids
  std::vector<std::string> mapped_files;             // executable MMAP2 paths ("/...") seen
  uint64_t records = 0;
};

class PtSource {
 public:
  virtual ~PtSource() = default;

  // Opens this thread's events (PT + tracking, and breakpoints for the armed
  // triggers). `trace_pt` false opens only the breakpoints (threads that are
  // not traced but can still fire the trigger). Errors say which thread and
  // what the kernel refused.
  virtual Result<void> AddThread(pid_t pid, pid_t tid, bool trace_pt) = 0;
  // System-wide mode: PT + tracking events for every task on `cpu` (pid -1),
  // the tracking event with context_switch (PERF_RECORD_SWITCH_CPU_WIDE).
  // Streams from it carry `cpu` and tid -1.
  virtual Result<void> AddCpu(int cpu) = 0;
  // Breakpoints for these points on every thread added so far and later.
  virtual Result<void> ArmTriggers(const std::vector<TriggerPoint>& points) = 0;
  // Attach: enables only the sideband (tracking) events, before the
  // mappings that already exist are read from /proc/PID/maps, so an mmap
  // made while they are read is recorded (perhaps twice, which is harmless)
  // instead of lost. PT follows with EnableAll.
  virtual Result<void> EnableSideband() { return Ok(); }
  // Enables every PT and tracking event (attach; for run, after the exec
  // that enable_on_exec already acted on). Threads added afterwards are
  // enabled as they are added.
  virtual Result<void> EnableAll() = 0;
  // Moves sideband records into the writer. Re-enables PT events the kernel
  // stopped after a TRUNCATED AUX record (full mode).
  virtual Result<SidebandEvents> DrainSideband(trace::TraceWriter& writer) = 0;
  // Full mode: appends pending AUX bytes to each thread's or CPU's stream
  // file (created on its first bytes), and keeps the stream's lost_bytes and
  // truncated counts current in the writer's manifest.
  virtual Result<void> DrainAux(trace::TraceWriter& writer) = 0;
  // The thread `tid` exited (its PERF_RECORD_EXIT was drained): its events
  // and buffers are closed, so a program that makes thousands of short-lived
  // threads does not run out of fds or locked memory. Full mode drains its
  // AUX first; snapshot mode keeps its ring for the next snapshot (a few at
  // most: kMaxExitedKept), which then closes it.
  virtual Result<void> ThreadExited(pid_t /*tid*/, trace::TraceWriter& /*writer*/) { return Ok(); }
  // Breakpoint hits since the last call.
  virtual Result<std::vector<TriggerHit>> PollTriggers() = 0;
  // File descriptors that become readable when a trigger is hit (the
  // breakpoints' rings, wakeup_events 1): the session loop sleeps in poll()
  // on them, so a hit wakes it at once and PT is disabled before anything
  // else is done (hw-path-review.md: the ring holds well under a
  // millisecond at full rate).
  [[nodiscard]] virtual std::vector<int> WakeFds() const { return {}; }
  // Snapshot mode: disables PT, copies every ring into a stream tagged with
  // `seq`, and re-enables PT when `resume`. The streams are written but not
  // yet listed: the caller's AddSnapshot rewrites the manifest once.
  virtual Result<void> Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) = 0;
  // Full mode: stops PT and drains what is left (sideband included, so the
  // last AUX records are counted). Snapshot mode: nothing. Closes nothing;
  // the destructor does.
  virtual Result<void> Finish(trace::TraceWriter& writer) = 0;
  // The current time on the perf clock (for snapshots not caused by a hit).
  virtual uint64_t Now() const = 0;
  // Number of threads with PT events (per-thread mode).
  [[nodiscard]] virtual size_t traced_threads() const = 0;
  // Whether AddThread already covered `tid`.
  [[nodiscard]] virtual bool HasThread(pid_t tid) const = 0;
  // perf clock <-> TSC (the user page of the first event), nullopt before
  // any event is mapped.
  [[nodiscard]] virtual std::optional<trace::TimeConv> time_conv() const = 0;

  // --- A source that drives itself (the emulator) ---
  // The emulator's plugin runs inside the traced process and does there what
  // the session loop does for the kernel's events: it follows threads and
  // forks, watches the trigger and the slow call, ends at --duration, and
  // takes each snapshot at the exact instruction it is due, listing it in the
  // writer as DrainSideband reads it. For such a source the loop resolves no
  // trigger and opens no probe, starts the program through LaunchCommand,
  // forwards requests (RequestSnapshot, RequestStop), announces what
  // TakenSnapshots returns, and records until the program exits.
  [[nodiscard]] virtual bool self_driven() const { return false; }
  // How `command` is started with this source attached: the argv to exec
  // and the fds the program must inherit.
  struct Launch {
    std::vector<std::string> argv;
    std::vector<int> inherit_fds;
  };
  virtual Result<Launch> LaunchCommand(const std::vector<std::string>& command) {
    return Launch{command, {}};
  }
  // The trace directory exists (`writer`), the program has not run yet.
  virtual Result<void> Begin(trace::TraceWriter& /*writer*/) { return Ok(); }
  // Self-driven: asks for a snapshot; it comes back from TakenSnapshots with
  // reason kSignal (and `detail`). An error says why none will be taken.
  virtual Result<void> RequestSnapshot(const std::string& /*detail*/) {
    return Error("this source takes no snapshot on request");
  }
  // Self-driven: asks for the end (a last snapshot, then the program is
  // told to stop as Ctrl-C would); the loop waits for the program to exit.
  virtual void RequestStop() {}
  // Self-driven: the snapshots listed in the writer since the last call.
  virtual std::vector<trace::Snapshot> TakenSnapshots() { return {}; }
  // Self-driven, after its last snapshot: the program runs on without the
  // recording (--after=detach). The source stops recording for good, and
  // reads what it has written, as TargetExited does at an exit.
  virtual Result<void> Detach() { return Ok(); }
  // Self-driven: the program exited with `status` (shell style); reads what
  // the source wrote at the end. An error: the end was the source's failure,
  // not the program's (Finish still follows).
  virtual Result<void> TargetExited(int /*status*/) { return Ok(); }
  // False when the recording fell short of its end without an error (the
  // emulator: a process killed before its plugin finished): the trace is
  // then "interrupted".
  [[nodiscard]] virtual bool complete() const { return true; }
  // Why not complete(), in words for `ptsnap info` ("" when it cannot say).
  [[nodiscard]] virtual std::string incomplete_reason() const { return {}; }
  // Whether the trace holds a dump of ptsnap's own vDSO for each traced
  // process (the host kernel's; an emulated guest has none).
  [[nodiscard]] virtual bool host_vdso() const { return true; }
};

}  // namespace ptsnap::record
