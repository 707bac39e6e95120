// ptsnap::Recording: record a program or running processes with Intel PT
// (or the emulator) into a trace directory, and snapshot it whenever you
// like. docs/api.md has a complete example.
//
//   auto rec = ptsnap::Recording::Create(options, &listener);  // checks, starts nothing
//   rec->Start();                                               // the program runs
//   auto snap = rec->Snapshot("slow request");                  // at any time
//   auto result = rec->Stop();                                  // or Wait()
//
// Threads: Start() runs the recording on one thread of its own
// ("ptsnap-record"), which does all the work (perf events, ptrace of the
// program, writing the trace directory) and calls the listener. Every
// method may be called from any thread; RequestSnapshot() and
// RequestStop() are also safe in a signal handler. The library never
// installs signal handlers and never changes the signal mask.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/export.h"
#include "ptsnap/result.h"

namespace ptsnap {

enum class Scope { kUser, kKernel, kUserAndKernel };
enum class Collection {
  kHardware,  // Intel PT through perf_event_open
  kEmulated,  // the program runs under qemu-user with ptsnap's PT plugin (user space, `command`
              // only)
  kSampled,   // stack samples through perf_event_open, no PT (`ptsnap run --sampling`): the
              // trace's source is "sampled". Attaching (`pids`) where the machine has no
              // Intel PT picks it by itself, with a warning.
};

// What to record. Either `command` (a new program) or `pids` (running
// processes), or `all_cpus` (the whole system; `command`/`pids` then only
// host the trigger). The fields mirror `ptsnap run`/`attach` flags
// (`ptsnap run --help`).
// RecordingOptions::after.
enum class AfterRecording { kKill, kWait, kDetach };

struct RecordingOptions {
  std::vector<std::string> command;  // argv; found in PATH like a shell would
  std::vector<int> pids;
  bool all_cpus = false;
  std::vector<int> cpus;  // with all_cpus: only these (empty: every online CPU)
  Scope scope = Scope::kUser;
  Collection collection = Collection::kHardware;
  // PT ring buffer per thread (per CPU with all_cpus), bytes; 0 = the
  // probe's default (4 MiB as root, else 128 KiB within the mlock budget).
  uint64_t snapshot_size = 0;
  // Record everything into the trace directory instead of a ring buffer.
  bool full_execution = false;
  // low | normal | high | custom:KEY=VAL,... (PT); kSampled: low | normal | high | sample:N
  // (1000, 10000, the kernel's maximum, N samples per second).
  std::string timer_resolution = "normal";
  // kSampled: "fp", "dwarf", "lbr" (or "lbr-no-stitch"); empty: lbr where the CPU has it,
  // else dwarf. Set with another collection: an error (kUsage).
  std::string callgraph_mode;
  // Snapshot when this runs: a function of the program or, when it has
  // none of that name, of a shared library it links ("malloc"; run
  // natively: an entry uprobe, which needs root: CAP_SYS_ADMIN), named as
  // `ptsnap report` shows it ("risky(int)"), without parameters ("risky"),
  // mangled ("_Z5riskyi"), as "FILE:NAME" or a glob ("*parse*"), at most 4
  // functions (docs/recording.md, "Naming a function"); "addr:HEX"; or "." for the
  // stop indicator (ptsnap/stop_indicator.h). Empty: no trigger.
  std::string trigger;
  // With a function `trigger`: the trigger is a call of it that returns
  // after running at least this many nanoseconds (`--slower-than`; virtual
  // ns, one per retired instruction, with kEmulated). 0: a plain trigger.
  uint64_t slower_than_ns = 0;
  // Trace only inside these address ranges (`--filter`, perf's syntax:
  // "filter FUNC [@ FILE]", "tracestop FUNC", "filter 0xOFFSET/SIZE @ FILE",
  // or just a function name of the program; docs/recording.md, "Filters").
  // Empty: no filter.
  std::string filter;
  // Trace only while this function runs, everything it calls included
  // (`--only-in`; Linux 6.13+ pauses Intel PT outside it, older kernels
  // filter to the function's own code instead; docs/recording.md,
  // "Catching the slow call"). Empty: no such limit.
  std::string only_in;
  bool multi_snapshot = false;            // the trigger snapshots every time, not only the first
  bool multi_thread = false;              // trace every thread (default: the main thread)
  std::chrono::milliseconds duration{0};  // stop after this long; 0: no limit
  bool copy_binaries = false;             // copy the mapped binaries into the trace directory
  // Record PTWRITE (`--ptw`): the Intel PT event's ptw and fup_on_ptw terms,
  // and PTSNAP_PTWRITE=1 in `command`'s environment, so ptsnap_mark()
  // (ptsnap/mark.h) uses the instruction. Needs a CPU with PTWRITE
  // (caps/ptwrite); not with kEmulated or kSampled (kUsage). Off: marks use
  // their emulated encoding, which needs nothing.
  bool ptw = false;
  // Record power events (`--pwr-evt`): the Intel PT event's pwr_evt term,
  // giving PWRE/PWRX/MWAIT packets that the decode shows as "[C-state Cn]"
  // frames (CBR's core clock needs no option). Needs a CPU with Power Event
  // Trace (caps/power_event_trace); not with kEmulated or kSampled (kUsage).
  bool pwr_evt = false;
  // With kEmulated (`--emulate-waits`): each syscall's wall time is added
  // to its thread's virtual clock, so sleeps, I/O and futex waits show on
  // the timeline; instructions still take 1 ns each. Not without kEmulated
  // (kUsage): other collections' times are real time already.
  bool emulate_waits = false;
  // Where the raw recording goes. Empty: "trace.ptsnap" in the current
  // directory, an earlier one there moved to "trace.ptsnap.old". A directory
  // named here must not exist yet, unless `move_aside_existing`.
  std::filesystem::path trace_dir;
  // An existing `trace_dir` is moved to "<trace_dir>.old" (one generation,
  // an older one removed) once recording starts, as the default one is,
  // instead of refused: the CLI's rule for the directory beside -o's file.
  bool move_aside_existing = false;
  // Sent to the program `command` started when Stop() (not its exit) ends
  // the recording; 0 sends nothing. Either way the program has 0.4 s to
  // exit, then gets SIGTERM, and SIGKILL 0.5 s later.
  int stop_signal = SIGINT;
  // What becomes of the program `command` started when recording ends
  // before it exits (`duration`, the trigger's single snapshot): kKill ends
  // it (SIGTERM, SIGKILL 0.5 s later), kWait waits for its exit (Stop()
  // while waiting ends it as kKill does), kDetach leaves it running,
  // untraced, and the recording ends at once (status 0); it is then a child
  // of this process that nobody reaps: waitpid() it or ignore SIGCHLD.
  // docs/recording.md, "When recording ends first".
  AfterRecording after = AfterRecording::kKill;
};

struct RecordingEvent {
  enum class Kind {
    kStarted,       // tracing is on (a command: it is running)
    kInfo,          // progress: "Trigger armed: ...", "Attached to 3 thread(s) ..."
    kWarning,       // something to know; recording goes on
    kSnapshot,      // a snapshot was written to the trace directory
    kDataLost,      // PT bytes or sideband records were lost
    kTargetExited,  // the program, or every traced process, exited
  };
  Kind kind = Kind::kInfo;
  std::string_view message;  // one line; valid during the call
  uint32_t snapshot = 0;     // kSnapshot: its number
  int exit_status = 0;       // kTargetExited of a command: shell-style status
};

class RecordingListener {
 public:
  virtual ~RecordingListener() = default;
  // On the recording's thread; keep it short (the drain loop waits).
  virtual void OnEvent(const RecordingEvent& event) = 0;
};

struct SnapshotInfo {
  uint32_t seq = 0;  // the snapshot's number in the trace directory's manifest
  std::filesystem::path trace_dir;
};

struct RecordingResult {
  int program_status = 0;  // `command`: its exit status, shell style (128+N: signal N)
  uint32_t snapshots = 0;
  bool interrupted = false;  // Stop() or RequestStop() ended it
  std::filesystem::path trace_dir;
  std::vector<std::string> warnings;
};

class PTSNAP_API Recording {
 public:
  // Checks everything that can be checked without starting anything, the
  // most fundamental problem first: the options, the trace directory, the
  // program or processes and the trigger, then the machine (Intel PT and
  // privileges, or the emulator). Error kinds: kNoPmu, kPrivilege,
  // kTrigger, kProcessGone, kTraceDirExists, kOther. The listener, if any,
  // must outlive the Recording.
  static Result<Recording> Create(const RecordingOptions& options,
                                  RecordingListener* listener = nullptr);

  Recording(Recording&&) noexcept;
  Recording& operator=(Recording&&) noexcept;
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  // Stops a recording still running (as Stop()) and waits for its thread.
  ~Recording();

  // Starts the program or attaches, then returns once tracing is on
  // (or failed: the error is also what Wait() returns).
  Result<void> Start();
  // Takes a snapshot now, `reason` kept in the manifest, and returns once it
  // is written to the trace directory (it decodes while the recording goes
  // on). Fails in full-execution recordings of the emulator and once the
  // recording ended.
  Result<SnapshotInfo> Snapshot(std::string_view reason);
  // Async-signal-safe requests: a snapshot (reason "signal"), the end.
  void RequestSnapshot() noexcept;
  void RequestStop() noexcept;
  // Ends the recording (a last snapshot in snapshot mode unless the trigger
  // fired) and waits until the trace directory is complete.
  Result<RecordingResult> Stop();
  // Waits until the recording ends by itself: the program or processes
  // exit, the trigger fires (single snapshot), `duration` passes.
  Result<RecordingResult> Wait();

  [[nodiscard]] const std::filesystem::path& trace_dir() const;
  // Warnings from planning (rounded sizes, timing the PMU lacks), also sent
  // to the listener at Start().
  [[nodiscard]] const std::vector<std::string>& warnings() const;

 private:
  struct Impl;
  explicit Recording(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptsnap
