// `ptsnap report FILE`: a decoded trace file as the slice stream the model
// wrote it from (docs/report.md, "Reports from a decoded file"), so that
// ReportSink gives the numbers it gives on the trace directory.
//
// FXT (.fxt, .fxt.gz) streams: memory grows with the open frames of each
// thread and the distinct names, never with the number of slices. Duration
// ends carry no name: each thread keeps a stack of its open begins. An end
// with no open begin is an inferred frame's (its start was not seen): since
// this version the writer names it and gives its begin time
// (output/fxt_writer.h); files of older versions read it as
// "[inferred frame]" from the thread's first time in the segment.
//
// Chrome JSON (.json, .json.gz) is read once, but not in bounded memory: its
// "X" events come as frames end, callees before callers, so the callers of a
// frame (its stack, its depth) are only known once the thread's outermost
// frame ends. Each thread's frames are kept (about 32 bytes each, names
// interned) and put back in begin/end order at the end of the file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "model/slice.h"
#include "ptsnap/result.h"

namespace ptsnap::report {

enum class TraceFileKind { kFxt, kJson, kOther };

// Looks at the file's first bytes (gunzipped when gzip). Errors: the file
// cannot be opened or read.
Result<TraceFileKind> SniffTraceFile(const std::filesystem::path& path);

// Streams the FXT file's slices into `sink` (OnSlice), then calls its
// Finish: the names the slices point to live until then, as a decode's do. Zero-length complete
// events without args are markers (kInstant); the "Snapshot triggers" track is left out, as the
// pipeline leaves it out of the report. Errors: unreadable or corrupt file, naming it and the byte
// offset of the bad record in the uncompressed stream.
Result<void> ReadFxtSlices(const std::filesystem::path& path, model::SliceSink* sink);
// The same over bytes in memory (uncompressed): the fuzz target's entry.
Result<void> ReadFxtSlicesFromBytes(std::string_view bytes, model::SliceSink* sink);

// Reads a Chrome JSON trace (an object with "traceEvents", or an array of
// events; gunzipped when gzip) into `sink`, then calls its Finish, as
// ReadFxtSlices does. Per thread, its "X" events (and "B"/"E" pairs) are
// frames, sorted by begin, the longer first, that must nest; an "X" event
// with args.inferred_start_time is a frame whose start was not seen (no
// begin), and named "[unknown]" the model's span from the segment's start
// (a kComplete slice). "i"/"I" events are markers; other phases and the
// "Snapshot triggers" track are left out. Times are microseconds, read from
// the number's text to the exact ns JsonWriter writes (digits below 1 ns are
// rounded). Errors name the file and the byte offset (in the uncompressed
// stream) of the bad event or character: JSON syntax (a truncated file), a
// JSON that is not a Chrome trace, frames that overlap without nesting.
Result<void> ReadJsonSlices(const std::filesystem::path& path, model::SliceSink* sink);
// The same over bytes in memory (uncompressed): the fuzz target's entry.
Result<void> ReadJsonSlicesFromBytes(std::string_view bytes, model::SliceSink* sink);

}  // namespace ptsnap::report
