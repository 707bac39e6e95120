#include "cli/read_trace.h"

#include <cstdio>
#include <filesystem>

#include "base/string_util.h"
#include "cli/command.h"
#include "pipeline/pipeline.h"
#include "report/trace_file.h"
#include "trace/decode_verdict.h"

namespace ptsnap::cli {

namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr, "ptsnap: error: %s\n", message.c_str());
  return kExitUsage;
}

}  // namespace

std::optional<int> ReadTrace(const TraceInput& a, const std::string& path, model::SliceSink* sink,
                             std::string* damaged, std::optional<output::Implausible>* implausible,
                             const char* by) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    // A decoded file: the slices as written, nothing to decode.
    if (!a.dir_only.empty())
      return Usage(base::Join(a.dir_only, ", ") + " needs the trace directory: " + path +
                   " is a decoded file (its slices are read as they were written)");
    auto kind = report::SniffTraceFile(path);
    if (!kind) {
      std::fprintf(stderr, "ptsnap: error: %s\n", kind.error().ToString().c_str());
      return kExitFailure;
    }
    if (*kind == report::TraceFileKind::kOther)
      return Usage(path +
                   " is neither a trace directory nor a decoded file (FXT: .fxt, .fxt.gz; Chrome "
                   "JSON: .json, .json.gz)");
    auto read = *kind == report::TraceFileKind::kFxt ? report::ReadFxtSlices(path, sink)
                                                     : report::ReadJsonSlices(path, sink);
    if (!read) {
      std::fprintf(stderr, "ptsnap: error: reading %s\n", read.error().ToString().c_str());
      return kExitFailure;
    }
  } else {
    pipeline::DecodeOptions d;
    d.sink = sink;
    d.snapshot = a.snapshot;
    d.decoder = DecoderEngine(a.decoder);
    d.inline_frames = !a.no_inline;
    d.debug_dirs.assign(a.debug_dirs.begin(), a.debug_dirs.end());
    d.jobs = a.jobs;
    auto decoded = pipeline::DecodeTraceDir(path, d);
    if (!decoded) {
      std::fprintf(stderr, "ptsnap: error: decoding %s: %s\n", path.c_str(),
                   decoded.error().ToString().c_str());
      return decoded.error().kind() == ErrorKind::kUsage ? kExitUsage : kExitFailure;
    }
    *implausible = decoded->implausible;
    // For `info` (as `decode` writes it; not where the user may not write).
    if (a.snapshot == 0) (void)trace::WriteDecodeVerdict(path, pipeline::VerdictOf(*decoded, by));
    if (!decoded->damage.empty())
      *damaged = pipeline::FormatDamage(*decoded) +
                 "ptsnap: error: " + pipeline::DamageError(path, *decoded) +
                 (std::string(by) == "report"
                      ? "; the report counts what was decoded (calls cut by the damage are marked "
                        "cut: docs/report.md)\n"
                      : "; the listing shows what was decoded\n");
  }
  return std::nullopt;
}

int PrintDamage(const std::string& damaged) {
  if (damaged.empty()) return kExitOk;
  std::fflush(stdout);
  std::fputs(("Damaged PT:\n" + damaged).c_str(), stderr);
  return kExitFailure;
}

}  // namespace ptsnap::cli
