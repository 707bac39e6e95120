// RecordingSession: one recording, from the source opened to the program's
// end (record::Record is Open, then Run). Its members are what a recording
// knows; how it ends is one state, `Phase`, read in one place per question.
//
// The order of a recording:
//   Open   the source, the program started (stopped at its exec) or the
//          processes attached, trigger breakpoints or slow-call probes armed,
//          the trace directory created. Nothing traced has run yet.
//   Begin  the sideband of what already exists, the kernel copy, then the
//          program resumed (run) or the events enabled (attach).
//   Turn   one turn of the loop (about every 5 ms, or at a wake-up): slow
//          calls, trigger hits, sideband and new threads, the drain of a
//          full-execution recording, snapshot and stop requests, --duration,
//          the program's exit. Turns run while the phase is recording.
//   Wrap   what came in after the last turn looked (a hit, a slow call),
//          the last sideband, the end's snapshot, the warnings.
//   Finish what the trace needs besides its streams (artifacts.h, also when
//          recording failed), the manifest's state, and the program ended as
//          --after says; on failure, Fail says where the data is and lets a
//          running program run on untraced.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "record/child.h"
#include "record/elf_symbols.h"
#include "record/fd_budget.h"
#include "record/program_end.h"
#include "record/recorder.h"
#include "record/slow_calls.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {

class RecordingSession {
 public:
  RecordingSession(const RecordOptions& opts, Prepared prepared, std::filesystem::path trace_dir,
                   const base::RootPath& root, Control& control, const EventFn& events);

  // Everything before the trace directory exists (see above). On error
  // nothing is written; the program, if started, is killed.
  Result<void> Open(const SourceFactory& make_source);

  // Records until the recording ends, then Finish.
  Result<Outcome> Run();

 private:
  // How far the recording is. Turns run in kRecording and kStopping.
  enum class Phase {
    kRecording,
    // Self-driven: asked to stop (Ctrl-C); the source takes the last
    // snapshot and stops the program, and the recording ends at its exit.
    kStopping,
    // The single snapshot was taken (a trigger, a slow call, SIGUSR2).
    kSnapshotTaken,
    // Self-driven, --after=detach: the source took its last snapshot and the
    // program runs on.
    kDetached,
    // end_reason_ says why: the program exited, Ctrl-C, --duration.
    kEnded,
  };
  [[nodiscard]] bool recording() const {
    return phase_ == Phase::kRecording || phase_ == Phase::kStopping;
  }
  void End(trace::SnapshotReason reason, std::string detail = "") {
    phase_ = Phase::kEnded;
    end_reason_ = reason;
    end_detail_ = std::move(detail);
  }

  Result<void> OpenCpus();
  Result<void> LaunchProgram();
  Result<void> AttachProcesses();
  Result<void> ArmSlowCallProbes();
  Result<void> CreateTraceDir();

  Result<void> Begin();
  Result<void> Turn();
  Result<void> AddNewThreads(const std::vector<std::pair<pid_t, pid_t>>& new_threads);
  // Each returns whether it took the recording's single snapshot.
  Result<bool> TakeRequestedSnapshots();
  Result<bool> TakeSlowCalls();
  Result<void> WatchTheProgram();
  Result<void> Wrap();
  void Warn();
  Result<Outcome> Finish(Result<void> recorded);
  Error Fail(Error err);

  // Takes (snapshot mode) and lists snapshot seq+1; `call`: the slow call a
  // kSlowCall snapshot is taken for.
  Result<uint32_t> Snapshot(trace::SnapshotReason reason, std::string detail, uint64_t time,
                            uint32_t tid, bool resume, const SlowCall* call = nullptr);
  Result<void> TakeTrigger(const TriggerHit& h);
  // A self-driven source's snapshots, announced; they complete requests.
  void AnnounceTaken();
  trace::TraceWriter& writer() { return *writer_; }

  const RecordOptions& opts_;
  Prepared prepared_;
  const std::filesystem::path trace_dir_;
  const base::RootPath& root_;
  Control& control_;
  const EventFn& events_;
  const bool run_;          // a program ptsnap starts (else attach)
  const bool system_wide_;  // per-CPU events (-a, --cpu)
  bool self_driven_ = false;

  // Declared in the order they were made: the program is killed before the
  // source's events close.
  std::unique_ptr<PtSource> source_;
  std::optional<Child> child_;
  FdBudget fd_budget_;
  std::vector<pid_t> pids_;
  std::vector<TriggerPoint> points_;
  std::unique_ptr<SlowCallProbes> slow_probes_;
  std::optional<trace::TraceWriter> writer_;

  Outcome outcome_;
  uint32_t seq_ = 0;  // snapshots taken
  std::set<std::string> mapped_files_;
  std::set<pid_t> vdso_pids_;      // system-wide: every process seen
  std::vector<uint64_t> waiting_;  // self-driven: tickets of asked snapshots, in the order asked
  bool source_ended_ = false;      // self-driven: the source took its last snapshot
  ProgramEnder ender_;             // self-driven: the program outlived the recording
  bool resumed_ = false;           // run: the program is running (not stopped at its exec)
  uint64_t untraced_threads_ = 0;  // threads found while recording that could not be traced
  std::string first_untraced_;     // and why the first one could not

  Phase phase_ = Phase::kRecording;
  std::optional<trace::SnapshotReason> end_reason_;  // kEnded
  std::string end_detail_;
  std::chrono::steady_clock::time_point start_, last_flush_;
  // Where --duration counts from: start_, or a sampled attach's first
  // sample (its events also carry the sideband, enabled earlier).
  std::chrono::steady_clock::time_point duration_from_;
  uint64_t start_perf_ = 0;  // slow calls' "+T" counts from here
  std::vector<pid_t> gone_;  // attach: traced processes that exited
};

}  // namespace ptsnap::record
