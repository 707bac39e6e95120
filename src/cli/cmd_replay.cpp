// `ptsnap replay TRACE`: the calls as an indented listing with their
// durations, as `uftrace replay` prints them (docs/report.md, "Replay";
// report/replay.h). TRACE is read as `report` reads it (read_trace.h): a
// trace directory decoded streaming, or a decoded FXT or Chrome JSON file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "base/string_util.h"
#include "cli/command.h"
#include "cli/read_trace.h"
#include "report/replay.h"

namespace ptsnap::cli {

namespace {

struct ReplayArgs : TraceInput {
  std::string dir;
  std::optional<int32_t> tid;
  std::string since, until;
  size_t depth = 0, limit = 1000;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "ptsnap: error: %s\n", message.c_str());
  return kExitUsage;
}

int RunReplay(const ReplayArgs& a) {
  report::ReplayOptions o;
  o.tid = a.tid;
  o.depth = a.depth;
  o.limit = a.limit;
  if (!a.since.empty()) {
    auto ns = base::ParseDurationNs(a.since);
    if (!ns) return Usage("--since " + a.since + ": expected a duration such as 10ms or 1.5s");
    o.since_ns = *ns;
  }
  if (!a.until.empty()) {
    auto ns = base::ParseDurationNs(a.until);
    if (!ns) return Usage("--until " + a.until + ": expected a duration such as 10ms or 1.5s");
    if (*ns <= o.since_ns) return Usage("--until must be later than --since");
    o.until_ns = *ns;
  }
  std::fputs(report::ReplayHeader().c_str(), stdout);
  report::ReplaySink sink(
      o, [](std::string_view line) { std::fwrite(line.data(), 1, line.size(), stdout); });
  std::string damaged;
  std::optional<output::Implausible> implausible;
  if (auto rc = ReadTrace(a, a.dir, &sink, &damaged, &implausible, "replay")) return *rc;
  if (sink.printed() < sink.lines())
    std::printf(
        "# %llu of %llu lines shown: --limit N shows more (0: all); --tid, --since/--until and "
        "--depth narrow the listing\n",
        static_cast<unsigned long long>(sink.printed()),
        static_cast<unsigned long long>(sink.lines()));
  int rc = kExitOk;
  if (a.tid && !sink.saw_thread()) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "ptsnap: error: --tid %d: no thread %d in %s (`ptsnap report %s --per-thread` "
                 "lists its threads)\n",
                 *a.tid, *a.tid, a.dir.c_str(), a.dir.c_str());
    rc = kExitFailure;
  }
  if (PrintDamage(damaged) != kExitOk) rc = kExitFailure;
  return rc;
}

}  // namespace

void AddReplayCommand(CLI::App& app, CommandFn* selected) {
  auto a = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Every call as an indented listing with its duration, in the order it ran, as uftrace "
      "replay prints it");
  cmd->footer(
      "Examples:\n"
      "  ptsnap replay trace.ptsnap                       the first 1000 lines, every thread\n"
      "  ptsnap replay trace.ptsnap --tid 1234 --depth 3  one thread, three levels deep\n"
      "  ptsnap replay trace.ptsnap --since 2ms --until 3ms --limit 0\n"
      "                                                   everything in that millisecond\n"
      "  ptsnap replay trace.fxt.gz                       from a decoded FXT or Chrome JSON file");
  cmd->add_option("TRACE", a->dir,
                  "The trace directory written by run/attach, or a file decode wrote (FXT: .fxt, "
                  ".fxt.gz; Chrome JSON: .json, .json.gz), read as report reads it")
      ->required();
  cmd->add_option("--tid", a->tid, "Only this thread (report --per-thread lists them)");
  cmd->add_option("--since", a->since,
                  "Only lines from this long after the trace's first call, e.g. 10ms; the "
                  "frames entered before it open above its first line, saying so");
  cmd->add_option("--until", a->until,
                  "Only lines up to this long after the trace's first call; frames still running "
                  "then get a closing line that says so");
  cmd->add_option("--depth", a->depth,
                  "Leave out frames this many levels deep and deeper (0: none); a call whose "
                  "callees are left out is one line")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit,
                  "Lines to print (a trace has millions of calls); 0 prints all, and the listing "
                  "ends with a note when lines were left out")
      ->capture_default_str();
  AddDecoderFlag(cmd, &a->decoder);
  AddJobsFlag(cmd, &a->jobs);
  cmd->add_option("--snapshot", a->snapshot, "Only snapshot N (`ptsnap info` lists them)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-inline", a->no_inline, "No frames for inlined calls");
  AddDebugDirFlag(cmd, &a->debug_dirs);
  cmd->callback([a, cmd, selected] {
    for (const char* name : {"--decoder", "--snapshot", "--no-inline", "--debug-dir"})
      if (cmd->get_option(name)->count() != 0) a->dir_only.emplace_back(name);
    *selected = [a] { return RunReplay(*a); };
  });
}

}  // namespace ptsnap::cli
