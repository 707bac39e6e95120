#include "session/session.h"

#include <signal.h>

#include <cerrno>
#include <system_error>

#include "record/addr_filter.h"
#include "record/elf_symbols.h"
#include "record/only_in.h"
#include "sys/pmu.h"

namespace ptsnap::session {

namespace fs = std::filesystem;
using record::Emit;

namespace {

// The combinations of options that cannot work, whatever the machine.
Result<void> CheckCombination(const record::RecordOptions& o) {
  const bool attach = o.command.empty();
  if (o.sampling && o.emulate)
    return Error(
        "--sampling and --emulate are two collection modes: --emulate records exact PT under the "
        "emulator, --sampling takes stack samples; choose one");
  if (o.all_cpus && o.emulate)
    return Error("--emulate traces one program: -a/--cpu (system-wide) needs hardware Intel PT");
  if (o.ptw && o.emulate)
    return Error(
        "--ptw records the PTWRITE instruction, which QEMU does not execute: drop --ptw under "
        "--emulate; ptsnap_mark() (<ptsnap/mark.h>) uses its emulated encoding by default, and "
        "the emulator records that");
  if (o.pwr_evt && o.emulate)
    return Error(
        "--pwr-evt records Intel PT power events (C-state changes), which the emulator does not "
        "write: drop --pwr-evt under --emulate");
  if (o.emulate_waits && !o.emulate)
    return Error(
        "--emulate-waits adds the time syscalls wait to the emulator's virtual clock: add "
        "--emulate (without it the times are the CPU's real clock, waits included)");
  if (attach && o.pids.empty() && !o.all_cpus)
    return Error(
        "nothing to record: give a command to run (ptsnap run [options] -- CMD ARGS...) or "
        "processes to attach to (ptsnap attach -p PID[,PID...], or -a for the whole system)");
  if (!attach && !o.pids.empty())
    return Error("a recording either runs a command or attaches to -p PIDs, not both");
  if (attach && o.pids.empty() && !o.trigger.empty())
    return Error("--trigger needs -p PID: the process whose code holds the trigger");
  for (pid_t pid : o.pids)
    if (pid <= 0) return Error("bad process id " + std::to_string(pid));
  if (!o.filter.empty()) {
    if (o.sampling)
      return Error(
          "--filter limits Intel PT to address ranges; --sampling takes stack samples without "
          "PT: drop one of them");
    if (o.all_cpus)
      return Error(
          "--filter needs per-thread tracing: the kernel takes address filters on a file only "
          "for events bound to a task, not system-wide ones (-a/--cpu); drop one of them");
  }
  if (!o.only_in.empty()) {
    if (o.only_in.find_first_of(" \t,@/") != std::string::npos)
      return Error(
          "--only-in takes one function name of the program (e.g. --only-in "
          "handle_request), not '" +
          o.only_in + "' (address ranges are --filter's)");
  }
  if (o.slower_than_ns != 0) {
    if (o.trigger.empty())
      return Error(
          "--slower-than times calls of the --trigger function: add --trigger FUNC (e.g. "
          "--trigger handle_request --slower-than 2ms)");
    if (o.trigger == "." || o.trigger.starts_with("addr:"))
      return Error("--slower-than needs a function name in --trigger, not '" + o.trigger +
                   "': the call is timed from the function's entry to its return (use "
                   "ptsnap_take_snapshot_if_slower() from <ptsnap/stop_indicator.h> to time "
                   "code in the program itself)");
    if (o.full_execution)
      return Error(
          "--slower-than takes a snapshot where a slow call returns; --full-execution records "
          "everything and takes none: drop one of them");
  }
  return Ok();
}

// Options that only make sense with --sampling, or never with it, once the
// collection mode is decided (attach picks sampling without Intel PT).
Result<void> CheckSamplingOptions(const record::RecordOptions& o) {
  // magic-trace: "[-callgraph-mode] is only configurable when running
  // magic-trace with sampling."
  if (!o.sampling && !o.callgraph_mode.empty())
    return Error("--callgraph-mode only applies to --sampling (stack samples); add --sampling");
  if (!o.sampling && o.timer.preset == "sample")
    return Error(
        "--timer-resolution sample:N can only be used with --sampling (did you forget "
        "--sampling?)");
  if (o.sampling && !o.only_in.empty())
    return Error(
        "--only-in pauses Intel PT outside a function; --sampling takes stack samples without "
        "PT (attach picks it where there is no Intel PT): drop --only-in, or use run --emulate");
  if (o.sampling && o.ptw)
    return Error(
        "--ptw records PTWRITE in Intel PT; --sampling takes stack samples without PT (attach "
        "picks it where there is no Intel PT): drop --ptw");
  if (o.sampling && o.pwr_evt)
    return Error(
        "--pwr-evt records power events in Intel PT; --sampling takes stack samples without PT "
        "(attach picks it where there is no Intel PT): drop --pwr-evt");
  if (o.sampling && o.timer.preset == "custom")
    return Error(
        "--timer-resolution custom:... sets Intel PT timing packets and cannot be used with "
        "--sampling; use low, normal, high or sample:N (samples per second)");
  return Ok();
}

// How many functions a --trigger NAME may name: one with --slower-than,
// which times one function.
size_t TriggerMax(const record::RecordOptions& o) {
  return o.slower_than_ns != 0 ? 1 : record::kMaxTriggerFunctions;
}

// The program or processes, and the trigger in them.
Result<void> CheckTarget(const record::RecordOptions& o) {
  if (o.command.empty()) {
    for (pid_t pid : o.pids) {
      if (::kill(pid, 0) != 0 && errno == ESRCH)
        return Error("process " + std::to_string(pid) +
                     " does not exist (it may have exited before ptsnap could attach)")
            .WithKind(ErrorKind::kProcessGone);
    }
    if (!o.trigger.empty()) {
      auto r = record::ResolveTrigger(o.trigger, o.pids[0], TriggerMax(o),
                                      record::TriggerLibraries::kMapped);
      if (!r) return std::move(r).error().WithKind(ErrorKind::kTrigger);
    }
    PTSNAP_TRY(record::ResolveRecordingFilters(o));
    if (!o.only_in.empty()) PTSNAP_TRY(record::FindOnlyInFunction(o));
    return Ok();
  }
  auto exe = record::FindExecutable(o.command[0]);
  if (!exe) return std::move(exe).error();
  if (auto r = record::CheckTriggerInFile(o.trigger, *exe, TriggerMax(o)); !r)
    return std::move(r).error().WithKind(ErrorKind::kTrigger);
  PTSNAP_TRY(record::ResolveRecordingFilters(o));
  if (!o.only_in.empty()) PTSNAP_TRY(record::FindOnlyInFunction(o));
  return Ok();
}

}  // namespace

fs::path TraceDirFor(const record::RecordOptions& opts) {
  return opts.trace_dir.empty() ? record::DefaultTraceDir(opts.output) : opts.trace_dir;
}

Result<Plan> PlanRecording(record::RecordOptions opts, const PlanEnv& env) {
  Plan plan;
  if (auto ok = CheckCombination(opts); !ok)
    return std::move(ok).error().WithKind(ErrorKind::kUsage);

  // The trace directory: one named with --trace-dir is never replaced; the
  // one ptsnap names (beside the output, -o's or the default) is moved
  // aside (one generation, as perf.data.old) so trace, look, trace again
  // works with the same command line.
  const bool named = !opts.trace_dir.empty() && !opts.move_aside_existing;
  plan.trace_dir = TraceDirFor(opts);
  std::error_code ec;
  if (fs::exists(plan.trace_dir, ec)) {
    if (named || !fs::is_directory(plan.trace_dir, ec)) {
      return Error("trace directory " + plan.trace_dir.string() +
                   " already exists; remove it or choose another with --trace-dir")
          .WithKind(ErrorKind::kTraceDirExists);
    }
    plan.move_previous_aside = true;
  }

  // magic-trace's fallback: attaching where there is no Intel PT takes
  // stack samples instead, said in one line. `run` keeps its no-PMU error,
  // which names --emulate and --sampling (exact vs statistical is the
  // user's choice there).
  const bool auto_sampling = opts.command.empty() && !opts.sampling && !opts.emulate &&
                             !sys::ReadPmu(env.root, "intel_pt").present;
  if (auto_sampling) opts.sampling = true;
  if (auto ok = CheckSamplingOptions(opts); !ok)
    return std::move(ok).error().WithKind(ErrorKind::kUsage);

  if (opts.emulate) {
    // The emulator checks the program and the trigger before its own pieces.
    PTSNAP_ASSIGN_OR_RETURN(plan.emulated, emulate::PlanEmulation(opts));
    plan.warnings = plan.emulated->attr.warnings;
  } else {
    PTSNAP_TRY(CheckTarget(opts));
    sys::HostCpuid host;
    PTSNAP_ASSIGN_OR_RETURN(plan.hardware,
                            record::Prepare(opts, env.root, env.cpuid ? *env.cpuid : host));
    plan.warnings = plan.hardware->warnings;
    if (auto_sampling) {
      // One line: the callgraph default's own warning folds into it.
      const std::string cg = plan.hardware->sampling_info.callgraph;
      std::erase_if(plan.warnings, [](const std::string& w) {
        return w.starts_with("--callgraph-mode not given");
      });
      plan.warnings.insert(
          plan.warnings.begin(),
          "Intel PT not found: recording with stack sampling instead (--sampling; callgraph " + cg +
              (opts.callgraph_mode.empty() && cg == "dwarf"
                   ? ", which may have high overhead and decoding time"
               : opts.callgraph_mode.empty() && cg == "lbr"
                   ? ", which may lose data and has limited call stack depth"
                   : "") +
              ").");
    }
  }
  plan.opts = std::move(opts);
  return plan;
}

Result<Outcome> RunRecording(Plan plan, record::Control& control, const record::EventFn& events,
                             const PlanEnv& env) {
  struct CloseAtEnd {
    record::Control& c;
    ~CloseAtEnd() { c.Close("the recording ended"); }
  } close_at_end{control};
  Outcome out;
  out.trace_dir = plan.trace_dir;
  for (const std::string& w : plan.warnings) Emit(events, {record::Event::Kind::kWarning, w});
  // The emulator's trigger is the plugin's: which functions it watches is
  // said here, as the hardware recorder says it when it arms breakpoints.
  if (plan.emulated)
    for (const std::string& t : plan.emulated->trigger_functions)
      Emit(events, {record::Event::Kind::kInfo, "Trigger armed: " + t});
  if (plan.move_previous_aside) {
    fs::path old = plan.trace_dir;
    old += ".old";
    std::error_code ec;
    const bool replaced = fs::exists(old, ec);
    fs::remove_all(old, ec);
    fs::rename(plan.trace_dir, old, ec);
    if (ec)
      return Error("cannot move the previous recording " + plan.trace_dir.string() + " aside to " +
                   old.string() + ": " + ec.message() + "; remove it or choose --trace-dir")
          .WithKind(ErrorKind::kTraceDirExists);
    Emit(events,
         {record::Event::Kind::kInfo,
          "Moved the previous recording " + plan.trace_dir.string() + " to " + old.string() +
              (replaced ? " (the older recording that was there is deleted)" : "")});
  }
  // One session loop (record::Record) for every source: the emulator is a
  // PtSource that drives itself (record/pt_source.h).
  record::SourceFactory make_source;
  record::Prepared prepared;
  if (plan.emulated) {
    prepared = emulate::PrepareEmulated(*plan.emulated, plan.opts);
    make_source = emulate::EmulatedSourceFactory(*plan.emulated, plan.opts, plan.trace_dir);
  } else {
    prepared = std::move(*plan.hardware);
  }
  auto r = record::Record(plan.opts, std::move(prepared), plan.trace_dir, env.root, control, events,
                          make_source);
  if (!r) return std::move(r).error();
  out.program_status = r->program_status;
  out.snapshots = r->snapshots;
  out.interrupted = r->interrupted;
  out.warnings = std::move(r->warnings);
  return out;
}

}  // namespace ptsnap::session
