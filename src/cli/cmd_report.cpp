// `ptsnap report TRACE [FUNC...]`: per-function numbers from a trace
// without a viewer (docs/report.md). TRACE is a trace directory, decoded
// once, streaming, into report::ReportSink, or a decoded file read once
// into the same sink (report/trace_file.h): FXT (.fxt, .fxt.gz) streaming,
// Chrome JSON (.json, .json.gz) holding each thread's frames; nothing but the report (and -o's
// file) is written. -o writes the stacks as collapsed text (.folded) or a pprof profile (.pprof,
// .pb.gz: report/pprof.h). --diff B reads a second trace the same way and
// prints both side by side per function (report/diff.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "base/file_util.h"
#include "base/string_util.h"
#include "cli/command.h"
#include "cli/read_trace.h"
#include "output/output_file.h"
#include "pipeline/pipeline.h"
#include "pipeline/sampled.h"
#include "report/diff.h"
#include "report/pprof.h"
#include "report/report.h"
#include "report/trace_file.h"
#include "trace/decode_verdict.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {

namespace {

struct ReportArgs : TraceInput {
  std::string dir;
  std::vector<std::string> functions;
  bool per_thread = false, json = false, full_names = false, by_mark = false;
  bool callers = false, callees = false;
  size_t slowest = 0, depth = 3, limit = 20;
  std::string sort = "total", since, until, output;
  std::string diff;  // --diff B: TRACE is the baseline
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "ptsnap: error: %s\n", message.c_str());
  return kExitUsage;
}

// Reads TRACE `path` into the report's sink (read_trace.h).
std::optional<int> ReadTrace(const ReportArgs& a, const std::string& path, report::ReportSink* sink,
                             std::string* damaged) {
  std::optional<output::Implausible> implausible;
  auto rc = cli::ReadTrace(a, path, sink, damaged, &implausible, "report");
  if (implausible) sink->SetImplausible(std::move(*implausible));
  return rc;
}

// `o` with what the manifest of trace `path` says (a file decode wrote has
// none): whether the trace is sampled, its clock, and the triggers its
// snapshots were taken by, to explain a FUNC with no calls.
report::ReportOptions WithManifestFacts(report::ReportOptions o, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return o;
  auto reader = trace::TraceReader::Open(path);
  if (!reader) return o;
  const trace::Manifest& m = reader->manifest();
  if (m.source == trace::Source::kSampled) {
    o.sampled = true;
    if (m.sampling) o.sample_period_ns = pipeline::NominalPeriodNs(*m.sampling);
  }
  o.clock = trace::ClockName(m.source, m.virtual_clock);
  for (const trace::Snapshot& s : m.snapshots)
    if (s.reason == trace::SnapshotReason::kTrigger && !s.detail.empty())
      o.triggers.push_back(s.detail);
  return o;
}

// `report A --diff B`: both read with the same options (report/diff.h),
// each with its own manifest's facts.
int RunDiff(const ReportArgs& a, const report::ReportOptions& o, report::SortKey key) {
  report::ReportSink sink_a(WithManifestFacts(o, a.dir)), sink_b(WithManifestFacts(o, a.diff));
  std::string damaged_a, damaged_b;
  if (auto rc = ReadTrace(a, a.dir, &sink_a, &damaged_a)) return *rc;
  if (auto rc = ReadTrace(a, a.diff, &sink_b, &damaged_b)) return *rc;
  if (!a.output.empty()) {
    if (auto w = base::WriteFileAtomic(a.output, report::DiffFolded(sink_a, sink_b), 0644); !w) {
      std::fprintf(stderr, "ptsnap: error: %s\n", w.error().ToString().c_str());
      return kExitFailure;
    }
    std::fprintf(stderr,
                 "Wrote %s: differential folded stacks, \"stack SELF_NS_A SELF_NS_B\" "
                 "(flamegraph.pl %s > diff.svg, inferno-flamegraph)\n",
                 a.output.c_str(), a.output.c_str());
  }
  const report::DiffTrace ta{a.dir, &sink_a}, tb{a.diff, &sink_b};
  const std::string text = a.json ? report::FormatDiffJson(ta, tb, key, a.limit)
                                  : report::FormatDiffText(ta, tb, key, a.limit, a.full_names);
  std::fputs(text.c_str(), stdout);
  int rc = kExitOk;
  for (const std::string* damaged : {&damaged_a, &damaged_b}) {
    if (damaged->empty()) continue;
    std::fflush(stdout);
    std::fputs(("Damaged PT:\n" + *damaged).c_str(), stderr);
    rc = kExitFailure;
  }
  for (const report::DiffTrace* t : {&ta, &tb}) {
    if (const uint64_t impossible = t->sink->implausible().count(); impossible != 0) {
      std::fprintf(stderr,
                   "ptsnap: error: %s: %llu impossible result(s) (listed in the report): its "
                   "numbers are not to be trusted\n",
                   t->path.c_str(), static_cast<unsigned long long>(impossible));
      rc = kExitFailure;
    }
  }
  return rc;
}

int RunReport(const ReportArgs& a) {
  report::ReportOptions o;
  o.per_thread = a.per_thread;
  o.functions = a.functions;
  o.slowest = a.slowest;
  o.tree_depth = a.depth;
  o.by_mark = a.by_mark;
  o.callers = a.callers;
  o.callees = a.callees;
  if (a.by_mark && a.functions.empty())
    return Usage(
        "--by-mark groups the calls of the functions named after TRACE: "
        "ptsnap report TRACE FUNC --by-mark");
  for (const auto& [set, flag] : {std::pair{a.callers, "--callers"}, {a.callees, "--callees"}})
    if (set && a.functions.empty())
      return Usage(std::string(flag) + " lists who called (what was called by) the functions " +
                   "named after TRACE: ptsnap report TRACE FUNC " + flag);
  if (a.slowest != 0 && a.functions.empty())
    return Usage("--slowest N lists the slowest calls of the functions named after TRACE: " +
                 std::string("ptsnap report TRACE FUNC --slowest ") + std::to_string(a.slowest));
  auto key = report::SortKeyFrom(a.sort);
  if (!key) return Usage("--sort " + a.sort + ": use total, self, calls, p99, max or name");
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
  const bool difffolded = a.output.ends_with(".difffolded");
  if (!a.diff.empty()) {
    // One table of both traces' functions, merged over threads; the
    // slowest calls and the marks are one trace's (run report on each).
    if (a.per_thread)
      return Usage(
          "--per-thread with --diff: the comparison has one row per function, merged over "
          "threads (run ptsnap report TRACE --per-thread on each trace)");
    if (a.slowest != 0 || a.by_mark)
      return Usage(std::string(a.slowest != 0 ? "--slowest" : "--by-mark") +
                   " with --diff: it lists one trace's calls (run ptsnap report TRACE FUNC " +
                   (a.slowest != 0 ? "--slowest N" : "--by-mark") +
                   " on each trace; with --diff, FUNC's histograms are shown side by side)");
    if (a.callers || a.callees)
      return Usage(std::string(a.callers ? "--callers" : "--callees") +
                   " with --diff: it lists one trace's calls (run ptsnap report TRACE FUNC " +
                   (a.callers ? "--callers" : "--callees") + " on each trace)");
    if (!a.output.empty() && !difffolded)
      return Usage("-o " + a.output +
                   " with --diff: the comparison writes differential folded stacks (name the file "
                   ".difffolded)");
    o.folded = difffolded;
    return RunDiff(a, o, *key);
  }
  if (difffolded)
    return Usage("-o " + a.output + ": differential folded stacks compare two traces: ptsnap " +
                 "report A --diff B -o " + a.output);
  const bool pprof = report::IsPprofPath(a.output);
  if (!a.output.empty()) {
    if (!a.output.ends_with(".folded") && !pprof)
      return Usage("-o " + a.output +
                   ": report writes collapsed stacks (name the file .folded) or a pprof profile "
                   "(.pprof or .pb.gz)");
    o.folded = true;
  }

  report::ReportSink sink(WithManifestFacts(o, a.dir));
  std::string damaged;  // the decode's DamageError, with the stretches lost
  if (auto rc = ReadTrace(a, a.dir, &sink, &damaged)) return *rc;
  if (!a.output.empty()) {
    if (pprof) {
      // A gzip member except for .pb (profile.proto), through the decoder's
      // own output file.
      auto f = output::OutputFile::Open(a.output, !report::IsUncompressedPprofPath(a.output));
      Result<void> w = Ok();
      if (!f) {
        w = std::move(f).error();
      } else {
        (*f)->Write(report::EncodePprof(sink.Stacks(), sink.span_ns()));
        w = (*f)->Close();
      }
      if (!w) {
        std::fprintf(stderr, "ptsnap: error: writing %s: %s\n", a.output.c_str(),
                     w.error().ToString().c_str());
        return kExitFailure;
      }
    } else if (auto w = base::WriteFileAtomic(a.output, sink.FoldedStacks(), 0644); !w) {
      std::fprintf(stderr, "ptsnap: error: %s\n", w.error().ToString().c_str());
      return kExitFailure;
    }
    if (pprof) {
      std::fprintf(stderr,
                   "Wrote %s: pprof profile, samples \"wall\" (self time in ns, the default) and "
                   "\"calls\" per stack (pprof -http=: %s, go tool pprof, speedscope)\n",
                   a.output.c_str(), a.output.c_str());
    } else {
      std::fprintf(stderr,
                   "Wrote %s: collapsed stacks weighted by self time in ns (flamegraph.pl, "
                   "inferno, speedscope)\n",
                   a.output.c_str());
    }
  }
  const std::string text = a.json ? report::FormatJson(sink, *key, a.limit)
                                  : report::FormatText(sink, *key, a.limit, a.full_names);
  std::fputs(text.c_str(), stdout);
  int rc = kExitOk;
  if (PrintDamage(damaged) != kExitOk) rc = kExitFailure;
  // The table is printed, but not all of it can be true (docs/errors.md).
  if (const uint64_t impossible = sink.implausible().count(); impossible != 0) {
    std::fprintf(stderr,
                 "ptsnap: error: %s: %llu impossible result(s) (listed in the report): its numbers "
                 "are not to be trusted\n",
                 a.dir.c_str(), static_cast<unsigned long long>(impossible));
    rc = kExitFailure;
  }
  return rc;
}

}  // namespace

void AddReportCommand(CLI::App& app, CommandFn* selected) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Per-function numbers without a viewer: calls, total and self time, latency percentiles, "
      "histograms, the slowest calls and what ran under them, callers and callees");
  cmd->footer(
      "Examples:\n"
      "  ptsnap report trace.ptsnap                       the 20 functions with most total time\n"
      "  ptsnap report trace.ptsnap parse --slowest 3     parse's histogram and its 3 slowest "
      "calls\n"
      "  ptsnap report trace.ptsnap handle --by-mark      handle's percentiles per request mark\n"
      "  ptsnap report trace.ptsnap parse --callers       who called parse, and its time from "
      "each\n"
      "  ptsnap report trace.ptsnap parse --callees       what parse called, and the time in each\n"
      "  ptsnap report trace.ptsnap --sort p99 --json     for scripts and agents\n"
      "  ptsnap report trace.ptsnap -o t.folded           collapsed stacks for a flame graph\n"
      "  ptsnap report trace.ptsnap -o t.pb.gz            a pprof profile (pprof -http=: t.pb.gz)\n"
      "  ptsnap report trace.fxt.gz parse                 from a decoded FXT file (no decode)\n"
      "  ptsnap report trace.json parse                   or a Chrome JSON file decode wrote\n"
      "  ptsnap report before.ptsnap --diff after.ptsnap  per function: what changed from before "
      "to after\n"
      "  ptsnap report a.fxt --diff b.fxt -o d.difffolded and a differential flame graph's "
      "stacks");
  cmd->add_option("TRACE", a->dir,
                  "The trace directory written by run/attach, or a file decode wrote, read as "
                  "written (a thinned file reports what it holds): FXT (.fxt, .fxt.gz, "
                  "streamed) or Chrome JSON (.json, .json.gz: each thread's frames are held until "
                  "the file ends). --decoder, --snapshot and --no-inline need the directory")
      ->required();
  cmd->add_option("FUNC", a->functions,
                  "Functions to show a duration histogram for (and, with --slowest, their "
                  "slowest calls), named as the report shows them ('risky(int)'), without "
                  "parameters (risky: every overload), mangled (_Z5riskyi) or as a glob "
                  "('*parse*'); a FUNC that names none gets the nearest names");
  cmd->add_flag("--per-thread", a->per_thread, "One row per function and thread");
  cmd->add_flag("--full-names", a->full_names,
                "Print names whole; by default a name over 40 columns is shortened, template "
                "argument and parameter lists first (<...>, (...)), as uftrace's "
                "--demangle=simple");
  cmd->add_option("--slowest", a->slowest,
                  "List the N slowest calls of each FUNC with the call tree under each");
  cmd->add_flag("--by-mark", a->by_mark,
                "Latency percentiles of each FUNC per mark in force when its calls began (the "
                "thread's last PTWRITE or ptsnap_mark payload: docs/report.md, \"Marks\")");
  cmd->add_flag("--callers", a->callers,
                "For each FUNC, each caller with the calls it made and FUNC's time from them (a "
                "recursive call's time counted with its outermost call's caller: the rows add up "
                "to FUNC's total) and its share");
  cmd->add_flag("--callees", a->callees,
                "For each FUNC, each function it called with the calls and the time in it under "
                "FUNC (recursion counted once) and its share of FUNC's total");
  cmd->add_option("--depth", a->depth, "Levels of the call tree under each slow call")
      ->capture_default_str();
  cmd->add_option(
         "--diff", a->diff,
         "Compare TRACE (A, the baseline) with B, another trace directory or decoded "
         "file: per function, calls, total, self, p50 and p99 of each and the change of "
         "total (B - A); FUNCs get both histograms. Not with --per-thread, --slowest, "
         "--by-mark, --callers or --callees; -o FILE.difffolded writes differential folded stacks")
      ->type_name("B");
  cmd->add_option("--sort", a->sort,
                  "Sort rows by total, self, calls, p99, max or name; with --diff, by the "
                  "absolute change of that column from A to B (every key applies)")
      ->capture_default_str();
  cmd->add_option(
         "--limit", a->limit,
         "Rows to print; 0 prints every function (a FUNC named after TRACE keeps its row past it)")
      ->capture_default_str();
  cmd->add_option("--since", a->since,
                  "Count only calls that start this long after the first call, e.g. 10ms");
  cmd->add_option("--until", a->until,
                  "Count only calls that end before this long after the first call");
  AddDecoderFlag(cmd, &a->decoder);
  AddJobsFlag(cmd, &a->jobs);
  cmd->add_option("--snapshot", a->snapshot, "Only snapshot N (`ptsnap info` lists them)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-inline", a->no_inline,
                "No rows for inlined calls (by default, where the binary has DWARF, code the "
                "compiler inlined counts as \"NAME (inlined)\", its time not its caller's self "
                "time)");
  AddDebugDirFlag(cmd, &a->debug_dirs);
  cmd->add_flag("--json", a->json, "Print JSON (docs/report.md) instead of text");
  cmd->add_option("-o,--output", a->output,
                  "Also write the stacks weighted by self time: FILE.folded (collapsed stacks for "
                  "flamegraph.pl, inferno, speedscope) or FILE.pprof / FILE.pb.gz (a gzipped pprof "
                  "profile; .pb: uncompressed) for pprof and go tool pprof; with --diff, "
                  "FILE.difffolded (\"stack SELF_NS_A SELF_NS_B\" lines for flamegraph.pl and "
                  "inferno-flamegraph)");
  cmd->callback([a, cmd, selected] {
    for (const char* name : {"--decoder", "--snapshot", "--no-inline", "--debug-dir"})
      if (cmd->get_option(name)->count() != 0) a->dir_only.emplace_back(name);
    *selected = [a] { return RunReport(*a); };
  });
}

}  // namespace ptsnap::cli
