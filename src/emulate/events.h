// The driver's reading of the plugin's event log (events.<pid>, messages
// defined in plugin_protocol.h): ParseEvents turns them into the perf records
// the kernel would have written (trace::Record, sample_id on the virtual
// perf clock) plus stream and snapshot descriptions. Pure; fuzzed
// (events_fuzzer.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emulate/plugin_protocol.h"
#include "ptsnap/result.h"
#include "trace/perf_record.h"

namespace ptsnap::emulate {

// PERF_SAMPLE_IDENTIFIER value the emulated source writes in every trailer.
inline constexpr uint64_t kEmulatedEventId = 1;

struct PluginEvents {
  std::vector<trace::Record> records;
  std::vector<StreamMessage> streams;
  std::vector<SnapshotMessage> snapshots;
  std::vector<SlowCallMessage> slow_calls;
  std::vector<std::string> notes;
  bool done = false;  // the plugin's atexit ran
};

// The perf record a sideband message (mmap2, comm, fork, exit, itrace)
// stands for; nullopt for the others.
std::optional<trace::Record> SidebandRecord(const PluginMessage& message);

// Appends the events of `text` (one process's log) to `out`. A malformed
// line is an error naming its number; a torn last line (no newline) is
// ignored.
Result<void> ParseEvents(std::string_view text, PluginEvents* out);

}  // namespace ptsnap::emulate
