// Placeholder until the decoder lands; replaced by the decode work.
#include <cstdio>

#include "cli/command.h"

namespace ptsnap::cli {

int DecodeAndReport(const std::filesystem::path& trace_dir, const std::filesystem::path&,
                    const std::string&) {
  std::fprintf(
      stderr,
      "ptsnap: error: decoding is not available in this build; the raw trace is kept in %s\n",
      trace_dir.c_str());
  return kExitFailure;
}

}  // namespace ptsnap::cli
