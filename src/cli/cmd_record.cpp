// `ptsnap run` and `ptsnap attach`: parse the options into RecordOptions,
// check what can be checked before touching anything (options, output,
// trace directory, PMU, privileges), record (hardware or --emulate), then
// decode unless --no-decode.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/string_util.h"
#include "cli/command.h"
#include "emulate/emulate.h"
#include "perf/attr.h"
#include "record/elf_symbols.h"
#include "record/options.h"
#include "record/recorder.h"
#include "sys/cpuid.h"
#include "sys/cpus.h"

namespace ptsnap::cli {
namespace {

// No Intel PT on this machine (docs/errors.md): scripts can fall back to --emulate.
constexpr int kExitNoPt = 3;

// magic-trace's single-dash long flags, rewritten to ours before parsing.
constexpr std::pair<const char*, const char*> kMagicTraceFlags[] = {
    {"-trigger", "--trigger"},
    {"-output", "--output"},
    {"-snapshot-size", "--snapshot-size"},
    {"-multi-thread", "--multi-thread"},
    {"-multi-snapshot", "--multi-snapshot"},
    {"-full-execution", "--full-execution"},
    {"-trace-include-kernel", "--trace-include-kernel"},
    {"-trace-kernel-only", "--trace-kernel-only"},
    {"-timer-resolution", "--timer-resolution"},
    {"-duration", "--duration"},
    {"-copy-binaries", "--copy-binaries"},
    {"-working-directory", "--trace-dir"},
    {"-trace-dir", "--trace-dir"},
    {"-pid", "--pid"},
    {"-emulate", "--emulate"},
    {"-no-decode", "--no-decode"},
};

struct Args {
  record::RecordOptions opts;
  std::string snapshot_size, timer = "normal", duration, pids, format, cpus;
  bool include_kernel = false, kernel_only = false;
};

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  std::string_view s = base::Trim(text);
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) != 0)) ++digits;
  auto n = base::ParseUint(s.substr(0, digits));
  std::string_view unit = s.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "ms") scale = 1;
  if (unit == "m" || unit == "min") scale = 60000;
  if (unit == "h") scale = 3600000;
  if (!n || scale == 0 || *n == 0)
    return Error("bad --duration '" + std::string(text) + "': use e.g. 10s, 500ms, 2m");
  return std::chrono::milliseconds(*n * scale);
}

void Fail(const std::string& message) {
  std::fprintf(stderr, "ptsnap: error: %s\n", message.c_str());
}

// Checks that `output` can be created: its directory exists and is writable.
Result<void> CheckOutputWritable(const std::filesystem::path& output) {
  std::filesystem::path dir = output.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Error("cannot write output " + output.string() + ": directory " + dir.string() +
                 " does not exist; create it or choose another -o");
  if (::access(dir.c_str(), W_OK) != 0)
    return Error::FromErrno("cannot write output " + output.string() + ": directory " +
                            dir.string() + " is not writable; choose another -o");
  return Ok();
}

int RunRecord(Args& a, bool attach) {
  record::RecordOptions& o = a.opts;
  // Options first: nothing is started or written while they can still fail.
  if (a.include_kernel) o.scope = trace::Scope::kUserKernel;
  if (a.kernel_only) o.scope = trace::Scope::kKernel;
  if (!a.snapshot_size.empty()) {
    auto size = record::ParseSize(a.snapshot_size);
    if (!size) return Fail("--snapshot-size: " + size.error().ToString()), kExitUsage;
    o.snapshot_size = *size;
  }
  auto timing = perf::ParseTiming(a.timer);
  if (!timing) return Fail(timing.error().ToString()), kExitUsage;
  o.timer = *timing;
  if (!a.duration.empty()) {
    auto d = ParseDuration(a.duration);
    if (!d) return Fail(d.error().ToString()), kExitUsage;
    o.duration = *d;
  }
  if (!a.cpus.empty()) {
    auto cpus = sys::ParseCpuList(a.cpus);
    if (!cpus || cpus->empty())
      return Fail("bad --cpu '" + a.cpus + "': expected a CPU list such as 0-3,7"), kExitUsage;
    o.cpus = *cpus;
    o.all_cpus = true;
  }
  if (o.all_cpus && o.emulate)
    return Fail("--emulate traces one program: -a/--cpu (system-wide) needs hardware Intel PT"),
           kExitUsage;
  if (attach && a.pids.empty() && !o.all_cpus)
    return Fail("attach needs -p PID[,PID...] (or -a to trace the whole system)"), kExitUsage;
  if (attach && a.pids.empty() && !o.trigger.empty())
    return Fail("--trigger needs -p PID: the process whose code holds the trigger"), kExitUsage;
  if (attach) {
    for (std::string_view p : base::Split(a.pids, ',')) {
      if (a.pids.empty()) break;
      auto pid = base::ParseUint(p);
      if (!pid || *pid == 0 || *pid > INT32_MAX)
        return Fail("bad -p '" + a.pids + "': expected PID[,PID...]"), kExitUsage;
      for (pid_t seen : o.pids)
        if (seen == static_cast<pid_t>(*pid))
          return Fail("-p lists process " + std::string(p) + " twice"), kExitUsage;
      o.pids.push_back(static_cast<pid_t>(*pid));
    }
  } else if (o.command.empty()) {
    return Fail("no command to run: ptsnap run [options] -- CMD ARGS..."), kExitUsage;
  }
  if (o.output.empty()) o.output = "trace.fxt.gz";
  const std::filesystem::path trace_dir =
      o.trace_dir.empty() ? record::DefaultTraceDir(o.output) : o.trace_dir;
  if (!o.no_decode) {
    if (auto w = CheckOutputWritable(o.output); !w) return Fail(w.error().ToString()), kExitFailure;
  }
  // The traced program or processes, and the trigger, before the PMU: a
  // typo or a vanished process is reported as such on any machine.
  if (attach) {
    for (pid_t pid : o.pids) {
      if (::kill(pid, 0) != 0 && errno == ESRCH)
        return Fail("process " + std::to_string(pid) +
                    " does not exist (it may have exited before ptsnap could attach)"),
               kExitFailure;
    }
    if (!o.trigger.empty() && !o.emulate) {
      auto r = record::ResolveTrigger(o.trigger, o.pids[0]);
      if (!r) return Fail(r.error().ToString()), kExitFailure;
    }
  } else {
    auto exe = record::FindExecutable(o.command[0]);
    if (!exe) return Fail(exe.error().ToString()), kExitFailure;
    if (auto r = record::CheckTriggerInFile(o.trigger, *exe); !r)
      return Fail(r.error().ToString()), kExitFailure;
  }
  std::error_code ec;
  if (std::filesystem::exists(trace_dir, ec)) {
    return Fail("trace directory " + trace_dir.string() +
                " already exists; remove it or choose another with --trace-dir (or -o)"),
           kExitFailure;
  }

  if (o.emulate) {
    auto status = emulate::RecordEmulated(o, trace_dir);
    if (!status) return Fail(status.error().ToString()), kExitFailure;
    std::fprintf(stderr, "[ %s exited with status %d; trace in %s ]\n",
                 o.command.empty() ? "program" : o.command[0].c_str(), *status, trace_dir.c_str());
  } else {
    sys::HostCpuid cpuid;
    auto prepared = record::Prepare(o, base::RootPath(), cpuid);
    if (!prepared) {
      Fail(prepared.error().ToString());
      return prepared.error().kind() == ErrorKind::kNoPmu ? kExitNoPt : kExitFailure;
    }
    for (const auto& w : prepared->warnings)
      std::fprintf(stderr, "ptsnap: warning: %s\n", w.c_str());
    auto outcome = record::Record(o, std::move(*prepared), trace_dir, base::RootPath());
    if (!outcome) {
      Fail(outcome.error().ToString());
      return kExitFailure;
    }
    for (const auto& w : outcome->warnings)
      std::fprintf(stderr, "ptsnap: warning: %s\n", w.c_str());
    std::fprintf(stderr, "[ Finished recording: %u snapshot(s) in %s ]\n", outcome->snapshots,
                 trace_dir.c_str());
    if (!attach)
      std::fprintf(stderr, "[ %s exited with status %d ]\n", o.command[0].c_str(),
                   outcome->program_status);
  }
  if (o.no_decode) return kExitOk;
  return DecodeAndReport(trace_dir, o.output, a.format);
}

void AddShared(CLI::App* cmd, Args* a) {
  auto& o = a->opts;
  cmd->add_option(
      "-o,--output", o.output,
      "Decoded trace file (default trace.fxt.gz; .fxt, .json, .events, optionally .gz)");
  cmd->add_option("--format", a->format, "Output format, overriding the -o suffix");
  cmd->add_option("--trace-dir", o.trace_dir,
                  "Where the raw recording is kept (default: beside the output, e.g. "
                  "trace.ptsnap/); must not exist");
  cmd->add_option("--trigger", o.trigger,
                  "Snapshot when this runs: a function SYMBOL, addr:HEX, or '.' for the stop "
                  "indicator (ptsnap_take_snapshot / magic_trace_stop_indicator)");
  cmd->add_flag("--multi-snapshot", o.multi_snapshot,
                "Snapshot every time the trigger fires (or SIGUSR2 arrives), not only the first");
  cmd->add_flag("--multi-thread", o.multi_thread,
                "Trace every thread, including ones created later (default: the main thread)");
  cmd->add_flag("--full-execution", o.full_execution,
                "Record everything instead of a ring buffer, streamed to the trace directory as it "
                "is drained (hundreds of MB/s)");
  cmd->add_option("--snapshot-size", a->snapshot_size,
                  "PT ring buffer per thread (per CPU with -a), e.g. 4M (rounded up to a power "
                  "of two pages; default 4M as root, else 128K within the mlock budget)");
  cmd->add_flag("-a,--all-cpus", o.all_cpus,
                "System-wide: trace every task on every online CPU, one PT buffer per CPU "
                "(needs root, CAP_PERFMON, or perf_event_paranoid <= 0)");
  cmd->add_option("-C,--cpu", a->cpus, "With -a, only these CPUs, e.g. 0-3,7 (implies -a)");
  auto* k = cmd->add_flag("--trace-include-kernel", a->include_kernel,
                          "Trace kernel code too (needs root or CAP_PERFMON)");
  auto* ko = cmd->add_flag("--trace-kernel-only", a->kernel_only,
                           "Trace only kernel code (needs root or CAP_PERFMON)");
  k->excludes(ko);
  cmd->add_option("--timer-resolution", a->timer,
                  "low | normal | high | custom:KEY=VAL,... (keys cyc, cyc_thresh, mtc, "
                  "mtc_period, noretcomp, psb_period); default normal")
      ->capture_default_str();
  cmd->add_option("--duration", a->duration, "Stop after this long, e.g. 10s, 500ms");
  cmd->add_flag("--copy-binaries", o.copy_binaries, "Copy the mapped binaries into the trace dir");
  cmd->add_flag("--emulate", o.emulate,
                "Record under the PT emulator (qemu-user) instead of hardware; user space only");
  cmd->add_flag("--no-decode", o.no_decode, "Only record; decode later with `ptsnap decode`");
}

}  // namespace

void RewriteMagicTraceSpellings(int argc, char** argv) {
  bool in_record = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "run" || arg == "attach") in_record = true;
    if (!in_record || arg.size() < 3 || arg[0] != '-' || arg[1] == '-') continue;
    std::string_view name = arg.substr(0, arg.find('='));
    for (auto [from, to] : kMagicTraceFlags) {
      if (name != from) continue;
      // argv's strings are not ours to grow; point at a new one (kept for
      // the life of the process, as argv is).
      static std::vector<std::unique_ptr<std::string>> storage;
      storage.push_back(
          std::make_unique<std::string>(std::string(to) + std::string(arg.substr(name.size()))));
      argv[i] = storage.back()->data();
      break;
    }
  }
}

void AddRecordCommands(CLI::App& app, CommandFn* selected) {
  auto run_args = std::make_shared<Args>();
  CLI::App* run = app.add_subcommand(
      "run", "Start CMD and trace it; snapshot at its exit, the trigger, SIGUSR2 or Ctrl-C");
  AddShared(run, run_args.get());
  run->add_option("command", run_args->opts.command, "Program and arguments (after --)")
      ->expected(-1);
  run->footer(
      "Example: ptsnap run --trigger my_function -- ./server --port 80\n"
      "With -a, the whole system is traced (per CPU) while CMD runs.\n"
      "magic-trace spellings (-trigger, -output, -snapshot-size, ...) are accepted.\n"
      "Exit codes: 0 ok, 1 failure, 2 bad usage, 3 no Intel PT here (try --emulate).");
  run->callback(
      [selected, run_args] { *selected = [run_args] { return RunRecord(*run_args, false); }; });

  auto attach_args = std::make_shared<Args>();
  CLI::App* attach = app.add_subcommand(
      "attach", "Trace running processes until Ctrl-C, the trigger, --duration or their exit");
  AddShared(attach, attach_args.get());
  attach->add_option("-p,--pid", attach_args->pids,
                     "PID[,PID...] to trace (with -a: the process holding the --trigger)");
  attach->footer(
      "Example: sudo ptsnap attach -p 1234 --trigger .\n"
      "System-wide: sudo ptsnap attach -a [--cpu 0-3] --duration 2s (or Ctrl-C, SIGUSR2)\n"
      "Exit codes: 0 ok, 1 failure, 2 bad usage, 3 no Intel PT here (try --emulate).");
  attach->callback([selected, attach_args] {
    *selected = [attach_args] { return RunRecord(*attach_args, true); };
  });
}

}  // namespace ptsnap::cli
