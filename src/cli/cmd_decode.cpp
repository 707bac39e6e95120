// `ptsnap decode TRACE_DIR [-o FILE] [--format fxt|json|events] [--snapshot N]
// [--max-depth N] [--min-duration D] [--no-inline] [-j N] [--open [--port P]]` and DecodeAndReport,
// which `run`/`attach` call after recording.
#include <unistd.h>

#include <cstdio>

#include "base/log.h"
#include "base/string_util.h"
#include "cli/command.h"
#include "output/output_file.h"
#include "pipeline/pipeline.h"

namespace ptsnap::cli {

namespace {

void PrintProgress(uint64_t done, uint64_t total) {
  if (total == 0) return;
  std::fprintf(stderr, "\rdecoding: %3d%% (%.1f of %.1f MB of PT)",
               static_cast<int>(done * 100 / total), static_cast<double>(done) / 1e6,
               static_cast<double>(total) / 1e6);
  std::fflush(stderr);
}

}  // namespace

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
  options.jobs = view.jobs;
  options.output = output.empty() ? std::filesystem::path("trace.fxt.gz") : output;
  options.format = format;
  if (!format.empty() && format != "fxt" && format != "json" && format != "events") {
    std::fprintf(stderr, "ptsnap: error: unknown output format '%s' (use fxt, json or events)\n",
                 format.c_str());
    return kExitUsage;
  }
  if (format.empty() && output::FormatFromPath(options.output).empty()) {
    std::fprintf(stderr,
                 "ptsnap: error: cannot tell the output format from '%s': name it .fxt, .json or "
                 ".events (optionally .gz), or pass --format\n",
                 options.output.c_str());
    return kExitUsage;
  }
  if (view.open && (format.empty() ? output::FormatFromPath(options.output) : format) == "events") {
    std::fprintf(stderr,
                 "ptsnap: error: --open serves a timeline to ui.perfetto.dev, and .events text is "
                 "not one: write .fxt, .fxt.gz or .json\n");
    return kExitUsage;
  }
  // Progress only where someone watches: a terminal, or -v.
  bool progress = ::isatty(STDERR_FILENO) != 0 || base::Verbosity() > 0;
  if (progress) options.progress = PrintProgress;
  auto report = pipeline::DecodeTraceDir(trace_dir, options);
  if (progress) std::fputs("\r\033[K", stderr);
  if (!report) {
    std::fprintf(stderr, "ptsnap: error: decoding %s: %s\n", trace_dir.c_str(),
                 report.error().ToString().c_str());
    return kExitFailure;
  }
  std::fputs(pipeline::FormatReport(*report).c_str(), report_to);
  if (const std::string w = pipeline::ViewerSizeWarning(*report); !w.empty())
    std::fprintf(stderr, "%s\n", w.c_str());
  if (view.open) {
    std::fflush(report_to);
    return ServeFile(report->output, view.port, 1, report_to);
  }
  return kExitOk;
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
                  "Threads for decoding, 0 = one per core. From 2 on, PT decoding and the output "
                  "file's writer (and its compression) each run on a thread of their own beside "
                  "the call stacks; more than 2 adds nothing yet. The output is the same whatever "
                  "N")
      ->check(CLI::Range(0u, 1024u))
      ->capture_default_str();
}

decode::PtDecoder::Engine DecoderEngine(const std::string& decoder) {
  return decoder == "libipt" ? decode::PtDecoder::Engine::kLibipt
                             : decode::PtDecoder::Engine::kOurs;
}

void AddDecodeCommand(CLI::App& app, CommandFn* selected) {
  struct Args {
    std::string dir, output = "trace.fxt.gz", format;
    uint32_t snapshot = 0;
    ViewFlags view;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "Decode a trace directory into a timeline of every call (Perfetto FXT by default)");
  cmd->add_option("TRACE_DIR", args->dir, "The trace directory written by run/attach")->required();
  cmd->add_option("-o,--output", args->output,
                  "Output file; the suffix picks the format: .fxt, .json, .events (+ .gz)")
      ->capture_default_str();
  cmd->add_option("--format", args->format, "Output format, overriding the suffix")
      ->check(CLI::IsMember({"fxt", "json", "events"}));
  cmd->add_option("--snapshot", args->snapshot,
                  "Decode only snapshot N (its seq; `ptsnap info TRACE_DIR` lists them). "
                  "Works while the recording is still going on")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-depth", args->view.max_depth,
                  "Thin the timeline: leave out frames more than N deep (1 = the lowest frame "
                  "whose start was seen); the summary counts what was left out")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->add_option("--min-duration", args->view.min_duration,
                  "Thin the timeline: leave out calls shorter than this (e.g. 1us, 0.5ms), and "
                  "so everything under them; the summary counts what was left out");
  AddDecoderFlag(cmd, &args->view.decoder);
  AddJobsFlag(cmd, &args->view.jobs);
  cmd->add_flag("--no-inline", args->view.no_inline,
                "No frames for inlined calls (by default, where the binary has DWARF, code the "
                "compiler inlined shows as a frame named \"NAME (inlined)\" in its caller)");
  cmd->add_flag("--open", args->view.open,
                "After decoding, serve the file on 127.0.0.1 for ui.perfetto.dev and print the "
                "link that opens it (as `ptsnap serve`)");
  cmd->add_option("--port", args->view.port,
                  "Port for --open (ui.perfetto.dev fetches from 9001 only)")
      ->capture_default_str();
  cmd->footer(
      "A file over 100 MB (before compression) gets a warning: ui.perfetto.dev loads such "
      "traces slowly or not at all. --min-duration and --max-depth make it smaller.");
  cmd->callback([args, selected] {
    *selected = [args] {
      return DecodeAndReport(args->dir, args->output, args->format, args->snapshot, stdout,
                             args->view);
    };
  });
}

}  // namespace ptsnap::cli
