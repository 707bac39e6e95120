// How subcommands plug into main: each cmd_*.cpp defines one Add*Command that
// registers a CLI11 subcommand and, when it is chosen, stores the function to
// run in `*selected`. main() parses, then runs it; its return is the exit code.
#pragma once

#include <functional>

// CLI11 costs about 8 s of compile time in every file that includes it;
// the files that add options include <CLI/CLI.hpp> themselves.
namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own name
class App;
}  // namespace CLI

namespace ptsnap::cli {

using CommandFn = std::function<int()>;

// `ptsnap probe` (cmd_probe.cpp).
void AddProbeCommand(CLI::App& app, CommandFn* selected);
void AddInfoCommand(CLI::App& app, CommandFn* selected);
// `ptsnap export` (cmd_export.cpp).
void AddExportCommand(CLI::App& app, CommandFn* selected);
// `ptsnap report` (cmd_report.cpp).
void AddReportCommand(CLI::App& app, CommandFn* selected);
// `ptsnap replay` (cmd_replay.cpp).
void AddReplayCommand(CLI::App& app, CommandFn* selected);

// Exit codes shared by all commands (documented in docs/errors.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;        // the operation failed; message says why
inline constexpr int kExitUsage = 2;          // bad command line
inline constexpr int kExitProbeNoPt = 3;      // `probe`: ran fine, Intel PT unavailable here
inline constexpr int kExitInterrupted = 130;  // Ctrl-C

}  // namespace ptsnap::cli

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "decode/pt_decoder.h"

namespace ptsnap::cli {

// `ptsnap decode`'s flags for the viewer (docs/decoding.md, "Sized for the
// viewer").
struct ViewFlags {
  size_t max_depth = 0;          // --max-depth: 0, no limit
  std::string min_duration;      // --min-duration: "" none, else a duration ("1us")
  bool open = false;             // --open: serve the file to ui.perfetto.dev afterwards
  uint16_t port = 9001;          // --port, for --open
  std::string decoder = "ours";  // --decoder: ours or libipt
  bool no_inline = false;        // --no-inline: no frames for inlined calls
  bool split_snapshots = false;  // --split-snapshots: one file per snapshot (SplitSnapshotPath)
  unsigned jobs = 0;             // -j: decoding threads; 0 (the default), one per core
  std::vector<std::string> debug_dirs;  // --debug-dir: separate debug files' folders
};
// --debug-dir DIR (repeatable; decode, run, attach, report). Defined in cmd_decode.cpp.
void AddDebugDirFlag(CLI::App* cmd, std::vector<std::string>* dirs);

// Adds --max-depth, --min-duration, --no-inline and --split-snapshots (decode,
// run, attach). Defined in cmd_decode.cpp.
void AddViewFlags(CLI::App* cmd, ViewFlags* view);
// --split-snapshots' file for snapshot `seq`: ".snapSEQ" before the format
// suffix (trace.fxt.gz -> trace.snap2.fxt.gz, out.json -> out.snap2.json;
// with no known suffix, at the end).
std::filesystem::path SplitSnapshotPath(const std::filesystem::path& output, uint32_t seq);

// --decoder ours|libipt (decode, run, attach, report): which PT decoder
// (docs/decoding.md, "Decoders"). Defined in cmd_decode.cpp.
void AddDecoderFlag(CLI::App* cmd, std::string* decoder);
// -j,--jobs N (decode, run, attach, report): threads for decoding
// (docs/decoding.md, "Parallel decode"); 0, one per core: the default of
// decode, run and attach (report's is 1).
// Defined in cmd_decode.cpp.
void AddJobsFlag(CLI::App* cmd, unsigned* jobs);
// The pipeline's engine for a --decoder value AddDecoderFlag accepted.
decode::PtDecoder::Engine DecoderEngine(const std::string& decoder);

// Decodes a trace directory into `output` (format from --format, else from
// the suffix: .fxt, .json, .events, each optionally .gz) and prints the
// terminal summary. Shared by `ptsnap decode` and by `run`/`attach` after
// recording. `snapshot` != 0: only that snapshot. The summary goes to
// `report_to` (run/attach: stderr, so the traced program's stdout stays its
// own). `view` thins the timeline and can serve it (ViewFlags). An FXT or
// JSON file past what the viewer loads comfortably gets a one-line warning
// on stderr. Defined in cmd_decode.cpp. Returns an exit code.
// `decode`'s default output for TRACE_DIR: NAME.fxt.gz for NAME.ptsnap (the
// name `run -o NAME.fxt.gz` gives its directory), else trace.fxt.gz.
std::filesystem::path DefaultDecodeOutput(const std::filesystem::path& trace_dir);

int DecodeAndReport(const std::filesystem::path& trace_dir, const std::filesystem::path& output,
                    const std::string& format, uint32_t snapshot = 0, std::FILE* report_to = stdout,
                    const ViewFlags& view = {});

// `ptsnap serve FILE [--port N] [--count N]` (cmd_serve.cpp); ServeFile
// serves one file to ui.perfetto.dev, printing the link to `out` (also
// `decode --open`). Returns an exit code.
void AddServeCommand(CLI::App& app, CommandFn* selected);
int ServeFile(const std::filesystem::path& file, uint16_t port, size_t count, std::FILE* out);

// Registers `ptsnap decode TRACE_DIR [-o FILE] [--format fxt|json|events] [--snapshot N]`.
void AddDecodeCommand(CLI::App& app, CommandFn* selected);

}  // namespace ptsnap::cli
