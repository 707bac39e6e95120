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
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "api/option_table.h"
#include "base/file_util.h"
#include "base/string_util.h"
#include "cli/command.h"
#include "elf/elf_file.h"
#include "output/output_file.h"
#include "ptsnap/recording.h"
#include "record/elf_symbols.h"
#include "record/linked_libraries.h"
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

// magic-trace's single-dash long flags of the CLI's own options, rewritten
// to ours before parsing; the option table's rows carry theirs
// (api::OptionSpec::magic_trace).
constexpr std::pair<const char*, const char*> kMagicTraceFlags[] = {
    {"-output", "--output"},
    {"-trace-include-kernel", "--trace-include-kernel"},
    {"-trace-kernel-only", "--trace-kernel-only"},
    {"-duration", "--duration"},
    {"-pid", "--pid"},
    {"-no-decode", "--no-decode"},
};

// What the command line gave for one row of the option table.
struct TableArg {
  std::string text;   // a kText row's value
  bool flag = false;  // a kBool row's flag
  CLI::Option* option = nullptr;
};

struct Args {
  record::RecordOptions opts;  // the CLI's own options: -o, -a, --no-decode, CMD
  // The option table's rows (api::RecordingOptionTable()), by row; sized
  // once before CLI11 holds references into it.
  std::vector<TableArg> table = std::vector<TableArg>(api::RecordingOptionTable().size());
  std::string duration, pids, format, cpus;
  ViewFlags view;  // how the trace is decoded after recording (decode's flags)
  bool include_kernel = false, kernel_only = false;

  // The row of `key` as given; nullptr where the command line left it out
  // and it has no default.
  const TableArg* Given(std::string_view key) const {
    const auto rows = api::RecordingOptionTable();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].key != key || rows[i].cli != api::CliForm::kFlag) continue;
      const TableArg& t = table[i];
      if (t.option->count() > 0 || !rows[i].cli_default.empty()) return &t;
      return nullptr;
    }
    return nullptr;
  }
  bool Flag(std::string_view key) const {
    const TableArg* t = Given(key);
    return t != nullptr && t->flag;
  }
};

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
std::variant<std::string, int> PickTrigger(const RecordingOptions& o, bool attach) {
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
  // Its libraries' functions as LIB:NAME, the spelling --trigger takes: all
  // of them for fzf to search, a line per library in the numbered list.
  std::vector<std::string> everything = choices;
  std::vector<std::string> library_lines;
  auto libs =
      attach ? record::MappedLibraries(o.pids[0], program) : record::LinkedLibraries(program);
  for (const std::string& lib : libs ? *libs : std::vector<std::string>{}) {
    auto functions = elf::ReadFunctions(lib);
    if (!functions) continue;
    const std::string name = std::filesystem::path(lib).filename().string();
    const std::vector<std::string> more = record::TriggerChoices(*functions, name);
    if (more.empty()) continue;
    everything.insert(everything.end(), more.begin(), more.end());
    library_lines.push_back(name + " (" + std::to_string(more.size()) + " functions: " + lib + ")");
  }
  if (everything.empty())
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
        for (const std::string& c : everything) all += c + "\n";
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
  if (!library_lines.empty()) {
    const auto first = everything.begin() + static_cast<std::ptrdiff_t>(choices.size());
    const auto lib_example = std::find_if(
        first, everything.end(), [](const std::string& c) { return c[c.find(':') + 1] != '_'; });
    std::fprintf(stderr, "and of the libraries it %s (name one as LIB:NAME, e.g. %s):\n",
                 attach ? "maps" : "links",
                 (lib_example != everything.end() ? *lib_example : *first).c_str());
    for (const std::string& l : library_lines) std::fprintf(stderr, "        %s\n", l.c_str());
  }
  // An example for the message: a name of the program's own, not the
  // toolchain's (_start, __libc_csu_init).
  const auto example = std::find_if(everything.begin(), everything.end(),
                                    [](const std::string& c) { return c[0] != '_'; });
  if (!tty)
    return Fail(
               "--trigger ?: stdin is not a terminal, so there is no one to pick: pass one "
               "of the names above, e.g. --trigger '" +
               (example != everything.end() ? *example : everything.front()) + "'"),
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
  if (!a.duration.empty()) {
    auto d = record::ParseRecordingDuration(a.duration);
    if (!d) return Fail(d.error().ToString()), kExitUsage;
    ro.duration = *d;
  }
  // The option table's --after says "bad value", the CLI's own message
  // came first (docs/errors.md).
  if (const TableArg* after = a.Given("after"); after && !record::AfterRecordingFrom(after->text))
    return Fail("--after " + after->text + ": expected kill, wait or detach"), kExitUsage;
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
  if (a.Flag("emulate") && a.Flag("sampling"))
    return Fail(
               "--sampling and --emulate are two collection modes: --emulate records exact PT "
               "under the emulator, --sampling takes stack samples; choose one"),
           kExitUsage;
  // The option table's flags, each through its row's setter, as the C
  // ABI's keys are (api/option_table.h).
  const auto rows = api::RecordingOptionTable();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].cli != api::CliForm::kFlag) continue;
    const TableArg* given = a.Given(rows[i].key);
    if (given == nullptr) continue;
    if (rows[i].value == api::OptionValue::kBool && !given->flag) continue;
    const std::string_view text =
        rows[i].value == api::OptionValue::kBool ? std::string_view("1") : given->text;
    if (auto set = rows[i].set(ro, text); !set)
      return Fail("--" + std::string(rows[i].key) + ": " + set.error().ToString()), kExitUsage;
  }
  if (a.Given("snapshot-size") != nullptr && ro.snapshot_size == 0)
    return Fail(
               "--snapshot-size 0: a buffer needs at least 4K (perf's minimum); leave the "
               "option out for the default"),
           kExitUsage;
  if (ro.trigger == "?") {
    auto picked = PickTrigger(ro, attach);
    if (const int* code = std::get_if<int>(&picked)) return *code;
    ro.trigger = std::get<std::string>(std::move(picked));
  }
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
  // Ctrl-C on the terminal reaches the program already.
  ro.stop_signal = 0;
  // The trace directory: --trace-dir (never replaced), else beside -o or
  // unnamed, where the orchestrator moves an earlier one aside (session.h).
  if (ro.trace_dir.empty() && !o.output.empty()) {
    ro.trace_dir = record::DefaultTraceDir(o.output);
    ro.move_aside_existing = true;
  }
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

// The CLI's own flags for the table's kOwn row `key` (attach adds -p).
void AddOwnFlags(CLI::App* cmd, Args* a, std::string_view key) {
  if (key == "all-cpus")
    cmd->add_flag("-a,--all-cpus", a->opts.all_cpus,
                  "System-wide: trace every task on every online CPU, one PT buffer per CPU "
                  "(needs root, CAP_PERFMON, or perf_event_paranoid <= 0)");
  if (key == "cpu")
    cmd->add_option("-C,--cpu", a->cpus, "With -a, only these CPUs, e.g. 0-3,7 (implies -a)");
  if (key == "scope") {
    auto* k = cmd->add_flag("--trace-include-kernel", a->include_kernel,
                            "Trace kernel code too (needs root or CAP_PERFMON)");
    auto* ko = cmd->add_flag("--trace-kernel-only", a->kernel_only,
                             "Trace only kernel code (needs root or CAP_PERFMON)");
    k->excludes(ko);
  }
  if (key == "duration-ms")
    cmd->add_option("--duration", a->duration,
                    "Stop after this long, e.g. 10s, 500ms, 2m (a bare number is seconds)");
}

void AddShared(CLI::App* cmd, Args* a) {
  auto& o = a->opts;
  cmd->add_option(
      "-o,--output", o.output,
      "Decoded trace file (default trace.fxt.gz; .fxt, .json, .events, optionally .gz)");
  cmd->add_option("--format", a->format, "Output format, overriding the -o suffix");
  AddDecoderFlag(cmd, &a->view.decoder);
  AddViewFlags(cmd, &a->view);
  // The option table's rows in its order, which is --help's; a row the CLI
  // spells its own way stands where its flags go.
  const auto rows = api::RecordingOptionTable();
  for (size_t i = 0; i < rows.size(); ++i) {
    const api::OptionSpec& row = rows[i];
    TableArg& t = a->table[i];
    const std::string name = "--" + std::string(row.key);
    const std::string help(row.help);
    switch (row.cli) {
      case api::CliForm::kFlag:
        if (row.value == api::OptionValue::kBool) {
          t.option = cmd->add_flag(name, t.flag, help);
        } else {
          t.text = std::string(row.cli_default);
          t.option = cmd->add_option(name, t.text, help);
          if (!row.cli_default.empty()) t.option->capture_default_str();
        }
        break;
      case api::CliForm::kOwn: AddOwnFlags(cmd, a, row.key); break;
      case api::CliForm::kNone: break;
    }
  }
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
    std::string to;
    for (auto [from, ours] : kMagicTraceFlags)
      if (name == from) to = ours;
    for (const api::OptionSpec& row : api::RecordingOptionTable())
      for (std::string_view from : row.magic_trace)
        if (!from.empty() && name == from) to = "--" + std::string(row.key);
    if (to.empty()) continue;
    // argv's strings are not ours to grow; point at a new one (kept for
    // the life of the process, as argv is).
    static std::vector<std::unique_ptr<std::string>> storage;
    storage.push_back(std::make_unique<std::string>(to + std::string(arg.substr(name.size()))));
    argv[i] = storage.back()->data();
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
      "--sampling).\n"
      "Once CMD has run, run exits with CMD's own status instead (as perf record does; 128+N "
      "for a signal N), unless ptsnap failed after it: the [ ... ] lines on stderr say which.");
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
