// The report's stacks as a pprof profile (github.com/google/pprof,
// proto/profile.proto): what `ptsnap report TRACE -o FILE.pprof` writes for
// `pprof`, `go tool pprof`, speedscope and Perfetto's pprof importer.
//
// The message is written by hand with a small protobuf wire encoder
// (varints and length-delimited fields, proto3 packed repeated scalars)
// instead of protoc-generated code: the profile has six message types and
// a few dozen fields, and a protobuf library plus protoc at build time
// would be the heaviest dependency of the whole tree for them.
//
// Layout: sample_type [("calls", "count"), ("wall", "nanoseconds")],
// default_sample_type "wall"; one Function and one Location (id = the
// function's id, no mapping, no address: frames are aggregated by name,
// as in the folded output) per distinct name; one Sample per distinct
// stack, location_id leaf first, values {calls ending on that stack, self
// time in ns}. string_table[0] is "". Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::report {

struct StackSample {
  std::vector<std::string> frames;  // outermost first
  uint64_t calls = 0;               // frames that ended with exactly this stack
  uint64_t self_ns = 0;             // their self time
};

// The serialized (uncompressed) Profile message. `duration_ns` goes to
// Profile.duration_nanos (0: left out). Samples with neither calls nor
// time, and empty stacks, are skipped.
std::string EncodePprof(const std::vector<StackSample>& stacks, uint64_t duration_ns);

// Whether a report output name asks for pprof: .pprof, .pprof.gz, .pb.gz
// (gzip-compressed, the pprof convention) or .pb (uncompressed).
bool IsPprofPath(std::string_view path);
// Whether a pprof output named `path` is written uncompressed (.pb); the
// others are one gzip member (RFC 1952), as profile.proto asks of files on
// disk (output::OutputFile with gzip on).
bool IsUncompressedPprofPath(std::string_view path);

}  // namespace ptsnap::report
