#include "session/session.h"

#include <signal.h>

#include <cerrno>
#include <system_error>

#include "record/elf_symbols.h"

namespace ptsnap::session {

namespace fs = std::filesystem;
using record::Emit;

namespace {

// The combinations of options that cannot work, whatever the machine.
Result<void> CheckCombination(const record::RecordOptions& o) {
  const bool attach = o.command.empty();
  if (o.all_cpus && o.emulate)
    return Error("--emulate traces one program: -a/--cpu (system-wide) needs hardware Intel PT");
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
  return Ok();
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
      auto r = record::ResolveTrigger(o.trigger, o.pids[0]);
      if (!r) return std::move(r).error().WithKind(ErrorKind::kTrigger);
    }
    return Ok();
  }
  auto exe = record::FindExecutable(o.command[0]);
  if (!exe) return std::move(exe).error();
  if (auto r = record::CheckTriggerInFile(o.trigger, *exe); !r)
    return std::move(r).error().WithKind(ErrorKind::kTrigger);
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

  // The trace directory: one the user named is never replaced; the default
  // one is moved aside (one generation) so trace, look, trace again works.
  const bool named = !opts.trace_dir.empty() || !opts.output.empty();
  plan.trace_dir = TraceDirFor(opts);
  std::error_code ec;
  if (fs::exists(plan.trace_dir, ec)) {
    if (named || !fs::is_directory(plan.trace_dir, ec)) {
      return Error("trace directory " + plan.trace_dir.string() +
                   " already exists; remove it or choose another with --trace-dir (or -o)")
          .WithKind(ErrorKind::kTraceDirExists);
    }
    plan.move_previous_aside = true;
  }

  if (opts.emulate) {
    // The emulator checks the program and the trigger before its own pieces.
    PTSNAP_ASSIGN_OR_RETURN(plan.emulated, emulate::PlanEmulation(opts));
  } else {
    PTSNAP_TRY(CheckTarget(opts));
    sys::HostCpuid host;
    PTSNAP_ASSIGN_OR_RETURN(plan.hardware,
                            record::Prepare(opts, env.root, env.cpuid ? *env.cpuid : host));
    plan.warnings = plan.hardware->warnings;
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
  if (plan.move_previous_aside) {
    fs::path old = plan.trace_dir;
    old += ".old";
    std::error_code ec;
    fs::remove_all(old, ec);
    fs::rename(plan.trace_dir, old, ec);
    if (ec)
      return Error("cannot move the previous recording " + plan.trace_dir.string() + " aside to " +
                   old.string() + ": " + ec.message() + "; remove it or choose --trace-dir")
          .WithKind(ErrorKind::kTraceDirExists);
    Emit(events, {record::Event::Kind::kInfo, "Moved the previous recording " +
                                                  plan.trace_dir.string() + " to " + old.string()});
  }
  if (plan.emulated) {
    // The emulator reports its snapshots as events only: count them.
    auto counting = [&](const record::Event& e) {
      if (e.kind == record::Event::Kind::kSnapshot) ++out.snapshots;
      Emit(events, e);
    };
    auto status =
        emulate::RecordEmulated(*plan.emulated, plan.opts, plan.trace_dir, control, counting);
    if (!status) return std::move(status).error();
    out.program_status = *status;
    out.interrupted = control.stop_requested();
    return out;
  }
  auto r = record::Record(plan.opts, std::move(*plan.hardware), plan.trace_dir, env.root, control,
                          events);
  if (!r) return std::move(r).error();
  out.program_status = r->program_status;
  out.snapshots = r->snapshots;
  out.interrupted = r->interrupted;
  out.warnings = std::move(r->warnings);
  return out;
}

}  // namespace ptsnap::session
