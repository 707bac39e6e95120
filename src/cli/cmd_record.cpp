// `ptsnap run` and `ptsnap attach`: parse the options into RecordOptions,
// check what can be checked before touching anything (options, output,
// trace directory, PMU, privileges), record (hardware or --emulate), then
// decode unless --no-decode.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/file_util.h"
#include "base/string_util.h"
#include "cli/command.h"
#include "elf/elf_file.h"
#include "output/output_file.h"
#include "ptsnap/recording.h"
#include "record/elf_symbols.h"
#include "record/options.h"
#include "sys/cpus.h"

namespace ptsnap::cli {
namespace {

using ::ptsnap::Recording;
using ::ptsnap::RecordingEvent;
using ::ptsnap::RecordingListener;
using ::ptsnap::RecordingOptions;
using ::ptsnap::RecordingResult;

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
    {"-sampling", "--sampling"},
    {"-callgraph-mode", "--callgraph-mode"},
    {"-no-decode", "--no-decode"},
};

struct Args {
  record::RecordOptions opts;
  std::string snapshot_size, timer = "normal", duration, pids, format, cpus, slower_than;
  std::string after = "kill";  // --after
  ViewFlags view;              // how the trace is decoded after recording (decode's flags)
  bool include_kernel = false, kernel_only = false;
};

// --duration: a bare number is seconds, as magic-trace and perf users write it.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  const std::optional<uint64_t> ns = base::ParseDurationNs(text, "s");
  if (!ns || *ns == 0)
    return Error("bad --duration '" + std::string(text) + "': use e.g. 10s, 500ms, 2m, 1.5s");
  return std::chrono::milliseconds((*ns + 999'999) / 1'000'000);
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
  // The file itself, where it exists: a directory by that name, or a file
  // that cannot be replaced, was found only after recording.
  if (std::filesystem::is_directory(output, ec))
    return Error("cannot write output " + output.string() +
                 ": it is a directory; name a file, e.g. -o " + (output / "trace.fxt.gz").string());
  if (std::filesystem::exists(output, ec) && ::access(output.c_str(), W_OK) != 0)
    return Error::FromErrno("cannot write output " + output.string() + ": choose another -o");
  return Ok();
}

// The recording the signal handlers talk to (RequestStop/RequestSnapshot
// are async-signal-safe).
std::atomic<Recording*> g_recording{nullptr};

void OnStopSignal(int) {
  if (Recording* r = g_recording.load()) r->RequestStop();
}
void OnSnapshotSignal(int) {
  if (Recording* r = g_recording.load()) r->RequestSnapshot();
}

// Ctrl-C and SIGTERM end the recording, SIGUSR2 asks for a snapshot, for
// as long as this lives; the old handlers come back after.
class SignalScope {
 public:
  explicit SignalScope(Recording* r) {
    g_recording.store(r);
    Install(SIGINT, OnStopSignal, &old_int_);
    Install(SIGTERM, OnStopSignal, &old_term_);
    Install(SIGUSR2, OnSnapshotSignal, &old_usr2_);
  }
  ~SignalScope() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGUSR2, &old_usr2_, nullptr);
    g_recording.store(nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static void Install(int sig, void (*fn)(int), struct sigaction* old) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sa.sa_flags = SA_RESTART;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, old);
  }
  struct sigaction old_int_ {
  }, old_term_{}, old_usr2_{};
};

// Progress on stderr in perf's and magic-trace's "[ ... ]" style.
class PrintEvents final : public RecordingListener {
 public:
  void OnEvent(const RecordingEvent& e) override {
    switch (e.kind) {
      case RecordingEvent::Kind::kStarted:
      case RecordingEvent::Kind::kTargetExited: return;  // said at the end
      case RecordingEvent::Kind::kWarning:
      case RecordingEvent::Kind::kDataLost:
        std::fprintf(stderr, "ptsnap: warning: %.*s\n", static_cast<int>(e.message.size()),
                     e.message.data());
        return;
      case RecordingEvent::Kind::kInfo:
      case RecordingEvent::Kind::kSnapshot:
        std::fprintf(stderr, "[ %.*s ]\n", static_cast<int>(e.message.size()), e.message.data());
        return;
    }
  }
};

int ExitCodeFor(const Error& e) {
  if (e.kind() == ErrorKind::kNoPmu) return kExitNoPt;
  if (e.kind() == ErrorKind::kUsage) return kExitUsage;
  return kExitFailure;
}

// `--trigger ?` (magic-trace's spelling): the functions of the program
// (run: CMD's executable; attach: the first process's) to choose from,
// through fzf where it is installed and stdin is a terminal, else a
// numbered list on stderr and a prompt on stdin. Returns the chosen
// --trigger NAME, or the exit code: with stdin not a terminal the list is
// printed and it is a usage error (nothing to pick with).
std::variant<std::string, int> PickTrigger(const record::RecordOptions& o, bool attach) {
  std::filesystem::path program;
  if (attach) {
    if (o.pids.empty())
      return Fail("--trigger ? lists the functions of the traced process: give -p PID"), kExitUsage;
    program = "/proc/" + std::to_string(o.pids[0]) + "/exe";
  } else {
    if (o.command.empty())
      return Fail("no command to run: ptsnap run [options] -- CMD ARGS..."), kExitUsage;
    auto exe = record::FindExecutable(o.command[0]);
    if (!exe) return Fail(exe.error().ToString()), kExitFailure;
    program = *exe;
  }
  auto image = elf::ReadFunctions(program);
  if (!image)
    return Fail("--trigger ?: " + image.error().ToString() + ": name the trigger as addr:HEX"),
           kExitFailure;
  const std::vector<std::string> choices = record::TriggerChoices(*image);
  if (choices.empty())
    return Fail("--trigger ?: " + program.string() + " has no function symbols: use addr:HEX"),
           kExitFailure;
  const bool tty = ::isatty(STDIN_FILENO) != 0;
  const char* path = std::getenv("PATH");
  if (tty) {
    if (auto fzf = base::FindInPath(path != nullptr ? path : "/usr/bin:/bin", "fzf")) {
      // fzf reads the list on stdin and the keys from the terminal, and
      // prints the pick on stdout.
      char list_path[] = "/tmp/ptsnap-trigger-XXXXXX";
      const int fd = ::mkstemp(list_path);
      if (fd >= 0) {
        std::string all;
        for (const std::string& c : choices) all += c + "\n";
        const bool written =
            ::write(fd, all.data(), all.size()) == static_cast<ssize_t>(all.size());
        ::close(fd);
        std::string picked;
        if (written) {
          const std::string cmd =
              "'" + fzf->string() + "' --prompt='trigger> ' < '" + list_path + "'";
          if (FILE* f = ::popen(cmd.c_str(), "r")) {
            char buf[4096];
            while (std::fgets(buf, sizeof buf, f) != nullptr) picked += buf;
            ::pclose(f);
          }
        }
        ::unlink(list_path);
        picked = std::string(base::Trim(picked));
        if (picked.empty()) return Fail("--trigger ?: no function chosen"), kExitUsage;
        return picked;
      }
    }
  }
  std::fprintf(stderr, "Functions of %s:\n", program.c_str());
  for (size_t i = 0; i < choices.size(); ++i)
    std::fprintf(stderr, "%6zu  %s\n", i + 1, choices[i].c_str());
  // An example for the message: a name of the program's own, not the
  // toolchain's (_start, __libc_csu_init).
  const auto example = std::find_if(choices.begin(), choices.end(),
                                    [](const std::string& c) { return c[0] != '_'; });
  if (!tty)
    return Fail(
               "--trigger ?: stdin is not a terminal, so there is no one to pick: pass one "
               "of the names above, e.g. --trigger '" +
               (example != choices.end() ? *example : choices.front()) + "'"),
           kExitUsage;
  std::fprintf(stderr, "Trigger (number or name): ");
  std::fflush(stderr);
  std::string line;
  for (int c = std::getchar(); c != EOF && c != '\n'; c = std::getchar())
    line += static_cast<char>(c);
  auto chosen = record::ParseTriggerChoice(line, choices);
  if (!chosen) return Fail(chosen.error().ToString()), kExitUsage;
  std::fprintf(stderr, "[ Trigger: %s ]\n", chosen->c_str());
  return *chosen;
}

int RunRecord(Args& a, bool attach) {
  record::RecordOptions& o = a.opts;
  // The command line's own syntax; everything else is the orchestrator's
  // (session::PlanRecording, through Recording::Create).
  RecordingOptions ro;
  if (a.include_kernel) ro.scope = Scope::kUserAndKernel;
  if (a.kernel_only) ro.scope = Scope::kKernel;
  if (!a.snapshot_size.empty()) {
    auto size = record::ParseSize(a.snapshot_size);
    if (!size) return Fail("--snapshot-size: " + size.error().ToString()), kExitUsage;
    if (*size == 0)
      return Fail(
                 "--snapshot-size 0: a buffer needs at least 4K (perf's minimum); leave the "
                 "option out for the default"),
             kExitUsage;
    ro.snapshot_size = *size;
  }
  ro.timer_resolution = a.timer;  // parsed by Recording::Create (a kUsage error)
  if (!a.duration.empty()) {
    auto d = ParseDuration(a.duration);
    if (!d) return Fail(d.error().ToString()), kExitUsage;
    ro.duration = *d;
  }
  const std::optional<record::AfterRecording> after = record::AfterRecordingFrom(a.after);
  if (!after) return Fail("--after " + a.after + ": expected kill, wait or detach"), kExitUsage;
  switch (*after) {
    case record::AfterRecording::kKill: ro.after = AfterRecording::kKill; break;
    case record::AfterRecording::kWait: ro.after = AfterRecording::kWait; break;
    case record::AfterRecording::kDetach: ro.after = AfterRecording::kDetach; break;
  }
  if (!a.cpus.empty()) {
    auto cpus = sys::ParseCpuList(a.cpus);
    if (!cpus || cpus->empty())
      return Fail("bad --cpu '" + a.cpus + "': expected a CPU list such as 0-3,7"), kExitUsage;
    ro.cpus = *cpus;
  }
  ro.all_cpus = o.all_cpus || !ro.cpus.empty();
  if (attach && a.pids.empty() && !ro.all_cpus)
    return Fail("attach needs -p PID[,PID...] (or -a to trace the whole system)"), kExitUsage;
  if (attach) {
    for (std::string_view p : base::Split(a.pids, ',')) {
      if (a.pids.empty()) break;
      auto pid = base::ParseUint(p);
      if (!pid || *pid == 0 || *pid > INT32_MAX)
        return Fail("bad -p '" + a.pids + "': expected PID[,PID...]"), kExitUsage;
      for (int seen : ro.pids)
        if (seen == static_cast<int>(*pid))
          return Fail("-p lists process " + std::string(p) + " twice"), kExitUsage;
      ro.pids.push_back(static_cast<int>(*pid));
    }
  } else if (o.command.empty()) {
    return Fail("no command to run: ptsnap run [options] -- CMD ARGS..."), kExitUsage;
  }
  ro.command = o.command;
  if (o.emulate && o.sampling)
    return Fail(
               "--sampling and --emulate are two collection modes: --emulate records exact PT "
               "under the emulator, --sampling takes stack samples; choose one"),
           kExitUsage;
  ro.collection = o.emulate    ? Collection::kEmulated
                  : o.sampling ? Collection::kSampled
                               : Collection::kHardware;
  ro.callgraph_mode = o.callgraph_mode;
  ro.full_execution = o.full_execution;
  if (o.trigger == "?") {
    auto picked = PickTrigger(o, attach);
    if (const int* code = std::get_if<int>(&picked)) return *code;
    o.trigger = std::get<std::string>(std::move(picked));
  }
  ro.trigger = o.trigger;
  ro.filter = o.filter;
  ro.only_in = o.only_in;
  // The decode's flags are checked before anything is recorded.
  if (!a.view.min_duration.empty() && !base::ParseDurationNs(a.view.min_duration))
    return Fail("--min-duration " + a.view.min_duration +
                ": expected a duration such as 1us or 0.5ms"),
           kExitUsage;
  if (o.no_decode && (a.view.max_depth != 0 || !a.view.min_duration.empty() || a.view.no_inline ||
                      a.view.split_snapshots || !a.view.debug_dirs.empty()))
    return Fail(
               "--max-depth, --min-duration, --no-inline, --split-snapshots and --debug-dir "
               "shape the decode after recording, and --no-decode skips it: pass them to "
               "`ptsnap decode` later"),
           kExitUsage;
  if (!a.slower_than.empty()) {
    auto ns = record::ParseDuration(a.slower_than);
    if (!ns) return Fail("--slower-than: " + ns.error().ToString()), kExitUsage;
    ro.slower_than_ns = *ns;
  }
  ro.multi_snapshot = o.multi_snapshot;
  ro.multi_thread = o.multi_thread;
  ro.copy_binaries = o.copy_binaries;
  ro.ptw = o.ptw;
  ro.pwr_evt = o.pwr_evt;
  ro.emulate_waits = o.emulate_waits;
  // Ctrl-C on the terminal reaches the program already.
  ro.stop_signal = 0;
  // The trace directory: --trace-dir, else beside -o, else unnamed, which
  // lets the orchestrator move an earlier default one aside (session.h).
  ro.trace_dir =
      o.trace_dir.empty() && !o.output.empty() ? record::DefaultTraceDir(o.output) : o.trace_dir;
  const std::filesystem::path output = o.output.empty() ? "trace.fxt.gz" : o.output;
  if (!o.no_decode) {
    // Before recording: a name decode could not write would be found only
    // after the program ran.
    if (auto f = output::ChooseOutputFormat(a.format, output); !f)
      return Fail(f.error().ToString()), kExitUsage;
    if (auto w = CheckOutputWritable(output); !w) return Fail(w.error().ToString()), kExitFailure;
  }

  PrintEvents printer;
  auto rec = Recording::Create(ro, &printer);
  if (!rec) return Fail(rec.error().ToString()), ExitCodeFor(rec.error());
  const std::filesystem::path trace_dir = rec->trace_dir();
  Result<RecordingResult> result = Error("");
  {
    SignalScope signals(&*rec);
    // A failed start ends the recording: Wait() returns its error.
    (void)rec->Start();
    result = rec->Wait();
  }
  if (!result) return Fail(result.error().ToString()), ExitCodeFor(result.error());
  for (const auto& w : result->warnings) std::fprintf(stderr, "ptsnap: warning: %s\n", w.c_str());
  std::fprintf(stderr, "[ Finished recording: %u snapshot(s) in %s ]\n", result->snapshots,
               trace_dir.c_str());
  if (!attach)
    std::fprintf(stderr, "[ %s exited with status %d ]\n", o.command[0].c_str(),
                 result->program_status);
  // What ptsnap prints shares the terminal with the program, never its
  // stdout: `ptsnap run -- gen | sink` must pass gen's bytes through
  // untouched. `run` exits with the program's status, as `perf record`
  // does, unless ptsnap itself failed (docs/errors.md).
  const int ours =
      o.no_decode ? kExitOk : DecodeAndReport(trace_dir, output, a.format, 0, stderr, a.view);
  if (ours != kExitOk || attach) return ours;
  return result->program_status;
}

void AddShared(CLI::App* cmd, Args* a) {
  auto& o = a->opts;
  cmd->add_option(
      "-o,--output", o.output,
      "Decoded trace file (default trace.fxt.gz; .fxt, .json, .events, optionally .gz)");
  cmd->add_option("--format", a->format, "Output format, overriding the -o suffix");
  AddDecoderFlag(cmd, &a->view.decoder);
  AddViewFlags(cmd, &a->view);
  cmd->add_option("--trace-dir", o.trace_dir,
                  "Where the raw recording is kept (default: beside the output, e.g. "
                  "trace.ptsnap/); must not exist");
  cmd->add_option("--trigger", o.trigger,
                  "Snapshot when this runs: a function of the program, named as `ptsnap report` "
                  "shows it ('risky(int)'), without parameters (risky: every overload), mangled "
                  "(_Z5riskyi), as FILE:NAME or as a glob ('*parse*'), at most 4 functions; "
                  "addr:HEX; '.' for the stop indicator (ptsnap_take_snapshot / "
                  "magic_trace_stop_indicator); '?' to pick from the program's functions (fzf "
                  "on a terminal, else a numbered list)");
  cmd->add_option(
      "--slower-than", a->slower_than,
      "With --trigger FUNC (one function): snapshot when a call of FUNC returns after running at "
      "least this long, e.g. 2ms, 500us, 1.5ms, 800ns (entry and return probes; "
      "under --emulate, virtual time: 1 ns per instruction). With --multi-snapshot "
      "every such call, at most one per thread every max(DURATION, 10ms)");
  cmd->add_option("--filter", o.filter,
                  "Trace only inside these address ranges (Intel PT address filters, perf's "
                  "syntax): a function of the program (--filter work_a), or 'filter FUNC [@ "
                  "FILE]', 'tracestop FUNC', 'filter 0xOFFSET/SIZE @ FILE', several separated by "
                  "commas; at most nr_addr_filters ranges (2 under --emulate). FUNC as --trigger "
                  "takes it (risky(int), risky, _Z5riskyi, a glob); FUNC#N picks one of several");
  cmd->add_option("--only-in", o.only_in,
                  "Trace only while this function runs, everything it calls included: Intel PT is "
                  "paused outside it (Linux 6.13+ AUX pause/resume on its entry and return "
                  "probes; older kernels: --filter FUNC, its own code only), so the ring holds "
                  "many more of its calls. FUNC as --trigger takes it, naming one function");
  cmd->add_flag("--multi-snapshot", o.multi_snapshot,
                "Snapshot every time the trigger fires (or SIGUSR2 arrives), not only the first");
  cmd->add_flag("--multi-thread", o.multi_thread,
                "Trace every thread, including ones created later (default: the main thread; "
                "--emulate always traces every thread)");
  cmd->add_flag("--full-execution", o.full_execution,
                "Record everything instead of a ring buffer, streamed to the trace directory as it "
                "is drained (hundreds of MB/s)");
  cmd->add_option("--snapshot-size", a->snapshot_size,
                  "PT ring buffer per thread (per CPU with -a), e.g. 4M (rounded up to a power "
                  "of two pages; default 4M as root, else 128K within the mlock budget); with "
                  "--sampling the samples kept per thread or CPU (default 512K)");
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
                  "mtc_period, noretcomp, psb_period); default normal. With --sampling: low 1000, "
                  "normal 10000, high the kernel's maximum samples per second, or sample:N")
      ->capture_default_str();
  cmd->add_option("--duration", a->duration,
                  "Stop after this long, e.g. 10s, 500ms, 2m (a bare number is seconds)");
  cmd->add_option("--after", a->after,
                  "run: what becomes of CMD when recording ends before it exits (--duration, the "
                  "trigger's single snapshot): kill (SIGTERM, then SIGKILL 0.5 s later; ptsnap "
                  "exits with its status), wait (for its exit; Ctrl-C or SIGTERM ends it as "
                  "kill does) or detach (leave it running, untraced; ptsnap exits with 0)")
      ->capture_default_str();
  cmd->add_flag("--copy-binaries", o.copy_binaries, "Copy the mapped binaries into the trace dir");
  cmd->add_flag("--ptw", o.ptw,
                "Record PTWRITE for ptsnap_mark() (<ptsnap/mark.h>): sets the intel_pt event's "
                "ptw and fup_on_ptw terms and, for run, PTSNAP_PTWRITE=1 in CMD's environment. "
                "Needs a CPU with PTWRITE (caps/ptwrite); not with --emulate or --sampling. "
                "Default off: marks then use their emulated encoding, which every PT CPU and "
                "--emulate record");
  cmd->add_flag("--pwr-evt", o.pwr_evt,
                "Record power events: sets the intel_pt event's pwr_evt term, so PWRE/PWRX/MWAIT "
                "packets show as '[C-state Cn]' frames on the track of the thread or CPU that went "
                "idle (the '[core clock MHz]' counter from CBR packets is always on). Needs a CPU "
                "with Power Event Trace (caps/power_event_trace); not with --emulate or "
                "--sampling. Default off");
  cmd->add_flag("--emulate", o.emulate,
                "Record under the PT emulator (qemu-user) instead of hardware; user space only");
  cmd->add_flag("--emulate-waits", o.emulate_waits,
                "With --emulate: add to a thread's virtual clock the wall time each of its "
                "syscalls took (sleep, I/O, futex waits), so waits show on the timeline; "
                "instructions still take 1 ns each, and the trace says which clock it used. "
                "Costs two clock reads per syscall; times then vary from run to run");
  cmd->add_flag("--sampling", o.sampling,
                "Take stack samples (perf_event_open: cycles, or cpu-clock without a hardware "
                "PMU) instead of Intel PT, for hosts without PT; statistical: short calls are "
                "missed. attach picks it by itself where there is no Intel PT");
  cmd->add_option("--callgraph-mode", o.callgraph_mode,
                  "With --sampling, how call stacks are taken: fp (frame pointers), dwarf (a copy "
                  "of the user stack, unwound later), lbr (last branch records; hardware only), "
                  "lbr-no-stitch (as lbr). Default: lbr where the CPU has it, else dwarf");
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
      "Without Intel PT: --emulate (exact, under qemu-user) or --sampling (stack samples).\n"
      "Exit codes: 0 ok, 1 failure, 2 bad usage, 3 no Intel PT here (try --emulate or "
      "--sampling).");
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
      "Without Intel PT, attach takes stack samples (--sampling) and says so.\n"
      "Exit codes: 0 ok, 1 failure, 2 bad usage, 3 no Intel PT here (try --sampling).");
  attach->callback([selected, attach_args] {
    *selected = [attach_args] { return RunRecord(*attach_args, true); };
  });
}

}  // namespace ptsnap::cli
