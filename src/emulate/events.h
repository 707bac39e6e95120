// The plugin's event log (events.<pid> in its output directory): one line per
// event, space-separated decimal fields, a path or name last.
//   mmap2 TIME PID TID ADDR LEN PGOFF MAJ MIN INO PROT FLAGS PATH
//   comm TIME PID TID EXEC NAME
//   fork|exit TIME PID PPID TID PTID
//   itrace TIME PID TID
//   stream SEQ PID TID WRAPPED INSNS HASH FILE    (SEQ 0: full-execution stream)
//   snapshot SEQ TIME TID REASON [DETAIL]
//   note TEXT
//   done TIME
// ParseEvents turns them into the perf records the kernel would have written
// (trace::Record, sample_id on the virtual perf clock) plus stream and
// snapshot descriptions. Pure; fuzzed (events_fuzzer.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"
#include "trace/perf_record.h"

namespace ptsnap::emulate {

// PERF_SAMPLE_IDENTIFIER value the emulated source writes in every trailer.
inline constexpr uint64_t kEmulatedEventId = 1;

struct PluginStream {
  uint32_t seq = 0;
  int32_t pid = 0, tid = 0;
  bool wrapped = false;
  uint64_t insns = 0, hash = 0;  // what the plugin retired (and hashed) in this stream
  std::string file;
};

struct PluginSnapshot {
  uint32_t seq = 0;
  uint64_t time = 0;
  uint32_t tid = 0;
  std::string reason, detail;
};

struct PluginEvents {
  std::vector<trace::Record> records;
  std::vector<PluginStream> streams;
  std::vector<PluginSnapshot> snapshots;
  std::vector<std::string> notes;
  bool done = false;  // the plugin's atexit ran
};

// Appends the events of `text` (one process's log) to `out`. A malformed
// line is an error naming its number; a torn last line (no newline) is
// ignored.
Result<void> ParseEvents(std::string_view text, PluginEvents* out);

}  // namespace ptsnap::emulate
