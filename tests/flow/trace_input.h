// Test and benchmark support for the flow decoder: a recorded trace
// directory's streams, each with the code image of its process (as
// src/decode maps it at the end of the recording) and libipt's
// configuration from the manifest (decode/libipt.h MakePtConfig).
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "flow/libipt_oracle.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"

namespace ptsnap::flow::testing {

struct TraceStream {
  int32_t pid = 0;
  std::string bytes;                // ends in a NUL byte past size (std::string)
  std::unique_ptr<CodeImage> code;  // the process's executable file mappings
  struct pt_config config;          // begin/end over `bytes`
};

struct TraceInput {
  trace::Manifest manifest;
  std::vector<TraceStream> streams;
};

// Reads `dir` (a ptsnap trace directory). Errors: unreadable trace.
Result<TraceInput> LoadTrace(const std::filesystem::path& dir);

}  // namespace ptsnap::flow::testing
