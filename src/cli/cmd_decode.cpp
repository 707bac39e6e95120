// `ptsnap decode TRACE_DIR [-o FILE] [--format fxt|json|events] [--snapshot N]
// [--max-depth N] [--min-duration D] [--no-inline] [--split-snapshots] [-j N]
// [--open [--port P]]` and DecodeAndReport,
// which `run`/`attach` call after recording.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "base/log.h"
#include "base/string_util.h"
#include "cli/command.h"
#include "output/output_file.h"
#include "output/summary.h"
#include "pipeline/pipeline.h"
#include "trace/decode_verdict.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {

namespace {

void PrintProgress(uint64_t done, uint64_t total) {
  if (total == 0) return;
  std::fprintf(stderr, "\rdecoding: %3d%% (%.1f of %.1f MB of PT)",
               static_cast<int>(done * 100 / total), static_cast<double>(done) / 1e6,
               static_cast<double>(total) / 1e6);
  std::fflush(stderr);
}

// A line per file for --split-snapshots: what it holds.
std::string SplitLine(const pipeline::DecodeReport& r, const trace::Snapshot& sn) {
  const uint64_t span = r.last_ns >= r.first_ns ? r.last_ns - r.first_ns : 0;
  std::string line =
      "  " + r.output.string() + ": snapshot " + std::to_string(sn.seq) + " (" +
      std::string(trace::ToString(sn.reason)) + (sn.detail.empty() ? "" : " " + sn.detail) + "), " +
      std::to_string(r.slices) + " slices on " + std::to_string(r.threads) + " thread(s) over " +
      output::FormatDuration(span) + ", decode errors: " + std::to_string(r.decode.errors);
  if (r.thin.active())
    line += ", thinned: " + std::to_string(r.thin_dropped.too_deep + r.thin_dropped.too_short) +
            " spans left out";
  if (!r.damage.empty())
    line += ", damaged PT: " + std::to_string(r.damaged_bytes()) + " bytes lost or undecodable";
  for (const auto& w : r.warnings) line += "\n    warning: " + w;
  if (!r.damage.empty()) line += "\n" + pipeline::FormatDamage(r);
  if (line.back() == '\n') line.pop_back();
  return line;
}

}  // namespace

std::filesystem::path SplitSnapshotPath(const std::filesystem::path& output, uint32_t seq) {
  const std::string name = output.filename().string();
  const std::string tag = ".snap" + std::to_string(seq);
  for (const char* suffix : {".fxt.gz", ".json.gz", ".events.gz", ".fxt", ".json", ".events"}) {
    if (name.size() > std::string_view(suffix).size() && name.ends_with(suffix)) {
      const size_t at = name.size() - std::string_view(suffix).size();
      return output.parent_path() / (name.substr(0, at) + tag + name.substr(at));
    }
  }
  return output.parent_path() / (name + tag);
}

std::filesystem::path DefaultDecodeOutput(const std::filesystem::path& trace_dir) {
  std::string name = trace_dir.filename().string();
  if (name.empty()) name = trace_dir.parent_path().filename().string();  // "x.ptsnap/"
  constexpr std::string_view kSuffix = ".ptsnap";
  if (name.size() > kSuffix.size() && name.ends_with(kSuffix))
    return name.substr(0, name.size() - kSuffix.size()) + ".fxt.gz";
  return "trace.fxt.gz";
}

int DecodeAndReport(const std::filesystem::path& trace_dir, const std::filesystem::path& output,
                    const std::string& format, uint32_t snapshot, std::FILE* report_to,
                    const ViewFlags& view) {
  pipeline::DecodeOptions options;
  options.thin.max_depth = view.max_depth;
  if (!view.min_duration.empty()) {
    auto ns = base::ParseDurationNs(view.min_duration);
    if (!ns) {
      std::fprintf(stderr,
                   "ptsnap: error: --min-duration %s: expected a duration such as 1us or 0.5ms\n",
                   view.min_duration.c_str());
      return kExitUsage;
    }
    options.thin.min_duration_ns = *ns;
  }
  options.snapshot = snapshot;
  options.decoder = DecoderEngine(view.decoder);
  options.inline_frames = !view.no_inline;
  options.debug_dirs.assign(view.debug_dirs.begin(), view.debug_dirs.end());
  options.jobs = view.jobs;
  options.output = output.empty() ? std::filesystem::path("trace.fxt.gz") : output;
  auto chosen = output::ChooseOutputFormat(format, options.output);
  if (!chosen) {
    std::fprintf(stderr, "ptsnap: error: %s\n", chosen.error().ToString().c_str());
    return kExitUsage;
  }
  options.format = *chosen;
  if (view.open && options.format == "events") {
    std::fprintf(stderr,
                 "ptsnap: error: --open serves a timeline to ui.perfetto.dev, and .events text is "
                 "not one: write .fxt, .fxt.gz or .json\n");
    return kExitUsage;
  }
  // Progress only where someone watches: a terminal, or -v.
  bool progress = ::isatty(STDERR_FILENO) != 0 || base::Verbosity() > 0;
  if (progress) options.progress = PrintProgress;
  // Said while the file grows past what the viewer loads, so that a long
  // decode can be stopped; the line after the summary says it again.
  options.on_viewer_size = [progress](const std::string& warning, uint64_t) {
    std::fprintf(stderr, "%s%s\n", progress ? "\r\033[K" : "", warning.c_str());
  };
  if (view.split_snapshots) {
    if (snapshot != 0) {
      std::fprintf(stderr,
                   "ptsnap: error: --split-snapshots writes every snapshot to its own file; "
                   "--snapshot %u decodes one: pass one of them\n",
                   snapshot);
      return kExitUsage;
    }
    if (view.open) {
      std::fprintf(stderr,
                   "ptsnap: error: --open serves one file and --split-snapshots writes one per "
                   "snapshot: serve the one you want with `ptsnap serve FILE`\n");
      return kExitUsage;
    }
    auto reader = trace::TraceReader::Open(trace_dir);
    if (!reader) {
      std::fprintf(stderr, "ptsnap: error: decoding %s: %s\n", trace_dir.c_str(),
                   reader.error().ToString().c_str());
      return kExitFailure;
    }
    const std::vector<trace::Snapshot> snaps = reader->manifest().snapshots;
    if (snaps.empty()) {
      std::fprintf(stderr,
                   "ptsnap: error: --split-snapshots: %s has no snapshots (a "
                   "full-execution recording, or nothing recorded yet): decode it without the "
                   "flag\n",
                   trace_dir.c_str());
      return kExitFailure;
    }
    std::string lines;
    std::vector<std::string> size_warnings;
    uint64_t damaged = 0;
    for (const trace::Snapshot& sn : snaps) {
      pipeline::DecodeOptions one = options;
      one.snapshot = sn.seq;
      one.output = SplitSnapshotPath(options.output, sn.seq);
      auto r = pipeline::DecodeTraceDir(trace_dir, one);
      if (progress) std::fputs("\r\033[K", stderr);
      if (!r) {
        std::fprintf(stderr, "ptsnap: error: decoding snapshot %u of %s: %s\n", sn.seq,
                     trace_dir.c_str(), r.error().ToString().c_str());
        return kExitFailure;
      }
      lines += SplitLine(*r, sn) + "\n";
      damaged += r->damaged_bytes();
      if (std::string w = pipeline::ViewerSizeWarning(*r); !w.empty())
        size_warnings.push_back(std::move(w));
    }
    std::fprintf(report_to, "Wrote %zu file(s), one per snapshot (--split-snapshots):\n%s",
                 snaps.size(), lines.c_str());
    std::fprintf(report_to, "Open each at https://ui.perfetto.dev%s\n",
                 options.format == "events" ? " (.events: text, see docs/decoding.md)" : "");
    for (const std::string& w : size_warnings) std::fprintf(stderr, "%s\n", w.c_str());
    if (damaged != 0) {
      std::fflush(report_to);
      std::fprintf(stderr,
                   "ptsnap: error: %s is damaged: %llu bytes of PT were lost or undecodable "
                   "(listed above, by snapshot, stream and offset); the rest was decoded\n",
                   trace_dir.c_str(), static_cast<unsigned long long>(damaged));
      return kExitFailure;
    }
    return kExitOk;
  }
  auto report = pipeline::DecodeTraceDir(trace_dir, options);
  if (progress) std::fputs("\r\033[K", stderr);
  if (!report) {
    std::fprintf(stderr, "ptsnap: error: decoding %s: %s\n", trace_dir.c_str(),
                 report.error().ToString().c_str());
    return report.error().kind() == ErrorKind::kUsage ? kExitUsage : kExitFailure;
  }
  std::fputs(pipeline::FormatReport(*report).c_str(), report_to);
  // For `info`. A recording the user may not write to (someone else's, a
  // read-only copy) is decoded all the same, without the note.
  if (snapshot == 0)
    (void)trace::WriteDecodeVerdict(trace_dir, pipeline::VerdictOf(*report, "decode"));
  if (const std::string w = pipeline::ViewerSizeWarning(*report); !w.empty())
    std::fprintf(stderr, "%s\n", w.c_str());
  // The file is written, but its numbers cannot all be true: say so in the
  // exit status too (docs/errors.md).
  const uint64_t impossible = report->implausible.count();
  if (impossible != 0) {
    std::fprintf(stderr,
                 "ptsnap: error: decoding %s: %llu impossible result(s) (listed above): the "
                 "timeline was written but is not to be trusted\n",
                 trace_dir.c_str(), static_cast<unsigned long long>(impossible));
  }
  // Bytes lost or undecodable: the file holds the rest, and the exit code
  // says the trace was not all decoded (docs/errors.md, "decode").
  const std::string damaged = pipeline::DamageError(trace_dir, *report);
  if (!damaged.empty()) {
    std::fflush(report_to);
    std::fprintf(stderr, "ptsnap: error: %s into %s\n", damaged.c_str(), report->output.c_str());
  }
  if (view.open) {
    std::fflush(report_to);
    const int served = ServeFile(report->output, view.port, 1, report_to);
    return damaged.empty() && impossible == 0 ? served : kExitFailure;
  }
  return damaged.empty() && impossible == 0 ? kExitOk : kExitFailure;
}

void AddDebugDirFlag(CLI::App* cmd, std::vector<std::string>* dirs) {
  cmd->add_option("--debug-dir", *dirs,
                  "A folder of separate debug files, searched before /usr/lib/debug for the "
                  "symbols of stripped binaries: DIR/.build-id/xx/yyyy.debug (by build-id) or "
                  "DIR/NAME (by .gnu_debuglink), e.g. an unpacked -dbgsym package's "
                  "usr/lib/debug; repeatable");
}

void AddViewFlags(CLI::App* cmd, ViewFlags* view) {
  AddDebugDirFlag(cmd, &view->debug_dirs);
  cmd->add_option("--max-depth", view->max_depth,
                  "Thin the timeline: leave out frames more than N deep (1 = the lowest frame "
                  "whose start was seen); the summary counts what was left out")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->add_option("--min-duration", view->min_duration,
                  "Thin the timeline: leave out calls shorter than this (e.g. 1us, 0.5ms), and "
                  "so everything under them; the summary counts what was left out");
  cmd->add_flag("--no-inline", view->no_inline,
                "No frames for inlined calls (by default, where the binary has DWARF, code the "
                "compiler inlined shows as a frame named \"NAME (inlined)\" in its caller)");
  cmd->add_flag("--split-snapshots", view->split_snapshots,
                "One file per snapshot, each decoded on its own: -o trace.fxt.gz writes "
                "trace.snap1.fxt.gz, trace.snap2.fxt.gz, ... (\".snapN\" before the format "
                "suffix; N is the snapshot's seq, as `ptsnap info` lists them)");
  AddJobsFlag(cmd, &view->jobs);
}

void AddDecoderFlag(CLI::App* cmd, std::string* decoder) {
  cmd->add_option("--decoder", *decoder,
                  "PT decoder: ours (ptsnap's own, several times faster) or libipt (the "
                  "reference); both give the same timeline")
      ->check(CLI::IsMember({"ours", "libipt"}))
      ->capture_default_str();
}

void AddJobsFlag(CLI::App* cmd, unsigned* jobs) {
  cmd->add_option("-j,--jobs", *jobs,
                  "Threads for decoding, 0 = one per core. From 2 on, one more thread runs beside "
                  "the call stacks: the gzip compression of a .gz file, the writer of a .json "
                  "file, else PT decoding; from 3 on, a .gz file is compressed in blocks on N-1 "
                  "threads (as pigz), else more adds nothing yet. The output is the same whatever "
                  "N (from 3 on, a .gz file's compressed bytes differ, not what they inflate to)")
      ->check(CLI::Range(0u, 1024u))
      ->capture_default_str();
}

decode::PtDecoder::Engine DecoderEngine(const std::string& decoder) {
  return decoder == "libipt" ? decode::PtDecoder::Engine::kLibipt
                             : decode::PtDecoder::Engine::kOurs;
}

void AddDecodeCommand(CLI::App& app, CommandFn* selected) {
  struct Args {
    std::string dir, output, format;
    uint32_t snapshot = 0;
    ViewFlags view;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "Decode a trace directory into a timeline of every call (Perfetto FXT by default)");
  cmd->add_option("TRACE_DIR", args->dir, "The trace directory written by run/attach")->required();
  cmd->add_option("-o,--output", args->output,
                  "Output file; the suffix picks the format: .fxt, .json, .events (+ .gz). "
                  "Default: NAME.fxt.gz for a trace directory NAME.ptsnap (as run -o NAME.fxt.gz "
                  "names it), else trace.fxt.gz; in the current directory");
  cmd->add_option("--format", args->format, "Output format, overriding the suffix")
      ->check(CLI::IsMember(output::OutputFormatNames()));
  cmd->add_option("--snapshot", args->snapshot,
                  "Decode only snapshot N (its seq; `ptsnap info TRACE_DIR` lists them). "
                  "Works while the recording is still going on")
      ->check(CLI::PositiveNumber);
  AddDecoderFlag(cmd, &args->view.decoder);
  AddViewFlags(cmd, &args->view);
  cmd->add_flag("--open", args->view.open,
                "After decoding, serve the file on 127.0.0.1 for ui.perfetto.dev and print the "
                "link that opens it (as `ptsnap serve`)");
  cmd->add_option("--port", args->view.port,
                  "Port for --open (ui.perfetto.dev fetches from 9001 only)")
      ->capture_default_str();
  cmd->footer(
      "A file over 100 MB (before compression) gets a warning, as soon as it passes 100 MB "
      "while it is written and again after the summary: ui.perfetto.dev loads such traces "
      "slowly or not at all. --min-duration, --max-depth and --split-snapshots make files "
      "smaller.");
  cmd->callback([args, selected] {
    *selected = [args] {
      const std::filesystem::path out = args->output.empty() ? DefaultDecodeOutput(args->dir)
                                                             : std::filesystem::path(args->output);
      return DecodeAndReport(args->dir, out, args->format, args->snapshot, stdout, args->view);
    };
  });
}

}  // namespace ptsnap::cli
