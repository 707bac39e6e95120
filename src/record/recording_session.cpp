#include "record/recording_session.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "base/log.h"
#include "base/string_util.h"
#include "base/version.h"
#include "elf/symbol_file.h"
#include "record/artifacts.h"
#include "record/processes.h"
#include "record/record_errors.h"
#include "sys/proc_maps.h"

namespace ptsnap::record {
namespace {

bool IsStopIndicator(std::string_view symbol) {
  for (auto s : kStopIndicatorSymbols)
    if (s == symbol) return true;
  return false;
}

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// "handle_request took 5.123 ms (from +1.000 ms, thread 42)": +T counts
// from the start of the recording.
std::string SlowCallDetail(const std::string& symbol, const SlowCall& c, uint64_t start) {
  std::string d = symbol + " took " + base::FormatDuration(c.end - c.begin) + " (from +" +
                  base::FormatDuration(c.begin > start ? c.begin - start : 0) + ", thread " +
                  std::to_string(c.tid) + ")";
  if (c.skipped_before != 0)
    d += "; " + std::to_string(c.skipped_before) +
         " slow call(s) of this thread skipped before it by the rate limit";
  return d;
}

// The line announcing a snapshot: "Snapshot 2 taken (signal: SIGUSR2)."
std::string SnapshotLine(const trace::Snapshot& s) {
  return "Snapshot " + std::to_string(s.seq) + " taken (" + std::string(trace::ToString(s.reason)) +
         (s.detail.empty() ? "" : ": " + s.detail) + ").";
}

}  // namespace

RecordingSession::RecordingSession(const RecordOptions& opts, Prepared prepared,
                                   std::filesystem::path trace_dir, const base::RootPath& root,
                                   Control& control, const EventFn& events)
    : opts_(opts),
      prepared_(std::move(prepared)),
      trace_dir_(std::move(trace_dir)),
      root_(root),
      control_(control),
      events_(events),
      run_(!opts.command.empty()),
      system_wide_(!prepared_.cpus.empty()) {}

Result<void> RecordingSession::Open(const SourceFactory& make_source) {
  std::error_code ec;
  if (std::filesystem::exists(trace_dir_, ec) && (!std::filesystem::is_directory(trace_dir_, ec) ||
                                                  !std::filesystem::is_empty(trace_dir_, ec))) {
    return Error("trace directory " + trace_dir_.string() +
                 " already exists; remove it or choose another with --trace-dir")
        .WithKind(ErrorKind::kTraceDirExists);
  }
  if (make_source) {
    PTSNAP_ASSIGN_OR_RETURN(source_, make_source(prepared_.hw));
  } else if (prepared_.sampling) {
    PTSNAP_ASSIGN_OR_RETURN(auto sampling, SamplingSource::Create(*prepared_.sampling));
    source_ = std::move(sampling);
  } else {
    PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(prepared_.hw));
    source_ = std::move(hw);
  }
  // The emulator follows the program, its trigger and its end itself
  // (pt_source.h, "A source that drives itself").
  self_driven_ = source_->self_driven();
  PTSNAP_TRY(run_ ? LaunchProgram() : AttachProcesses());
  // --slower-than: entry and return probes on the trigger function instead
  // of its breakpoint.
  if (opts_.slower_than_ns != 0 && !points_.empty()) {
    PTSNAP_TRY(ArmSlowCallProbes());
    points_.clear();
  }
  if (!points_.empty()) {
    if (auto r = source_->ArmTriggers(points_); !r) return ExplainThreadError(r.error(), prepared_);
    for (const auto& p : points_)
      Emit(events_, {Event::Kind::kInfo, "Trigger armed: " + p.description});
  }
  return CreateTraceDir();
}

// System-wide: one PT + tracking event per CPU, opened and enabled before
// the program execs (run) or the mappings are synthesized (attach).
// Threads of the traced program then only host trigger breakpoints.
Result<void> RecordingSession::OpenCpus() {
  for (int cpu : prepared_.cpus) {
    if (auto r = source_->AddCpu(cpu); !r) return ExplainThreadError(r.error(), prepared_);
  }
  if (auto r = source_->EnableAll(); !r) return ExplainThreadError(r.error(), prepared_);
  return Ok();
}

Result<void> RecordingSession::LaunchProgram() {
  PTSNAP_ASSIGN_OR_RETURN(PtSource::Launch launch, source_->LaunchCommand(opts_.command));
  // --ptw: ptsnap_mark() (<ptsnap/mark.h>) uses PTWRITE when it sees this.
  std::vector<std::string> env;
  if (opts_.ptw) env.push_back("PTSNAP_PTWRITE=1");
  PTSNAP_ASSIGN_OR_RETURN(Child c, Child::Spawn(launch.argv, &::fork, launch.inherit_fds,
                                                opts_.after != AfterRecording::kDetach, env));
  child_.emplace(std::move(c));
  pids_.push_back(child_->pid());
  if (system_wide_) PTSNAP_TRY(OpenCpus());
  if (auto r = source_->AddThread(child_->pid(), child_->pid(), !system_wide_); !r)
    return ExplainThreadError(r.error(), prepared_);
  PTSNAP_TRY(child_->Exec());
  // enable_on_exec has fired; enabling again is a no-op for these events
  // but marks the source started, so threads found later start enabled.
  if (auto r = source_->EnableAll(); !r) return ExplainThreadError(r.error(), prepared_);
  if (!opts_.trigger.empty() && !self_driven_) {
    // Stopped at its first instruction: only the executable and its loader
    // are mapped, so a library's function is found in the libraries the
    // program links and armed at its file offset (linked_libraries.h).
    auto resolved = ResolveTrigger(opts_.trigger, child_->pid(),
                                   opts_.slower_than_ns != 0 ? 1 : kMaxTriggerFunctions,
                                   TriggerLibraries::kLinked);
    if (!resolved) return std::move(resolved).error().WithKind(ErrorKind::kTrigger);
    points_ = std::move(*resolved);
  }
  return Ok();
}

Result<void> RecordingSession::AttachProcesses() {
  if (self_driven_) return Error("this source records only a program it starts (run)");
  if (opts_.pids.empty() && !system_wide_) return Error("attach needs -p PID[,PID...] or -a");
  if (!opts_.trigger.empty() && opts_.pids.empty())
    return Error("--trigger needs -p PID: the process whose code holds the trigger");
  for (pid_t pid : opts_.pids) {
    if (pid <= 0 || !ProcessExists(pid)) {
      return Error("process " + std::to_string(pid) +
                   " does not exist (it may have exited before ptsnap could attach)")
          .WithKind(ErrorKind::kProcessGone);
    }
    // Its memory map names the code the samples or the trace land in; an
    // unreadable one (hidepid, another user's process, a container's
    // masked /proc) would leave a trace nothing can decode. Asked before
    // any event opens or the trace directory is made.
    if (auto maps = base::ReadFileHead("/proc/" + std::to_string(pid) + "/maps", 1); !maps) {
      return Error("cannot read the memory map of process " + std::to_string(pid) + " (" +
                   maps.error().ToString() +
                   "): ptsnap needs the process's memory map to name its code; attach as "
                   "root or as the process's user, on a /proc mounted without hidepid")
          .WithKind(ErrorKind::kPrivilege);
    }
  }
  pids_ = opts_.pids;
  if (!opts_.trigger.empty()) {
    auto resolved = ResolveTrigger(opts_.trigger, pids_[0],
                                   opts_.slower_than_ns != 0 ? 1 : kMaxTriggerFunctions,
                                   TriggerLibraries::kMapped);
    if (!resolved) return std::move(resolved).error().WithKind(ErrorKind::kTrigger);
    points_ = std::move(*resolved);
  }
  // Two passes: a thread created before its creator's event opened is
  // in no FORK record, so the second listing catches it. A thread other
  // than the main one that exits between the listing and its open
  // (ESRCH) is not an error: a process that starts and ends threads
  // all the time must still be attachable.
  for (int pass = 0; pass < 2; ++pass) {
    for (pid_t pid : pids_) {
      auto tids = ListThreads(pid);
      if (!tids) {
        return Error("process " + std::to_string(pid) + " exited before ptsnap could attach (" +
                     tids.error().ToString() + ")")
            .WithKind(ErrorKind::kProcessGone);
      }
      for (pid_t tid : *tids) {
        if (source_->HasThread(tid)) continue;
        if (auto fds = fd_budget_.TakeForThread(); !fds)
          return ExplainThreadError(fds.error(), prepared_);
        if (auto r =
                source_->AddThread(pid, tid, !system_wide_ && (opts_.multi_thread || tid == pid));
            !r) {
          if (r.error().errnum() == ESRCH && tid != pid) continue;
          return ExplainThreadError(r.error(), prepared_);
        }
      }
    }
  }
  // System-wide attach enables the CPUs' events after the mappings are
  // synthesized (Begin), like per-thread attach.
  if (system_wide_) {
    for (int cpu : prepared_.cpus) {
      if (auto r = source_->AddCpu(cpu); !r) return ExplainThreadError(r.error(), prepared_);
    }
  }
  return Ok();
}

// `run`: one inherited pair on the program (its threads follow); attach: a
// pair per thread found (inherited by the threads those create).
Result<void> RecordingSession::ArmSlowCallProbes() {
  const pid_t target_pid = run_ ? child_->pid() : pids_[0];
  // A library's function comes resolved (ResolveTrigger: `run` maps no
  // library yet); the executable's is looked up in the process.
  Result<ProbeTarget> target =
      points_.size() == 1 && !points_[0].file.empty()
          ? Result<ProbeTarget>(ProbeTarget{points_[0].file, points_[0].file_offset,
                                            elf::Demangle(points_[0].symbol)})
          : ResolveProbeTarget(opts_.trigger, target_pid);
  if (!target) return std::move(target).error().WithKind(ErrorKind::kTrigger);
  PTSNAP_ASSIGN_OR_RETURN(slow_probes_,
                          SlowCallProbes::Create(root_, std::move(*target), opts_.slower_than_ns,
                                                 opts_.multi_snapshot));
  std::vector<pid_t> tids{target_pid};
  if (!run_) {
    if (auto listed = ListThreads(target_pid)) tids = *listed;
  }
  for (pid_t tid : tids) {
    if (auto r = slow_probes_->AddThread(tid); !r) {
      if (r.error().errnum() == ESRCH) continue;  // the thread exited meanwhile
      return ExplainUprobeError(r.error());
    }
  }
  Emit(events_, {Event::Kind::kInfo, "Timing calls of " + slow_probes_->target().symbol + " (" +
                                         slow_probes_->target().file.string() + " +" +
                                         base::Hex(slow_probes_->target().offset) +
                                         "): a snapshot when one takes " +
                                         base::FormatDuration(opts_.slower_than_ns) + " or more"});
  return Ok();
}

Result<void> RecordingSession::CreateTraceDir() {
  trace::Manifest m;
  m.source = !prepared_.emulator.empty() ? trace::Source::kEmulated
             : prepared_.sampling        ? trace::Source::kSampled
                                         : trace::Source::kHardware;
  m.emulator = prepared_.emulator;
  m.virtual_clock = prepared_.virtual_clock;
  if (prepared_.sampling) m.sampling = prepared_.sampling_info;
  m.ptsnap_version = base::kVersion;
  m.created_unix_ns = UnixNowNs();
  m.command = opts_.command;
  for (pid_t pid : pids_) m.pids.push_back(pid);
  if (utsname u{}; ::uname(&u) == 0) m.kernel_release = u.release;
  m.cpu.vendor = prepared_.cpu.vendor;
  m.cpu.family = prepared_.cpu.family;
  m.cpu.model = prepared_.cpu.model;
  m.cpu.stepping = prepared_.cpu.stepping;
  if (prepared_.cpu.leaf15) {
    m.cpu.cpuid_15_eax = prepared_.cpu.leaf15->eax;
    m.cpu.cpuid_15_ebx = prepared_.cpu.leaf15->ebx;
  }
  m.pt = prepared_.pt;
  m.scope = prepared_.scope;
  m.mode = prepared_.mode;
  m.snapshot_size = prepared_.aux_bytes;
  if (auto tc = source_->time_conv()) m.time_conv = *tc;
  auto created = trace::TraceWriter::Create(trace_dir_, std::move(m));
  if (!created) return std::move(created).error().AddContext("creating the trace directory");
  writer_.emplace(std::move(*created));
  vdso_pids_.insert(pids_.begin(), pids_.end());
  return Ok();
}

Result<Outcome> RecordingSession::Run() {
  auto recorded = [&]() -> Result<void> {
    PTSNAP_TRY(Begin());
    while (recording()) PTSNAP_TRY(Turn());
    return Wrap();
  }();
  return Finish(std::move(recorded));
}

Result<void> RecordingSession::Begin() {
  PTSNAP_TRY(source_->Begin(writer()));
  // Mappings that existed before the events were opened: the traced
  // processes' (attach), or every process's (system-wide). Processes that
  // exit meanwhile are skipped.
  std::vector<pid_t> synthesize;
  if (!run_) PTSNAP_TRY(source_->EnableSideband());
  // A sampled attach's sampling events are its sideband events too: its
  // samples start here, and so does --duration's clock.
  const auto sideband_on = std::chrono::steady_clock::now();
  if (system_wide_) {
    synthesize = ListProcesses(base::RootPath());
  } else if (!run_) {
    synthesize = pids_;
  }
  for (pid_t pid : synthesize) {
    auto sb = SynthesizeSideband(pid, source_->Now());
    if (!sb) {
      if (!system_wide_) return std::move(sb).error();
      continue;
    }
    if (auto maps = sys::ReadProcMaps(base::RootPath(), pid)) {
      for (const auto& m : *maps)
        if (m.exec && !m.path.empty() && m.path[0] == '/') mapped_files_.insert(m.path);
    }
    vdso_pids_.insert(pid);
    PTSNAP_TRY(writer().AppendSideband(std::as_bytes(std::span(sb->data(), sb->size()))));
  }
  // The kernel image is copied before anything traced runs, as perf does:
  // the program is still stopped at its exec (run), the events are not
  // enabled yet (attach). Only `run -a` has its CPUs tracing already
  // (they must be on before the exec), so the copy itself is in that trace.
  CopyKernel(prepared_, root_, writer());
  if (run_) {
    PTSNAP_TRY(child_->Resume());
    resumed_ = true;
  } else {
    PTSNAP_TRY(source_->EnableAll());
    if (system_wide_) {
      Emit(events_, {Event::Kind::kInfo, "Tracing CPUs " + FormatCpuList(prepared_.cpus) +
                                             " system-wide. Press Ctrl-C to stop recording."});
    } else {
      Emit(events_,
           {Event::Kind::kInfo, "Attached to " + std::to_string(source_->traced_threads()) +
                                    " thread(s). Press Ctrl-C to stop recording."});
    }
  }
  PTSNAP_TRY(writer().Flush());
  Emit(events_, {Event::Kind::kStarted, "Recording."});
  start_ = std::chrono::steady_clock::now();
  start_perf_ = source_->Now();
  last_flush_ = start_;
  duration_from_ = !run_ && prepared_.sampling ? sideband_on : start_;
  return Ok();
}

Result<void> RecordingSession::Turn() {
  // Sleeps until a trigger's breakpoint fires, a request arrives, or the
  // next drain is due. A hit is handled first: Snapshot disables PT before
  // the sideband and the streams are touched.
  std::vector<int> wake = source_->WakeFds();
  if (slow_probes_) slow_probes_->AppendFds(wake);
  control_.Wait(std::chrono::milliseconds(5), wake);
  if (slow_probes_) {
    PTSNAP_ASSIGN_OR_RETURN(const bool single_taken, TakeSlowCalls());
    if (single_taken) {
      phase_ = Phase::kSnapshotTaken;
      return Ok();
    }
  }
  PTSNAP_ASSIGN_OR_RETURN(auto hits, source_->PollTriggers());
  if (!hits.empty()) {
    PTSNAP_TRY(TakeTrigger(hits.front()));
    if (!opts_.multi_snapshot) {
      phase_ = Phase::kSnapshotTaken;
      return Ok();
    }
  }
  PTSNAP_ASSIGN_OR_RETURN(SidebandEvents ev, source_->DrainSideband(writer()));
  mapped_files_.insert(ev.mapped_files.begin(), ev.mapped_files.end());
  AnnounceTaken();
  PTSNAP_TRY(AddNewThreads(ev.new_threads));
  for (pid_t tid : ev.exited_threads) {
    if (slow_probes_) slow_probes_->ThreadExited(tid);
    if (std::find(pids_.begin(), pids_.end(), tid) != pids_.end()) gone_.push_back(tid);
    PTSNAP_TRY(source_->ThreadExited(tid, writer()));
  }
  if (prepared_.mode == trace::Mode::kFull) {
    PTSNAP_TRY(source_->DrainAux(writer()));
    // The streams grow on disk at every drain; the manifest that lists
    // their sizes is rewritten about once a second.
    if (std::chrono::steady_clock::now() - last_flush_ >= std::chrono::seconds(1)) {
      PTSNAP_TRY(writer().Flush());
      last_flush_ = std::chrono::steady_clock::now();
    }
  }
  PTSNAP_ASSIGN_OR_RETURN(const bool single_taken, TakeRequestedSnapshots());
  if (single_taken) {
    phase_ = Phase::kSnapshotTaken;
    return Ok();
  }
  if (control_.stop_requested() && self_driven_) {
    // The source takes the last snapshot and stops the program; the
    // recording ends when the program has exited.
    if (phase_ != Phase::kStopping) source_->RequestStop();
    phase_ = Phase::kStopping;
    outcome_.interrupted = true;
  } else if (control_.stop_requested()) {
    End(trace::SnapshotReason::kCtrlC);
    outcome_.interrupted = true;
  } else if (opts_.duration && !self_driven_ &&
             std::chrono::steady_clock::now() - duration_from_ >= *opts_.duration) {
    End(trace::SnapshotReason::kDuration, std::to_string(opts_.duration->count()) + "ms");
    // The loop checks the clock between drains; a drain held up writing
    // (dwarf samples: about 80 MB/s at 10 kHz) ends the recording late,
    // and the trace then spans more than was asked. Said, not hidden.
    const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - duration_from_);
    if (ran - *opts_.duration > std::chrono::milliseconds(100))
      outcome_.warnings.push_back(
          "--duration " + std::to_string(opts_.duration->count()) + "ms: the recording ran " +
          std::to_string(ran.count()) +
          "ms, because ptsnap fell behind writing what it recorded, so the trace may cover more "
          "than was asked" +
          (prepared_.sampling ? std::string(" (fewer samples per second, --timer-resolution "
                                            "low, or --callgraph-mode fp, whose samples are "
                                            "smaller, keep up)")
                              : std::string()));
  }
  return WatchTheProgram();
}

Result<bool> RecordingSession::TakeSlowCalls() {
  for (const SlowCall& c : slow_probes_->Poll()) {
    PTSNAP_TRY(Snapshot(trace::SnapshotReason::kSlowCall,
                        SlowCallDetail(opts_.trigger, c, start_perf_), c.end, c.tid,
                        opts_.multi_snapshot, &c));
    if (!opts_.multi_snapshot) return true;
  }
  return false;
}

Result<void> RecordingSession::AddNewThreads(
    const std::vector<std::pair<pid_t, pid_t>>& new_threads) {
  for (auto [pid, tid] : new_threads) {
    if (system_wide_) vdso_pids_.insert(pid);
    if (slow_probes_ && !pids_.empty() && pid == pids_[0]) {
      if (auto r = slow_probes_->AddThread(tid); !r)
        PTSNAP_LOG(kInfo) << "new thread " << tid
                          << " not timed for --slower-than: " << r.error().ToString();
    }
    if (std::find(pids_.begin(), pids_.end(), pid) == pids_.end() || source_->HasThread(tid))
      continue;
    auto r = fd_budget_.TakeForThread();
    if (r) r = source_->AddThread(pid, tid, !system_wide_ && opts_.multi_thread);
    if (!r) {
      // A thread that has exited already is no loss; any other refusal
      // (no fds left, no locked memory) leaves it out of the trace.
      const Error why = ExplainThreadError(r.error(), prepared_);
      if (why.kind() != ErrorKind::kProcessGone && untraced_threads_++ == 0) {
        first_untraced_ = why.ToString();
        Emit(events_, {Event::Kind::kWarning,
                       "new thread " + std::to_string(tid) + " is not traced: " + first_untraced_});
      } else {
        PTSNAP_LOG(kInfo) << "new thread " << tid << " not traced: " << why.ToString();
      }
    }
  }
  return Ok();
}

// Asked for (SIGUSR2, Recording::Snapshot): the recording goes on after it
// unless it was the single snapshot of a triggerless run.
Result<bool> RecordingSession::TakeRequestedSnapshots() {
  bool single_taken = false;
  for (const Control::Pending& req : control_.TakeSnapshotRequests()) {
    if (self_driven_) {
      // Taken by the source when it next can; AnnounceTaken completes it.
      if (auto r = source_->RequestSnapshot(req.ticket == 0 ? "SIGUSR2" : req.reason); !r) {
        control_.Complete(req.ticket, std::move(r).error());
      } else {
        waiting_.push_back(req.ticket);
      }
      continue;
    }
    auto seq = Snapshot(trace::SnapshotReason::kSignal, req.ticket == 0 ? "SIGUSR2" : req.reason, 0,
                        0, opts_.multi_snapshot || req.ticket != 0);
    control_.Complete(req.ticket, seq);
    if (!seq) return std::move(seq).error();
    if (!opts_.multi_snapshot && req.ticket == 0) single_taken = true;
  }
  return single_taken;
}

// Whether the program ended, and for a self-driven source, ending it as
// --after says once the source stopped recording.
Result<void> RecordingSession::WatchTheProgram() {
  if (recording() && run_ && self_driven_ && child_) {
    // The source ends the recording only when the program exits: a stop
    // request gives the program kStopGrace to exit by the signal the
    // source passed on, and --after=kill ends it once the source took
    // its last snapshot.
    const auto now = ProgramEnder::Clock::now();
    const bool stopping = phase_ == Phase::kStopping;
    if (stopping) ender_.Arm(now + kStopGrace);
    if (source_ended_ && !stopping && opts_.after == AfterRecording::kDetach) {
      // The program runs on; the source records no more (EndProgram
      // lets the program go once the trace is written).
      PTSNAP_TRY(source_->Detach());
      phase_ = Phase::kDetached;
    }
    if (source_ended_ && opts_.after == AfterRecording::kKill) {
      if (!ender_.armed())
        Emit(events_, {Event::Kind::kInfo, "Recording finished; ending " + opts_.command[0] +
                                               " (--after=kill: SIGTERM, then SIGKILL)."});
      ender_.Arm(now);
    }
    ender_.Tick(child_->pid());
  }
  if (recording() && run_) {
    int status = 0;
    if (!child_->Poll(&status)) return Ok();
    if (self_driven_) PTSNAP_TRY(source_->TargetExited(status));
    outcome_.program_status = status;
    if (const int sig = child_->term_signal(); sig != 0) {
      // Killed by a signal (a crash, abort, a kill): the last snapshot
      // names it (a self-driven source took its own).
      End(trace::SnapshotReason::kFatalSignal, base::SignalName(sig));
    } else {
      End(trace::SnapshotReason::kExit, "status " + std::to_string(status));
    }
    Emit(events_, {Event::Kind::kTargetExited,
                   opts_.command[0] + " exited with status " + std::to_string(status), 0, status});
  } else if (recording() && !run_ && !pids_.empty()) {
    bool all_gone = true;
    for (pid_t pid : pids_) {
      const bool exited = std::find(gone_.begin(), gone_.end(), pid) != gone_.end();
      if (!exited && ProcessExists(pid)) all_gone = false;
    }
    if (all_gone) {
      End(trace::SnapshotReason::kExit);
      Emit(events_, {Event::Kind::kTargetExited, "every traced process exited"});
    }
  }
  return Ok();
}

Result<void> RecordingSession::Wrap() {
  // Only a recording that ended for a reason takes late hits and the end's
  // snapshot; one whose single snapshot was taken is complete.
  const bool ended = phase_ == Phase::kEnded;
  const bool snapshots_left =
      ended && prepared_.mode == trace::Mode::kSnapshot && (opts_.multi_snapshot || seq_ == 0);
  // Slow calls that returned after the loop's last look (the program
  // exited right after one): their snapshots come before the last one.
  if (slow_probes_ && snapshots_left) {
    for (const SlowCall& c : slow_probes_->Poll()) {
      PTSNAP_TRY(Snapshot(trace::SnapshotReason::kSlowCall,
                          SlowCallDetail(opts_.trigger, c, start_perf_), c.end, c.tid,
                          opts_.multi_snapshot, &c));
      if (!opts_.multi_snapshot) break;
    }
  }
  // Likewise a trigger hit after the loop's last PollTriggers: a thread
  // that calls it and exits, or the program's last call before its exit,
  // within one turn of the loop. Its snapshot replaces the exit's.
  if (!self_driven_ && ended && prepared_.mode == trace::Mode::kSnapshot &&
      (opts_.multi_snapshot || seq_ == 0)) {
    PTSNAP_ASSIGN_OR_RETURN(auto hits, source_->PollTriggers());
    for (const TriggerHit& h : hits) {
      PTSNAP_TRY(TakeTrigger(h));
      if (!opts_.multi_snapshot) break;
    }
  }
  PTSNAP_ASSIGN_OR_RETURN(SidebandEvents last, source_->DrainSideband(writer()));
  mapped_files_.insert(last.mapped_files.begin(), last.mapped_files.end());
  if (self_driven_) {
    // Its last snapshots (at the program's exit) were read by
    // TargetExited and that DrainSideband.
    AnnounceTaken();
    PTSNAP_TRY(source_->Finish(writer()));
  } else if (ended && prepared_.mode == trace::Mode::kSnapshot &&
             (opts_.trigger.empty() || seq_ == 0)) {
    // A fatal signal's snapshot names the program's main thread (which
    // thread it killed is not known here).
    const uint32_t tid = end_reason_ == trace::SnapshotReason::kFatalSignal && child_
                             ? static_cast<uint32_t>(child_->pid())
                             : 0;
    PTSNAP_TRY(Snapshot(*end_reason_, end_detail_, 0, tid, false));
  }
  if (prepared_.mode == trace::Mode::kFull && !self_driven_) {
    PTSNAP_TRY(source_->Finish(writer()));
    PTSNAP_TRY(Snapshot(trace::SnapshotReason::kFull,
                        end_reason_ ? std::string(trace::ToString(*end_reason_)) : "", 0, 0,
                        false));
    uint64_t truncated = 0, lost = 0;
    // A full-execution recording's streams all stay in the writer's memory.
    for (const trace::Stream& s : writer().manifest().streams) {
      truncated += s.truncated;
      lost += s.lost_bytes;
    }
    if (truncated > 0 || lost > 0)
      Emit(events_, {Event::Kind::kDataLost,
                     "PT data was lost: the AUX buffer filled " + std::to_string(truncated) +
                         " time(s) before ptsnap drained it" +
                         (lost > 0 ? " and " + std::to_string(lost) + " bytes were skipped" : "") +
                         "; the trace has gaps there (`truncated` and `lost_bytes` per stream in "
                         "manifest.json); a larger --snapshot-size helps"});
  }
  Warn();
  return Ok();
}

// What the user should know about a recording that worked.
void RecordingSession::Warn() {
  // A trigger that never fired leaves the end's snapshot: say so, or the
  // user takes it for the trigger's (an addr: trigger on code that never
  // runs once did that silently).
  if (!opts_.trigger.empty() && prepared_.mode == trace::Mode::kSnapshot) {
    const auto& snaps = writer().snapshot_reasons();
    const bool fired = std::any_of(snaps.begin(), snaps.end(), [](trace::SnapshotReason r) {
      return r == trace::SnapshotReason::kTrigger || r == trace::SnapshotReason::kStopIndicator ||
             r == trace::SnapshotReason::kSlowCall;
    });
    if (!fired && !snaps.empty())
      outcome_.warnings.push_back("the trigger " + opts_.trigger + " never fired (" +
                                  (opts_.slower_than_ns != 0
                                       ? std::string("no call was slower than --slower-than")
                                       : std::string("the code never ran")) +
                                  "): the snapshot was taken at the end instead (" +
                                  std::string(trace::ToString(snaps.back())) + ")");
  }
  if (untraced_threads_ != 0)
    outcome_.warnings.push_back(std::to_string(untraced_threads_) +
                                " thread(s) created while recording were not traced (the "
                                "trace has none of their samples or PT); the first: " +
                                first_untraced_);
  if (slow_probes_) {
    const SlowCallTracker& t = slow_probes_->tracker();
    if (t.skipped() != 0)
      outcome_.warnings.push_back(
          std::to_string(t.skipped()) + " slow call(s) of " + opts_.trigger +
          " were not snapshotted: --multi-snapshot takes at most one slow-call snapshot per "
          "thread every " +
          base::FormatDuration(SlowCallGapNs(opts_.slower_than_ns)));
    if (slow_probes_->lost() != 0)
      outcome_.warnings.push_back("the slow-call probes lost " +
                                  std::to_string(slow_probes_->lost()) +
                                  " batch(es) of hits (the function is called faster than ptsnap "
                                  "reads them): some slow calls may have been missed");
    if (seq_ == 0 || phase_ == Phase::kEnded)
      PTSNAP_LOG(kInfo) << "slow-call probes: " << t.calls() << " call(s) of " << opts_.trigger
                        << " timed, " << t.unmatched_returns() << " return(s) without entry";
  }
}

Result<Outcome> RecordingSession::Finish(Result<void> recorded) {
  if (!recorded && self_driven_) (void)source_->Finish(writer());  // what it wrote, tidied up
  // What the trace needs to decode, also when recording failed: the mapped
  // files' build-ids (and copies), the vDSO, the JIT maps as they are now
  // (docs/trace-format.md, binaries/, vdso/, jit/).
  CopyJitdumps(writer(), mapped_files_, outcome_.warnings);
  RecordBinaries(writer(), mapped_files_, opts_.copy_binaries,
                 std::vector<pid_t>(vdso_pids_.begin(), vdso_pids_.end()), source_->host_vdso());
  // Every snapshot taken is in the manifest (a self-driven source's too).
  outcome_.snapshots = writer().snapshot_count();
  if (auto r = writer().CopyPerfMaps(writer().manifest().pids); !r)
    outcome_.warnings.push_back("JIT symbol maps not copied: " + r.error().ToString());
  if (!recorded) return Fail(std::move(recorded).error());
  // docs/trace-format.md: "interrupted" after Ctrl-C (or a source that fell
  // short of its end), else "complete".
  // A source that fell short without Ctrl-C says why (`ptsnap info`
  // otherwise reads "stopped by Ctrl-C or an error", which misled).
  PTSNAP_TRY(writer().Finish(outcome_.interrupted || !source_->complete()
                                 ? trace::State::kInterrupted
                                 : trace::State::kComplete,
                             outcome_.interrupted ? std::string() : source_->incomplete_reason()));
  if (run_ && child_) {
    int status = 0;
    if (!child_->Poll(&status))
      status = EndProgram(*child_, opts_, opts_.after, control_, outcome_.interrupted, events_);
    outcome_.program_status = status;
  }
  return outcome_;
}

Error RecordingSession::Fail(Error err) {
  // The cause stays in the manifest (`ptsnap info` shows it).
  (void)writer().Finish(trace::State::kInterrupted, err.ToString());
  // The emulator's errors say themselves where its data is.
  if (self_driven_) return err;
  const std::string kept = "what was captured is kept in " + trace_dir_.string();
  if (err.errnum() == ENOSPC) {
    err = Error("the file system holding " + trace_dir_.string() + " is full (" + err.ToString() +
                "): recording stopped; " + kept +
                " and decodes: free space or choose another --trace-dir");
  } else {
    err.AddContext("recording (" + kept + ")");
  }
  // A program that was running when recording failed runs on untraced,
  // as it would have without ptsnap, and `run` waits for it as usual.
  int status = 0;
  if (run_ && child_ && resumed_ && !child_->Poll(&status)) {
    source_.reset();  // its events close: nothing is traced any more
    slow_probes_.reset();
    Emit(events_, {Event::Kind::kWarning, err.ToString() + "; " + opts_.command[0] +
                                              " runs on untraced; waiting for it to exit"});
    status = EndProgram(*child_, opts_, AfterRecording::kWait, control_, false, events_, false);
    err = Error(err.ToString() + "; " + opts_.command[0] +
                " ran on untraced and exited with status " + std::to_string(status))
              .WithKind(err.kind());
  }
  return err;
}

Result<uint32_t> RecordingSession::Snapshot(trace::SnapshotReason reason, std::string detail,
                                            uint64_t time, uint32_t tid, bool resume,
                                            const SlowCall* call) {
  ++seq_;
  if (prepared_.mode == trace::Mode::kSnapshot)
    PTSNAP_TRY(source_->Snapshot(writer(), seq_, resume));
  trace::Snapshot s;
  s.seq = seq_;
  s.reason = reason;
  s.detail = std::move(detail);
  s.time = time != 0 ? time : source_->Now();
  s.tid = tid;
  if (call != nullptr) {
    s.call_begin = call->begin;
    s.call_ns = call->end - call->begin;
  }
  std::string line = SnapshotLine(s);
  PTSNAP_TRY(writer().AddSnapshot(std::move(s)));
  Emit(events_, {Event::Kind::kSnapshot, std::move(line), seq_});
  return seq_;
}

Result<void> RecordingSession::TakeTrigger(const TriggerHit& h) {
  auto seq = Snapshot(IsStopIndicator(h.symbol) ? trace::SnapshotReason::kStopIndicator
                                                : trace::SnapshotReason::kTrigger,
                      h.symbol.empty() ? "addr:" + base::Hex(h.ip) : h.symbol, h.time, h.tid,
                      opts_.multi_snapshot);
  if (!seq) return std::move(seq).error();
  return Ok();
}

void RecordingSession::AnnounceTaken() {
  for (const trace::Snapshot& snap : source_->TakenSnapshots()) {
    Emit(events_, {Event::Kind::kSnapshot, SnapshotLine(snap), snap.seq});
    // The source stopped recording (its single snapshot, --duration): the
    // program is ended as --after says.
    const bool single = snap.reason == trace::SnapshotReason::kTrigger ||
                        snap.reason == trace::SnapshotReason::kStopIndicator ||
                        snap.reason == trace::SnapshotReason::kSlowCall;
    if (snap.reason == trace::SnapshotReason::kDuration || (single && !opts_.multi_snapshot))
      source_ended_ = true;
    if (snap.reason != trace::SnapshotReason::kSignal || waiting_.empty()) continue;
    if (waiting_.front() != 0) control_.Complete(waiting_.front(), snap.seq);
    waiting_.erase(waiting_.begin());
  }
}

}  // namespace ptsnap::record
