// Reading TRACE for `report` and `replay`: a trace directory, decoded once
// streaming (pipeline::DecodeTraceDir), or a file decode wrote, read back
// as its slices (report/trace_file.h). Both end in the sink's Finish.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/slice.h"
#include "output/plausibility.h"

namespace ptsnap::cli {

// The flags that say how a trace directory is decoded.
struct TraceInput {
  std::string decoder = "ours";
  unsigned jobs = 0;  // -j: one thread per core, as decode
  uint32_t snapshot = 0;
  bool no_inline = false;
  std::vector<std::string> debug_dirs;  // --debug-dir
  // Options that need the trace directory, as given (for the error on a file).
  std::vector<std::string> dir_only;
};

// Reads TRACE `path` into `sink`. On failure prints the error and returns
// the exit code (kExitUsage: a file with directory-only options, or neither
// a directory nor a decoded file). A damaged directory is read on: its
// stretches lost and error line are left in *damaged for after the output.
// `implausible` gets the decode's check (a directory only); `by` names the
// command in the directory's decode verdict (trace/decode_verdict.h).
std::optional<int> ReadTrace(const TraceInput& in, const std::string& path, model::SliceSink* sink,
                             std::string* damaged, std::optional<output::Implausible>* implausible,
                             const char* by);

// After the output: the stretches a damaged directory lost (ReadTrace's
// *damaged) on stderr, stdout flushed first. kExitFailure when there were
// any, else kExitOk.
int PrintDamage(const std::string& damaged);

}  // namespace ptsnap::cli
