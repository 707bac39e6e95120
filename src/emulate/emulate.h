// The emulated PT source: runs the command under qemu-user with ptsnap's TCG
// plugin, which encodes a genuine Intel PT stream, and writes a trace
// directory (docs/trace-format.md) the decoder cannot tell from hardware's.
#pragma once

#include <filesystem>

#include "ptsnap/result.h"
#include "record/options.h"

namespace ptsnap::emulate {

// Records `opts.command` into `trace_dir`. Returns the program's exit status
// (as a shell would report it) once the trace directory is complete.
// Errors: qemu-x86_64 or the plugin missing, unsupported QEMU, kernel scope
// requested (refused), the command not found, the trace directory unwritable.
Result<int> RecordEmulated(const record::RecordOptions& opts,
                           const std::filesystem::path& trace_dir);

}  // namespace ptsnap::emulate
