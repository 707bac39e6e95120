// A strict in-tree FXT reader: used by tests to round-trip FxtWriter and
// by `tools/` to inspect files. It follows the same rules as Perfetto's
// importer (style-and-formats.md B.2) and rejects what Perfetto would
// misread: a missing magic record, records past the end, string or thread
// refs to empty slots, thread records without the "process" koid argument.
// Never crashes on arbitrary bytes (fuzzed in fxt_reader_fuzzer).
//
// ParseFxt holds the whole trace; ReadFxtFile streams a file (plain or
// gzip) record by record to a callback, holding only the string and thread
// tables (`ptsnap report FILE.fxt`: report/trace_file.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::output {

struct FxtArg {
  int type = 0;  // FXT argument type (6 string, 7 pointer, 8 koid, ...)
  uint64_t value = 0;
  std::string str;
};

struct FxtEvent {
  int type = 0;                 // 0 instant, 2 begin, 3 end, 4 complete, ...
  uint64_t ts = 0, end_ts = 0;  // end_ts for complete events
  uint64_t pid = 0, tid = 0;
  std::string category, name;
  std::map<std::string, FxtArg> args;
};

struct FxtTrace {
  uint64_t ticks_per_second = 0;
  std::string provider;
  std::map<uint64_t, std::string> processes;  // koid -> name
  struct ThreadName {
    uint64_t pid = 0;
    std::string name;
  };
  std::map<uint64_t, ThreadName> threads;  // tid koid -> owner and name
  std::vector<FxtEvent> events;
  uint64_t string_records = 0;
  uint16_t max_string_index = 0;
};

Result<FxtTrace> ParseFxt(std::string_view bytes);

// Streams: `on_event` gets each event record in file order (the trace's
// `events` stays empty; its other fields fill as records come). Errors name
// the record's byte offset in the (uncompressed) stream: "FXT record at
// offset N: record runs past the end" for a truncated file.
Result<void> StreamFxt(std::string_view bytes, FxtTrace* trace,
                       const std::function<void(FxtEvent&&)>& on_event);
// The same over a file, gunzipped as it is read when it is gzip (zlib's
// gzread reads plain files as they are). Memory: one record and the tables.
Result<void> ReadFxtFile(const std::filesystem::path& path, FxtTrace* trace,
                         const std::function<void(FxtEvent&&)>& on_event);
// Reads a file, gunzipping it when it is gzip (magic 1f 8b).
Result<std::string> ReadMaybeGzip(const std::filesystem::path& path);

}  // namespace ptsnap::output
