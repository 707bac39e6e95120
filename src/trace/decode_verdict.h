// What the last whole decode of a trace directory found, kept beside the
// recording in `decoded.json` so `ptsnap info` can say it without decoding
// again (docs/decoding.md, "Impossible results"). Written by `decode`,
// `report`, `replay` and `run`/`attach` after they decode a whole recording (not one
// snapshot); a directory that cannot be written to simply has none.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "ptsnap/result.h"

namespace ptsnap::trace {

inline constexpr const char* kDecodeVerdictFile = "decoded.json";

struct DecodeVerdict {
  std::string by;                // "decode" (`decode`, `run`, `attach`), "report" or "replay"
  std::string ptsnap_version;    // of the ptsnap that decoded
  uint64_t decoded_unix_ns = 0;  // when
  std::string output;            // the file written; "" for `report`
  uint64_t slices = 0;
  uint64_t damaged_bytes = 0;    // PT bytes lost or undecodable
  uint64_t impossible = 0;       // impossible results (output/plausibility.h)
  std::string first_impossible;  // the first of them, in words; "" when none
  bool operator==(const DecodeVerdict&) const = default;
};

// Pure: the file's text and back. Unknown keys are ignored (a newer ptsnap
// may add some); a known key of the wrong type is an error.
std::string SerializeDecodeVerdict(const DecodeVerdict& v);
Result<DecodeVerdict> ParseDecodeVerdict(std::string_view json);

// `dir`/decoded.json, replaced atomically.
Result<void> WriteDecodeVerdict(const std::filesystem::path& dir, const DecodeVerdict& v);
// nullopt when the directory has none (never decoded whole, or not writable
// when it was); an error when it has one that does not parse.
Result<std::optional<DecodeVerdict>> ReadDecodeVerdict(const std::filesystem::path& dir);

}  // namespace ptsnap::trace
