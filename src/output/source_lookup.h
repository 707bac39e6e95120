// How the output writers ask for a function's source file and line: a
// callback given a slice's symbol space (Slice::space, or its pid when 0)
// and function entry address (Slice::address),
// answered lazily and cached by the Symbolizer (decode/source_lines.h).
#pragma once

#include <cstdint>
#include <functional>

#include "decode/source_lines.h"

namespace ptsnap::output {

// Returns nullptr when unknown; the location must outlive the writer.
using SourceLookup = std::function<const decode::SourceLocation*(int32_t space, uint64_t address)>;

}  // namespace ptsnap::output
