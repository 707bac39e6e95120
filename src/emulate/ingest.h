// PluginIngest: moves what the emulator's plugin leaves in its work
// directory (events.<pid> logs, pt-*.pt files; plugin_protocol.h) into the
// trace directory while the program runs, so a snapshot is in the trace
// directory, listed in its manifest, as soon as the plugin has taken it: an
// agent's Snapshot() returns its real number, and a ptsnap killed later
// leaves every snapshot taken so far decodable.
//
// The plugin writes a snapshot's stream files and their `stream` lines
// before the `snapshot` line (write(2) per line, O_APPEND), so a snapshot
// line read means its streams are complete. Logs are read up to their last
// newline; a torn line is read again at the next Poll. Snapshot numbers are
// the plugin's per process; the trace's are global, in the order the
// snapshots are read. A stream the plugin wrote as what the thread's ring
// gained since its previous snapshot (StreamMessage::follows) is listed as
// following that snapshot's stream (trace::Stream::follows).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "emulate/plugin_protocol.h"
#include "ptsnap/result.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::emulate {

class PluginIngest {
 public:
  // What one stream added to the trace: the integration tests and the
  // emulator benchmark compare `insns`/`hash` with a decode.
  struct StreamStat {
    uint32_t id = 0;
    int32_t tid = 0;
    uint64_t insns = 0, hash = 0;
  };

  PluginIngest(std::filesystem::path work, trace::TraceWriter& writer)
      : work_(std::move(work)), writer_(writer) {}

  // The detail of the next snapshot the driver asked for (reason "signal"),
  // in the order asked: the plugin only knows it was asked.
  void Asked(std::string detail) { asked_.push_back(std::move(detail)); }

  // Reads what the logs gained: records go to the sideband, and each
  // snapshot whose line arrived gets its streams added and is listed in the
  // manifest. Returns the snapshots added, in order.
  Result<std::vector<trace::Snapshot>> Poll();

  // After the program exited: a last Poll, the full-execution streams' final
  // sizes and statistics (the last description of a file wins), and any
  // stream whose snapshot line never came (listed under snapshot 0).
  // Returns the snapshots the last Poll added.
  //
  // A full-execution stream is described when its thread starts: it is
  // moved into the trace directory and listed at once (the plugin goes on
  // writing it through its open fd), and Poll raises its listed size about
  // once a second, after syncing it. A ptsnap killed meanwhile (or a full
  // disk) leaves it listed up to the last raise, as a hardware full
  // recording's streams are.
  Result<std::vector<trace::Snapshot>> Finish();

  [[nodiscard]] bool saw_logs() const { return !logs_.empty(); }
  // Every process's plugin reached its atexit.
  [[nodiscard]] bool done() const;
  // The processes whose plugin did not (their pids, from the logs' names).
  [[nodiscard]] std::vector<std::string> Unfinished() const;
  [[nodiscard]] const std::vector<trace::Record>& records() const { return records_; }
  [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }
  [[nodiscard]] const std::vector<StreamStat>& stream_stats() const { return stats_; }

 private:
  struct Log {
    uint64_t offset = 0;  // bytes consumed (up to a newline)
    bool done = false;
    // Streams read for a plugin snapshot number whose line has not come yet.
    std::map<uint32_t, std::vector<StreamMessage>> pending;
    std::vector<StreamMessage> full;  // seq 0: full-execution streams
    // The slow call of a plugin snapshot number whose line has not come yet.
    std::map<uint32_t, SlowCallMessage> slow;
    // Each thread's last snapshot stream: the plugin's snapshot number and
    // the stream's id, which a stream that continues it follows.
    std::map<int32_t, std::pair<uint32_t, uint32_t>> last;
  };
  Result<void> ReadLog(const std::filesystem::path& path, Log& log,
                       std::vector<trace::Snapshot>& added);
  // Adds a snapshot stream (`seq`: the trace's snapshot number) of `log`.
  Result<void> AddStream(const StreamMessage& s, uint32_t seq, Log& log);

  std::filesystem::path work_;
  trace::TraceWriter& writer_;
  std::map<std::string, Log> logs_;  // by file name
  std::vector<trace::Record> records_;
  std::vector<std::string> notes_;
  std::vector<std::string> asked_;
  size_t asked_used_ = 0;
  uint32_t next_seq_ = 1;
  std::vector<StreamStat> stats_;
  // Full-execution streams moved into the trace: file name -> stream id.
  std::map<std::string, uint32_t> full_ids_;
  int64_t sizes_listed_ns_ = 0;  // CLOCK_MONOTONIC of the last size raise
  // The full streams' sizes, taken before the logs are read (Poll): every
  // byte of them was written after the messages (mmaps) that the code it
  // traces needs, so once those are read, listing these sizes never claims
  // PT the sideband cannot map yet. Sizes taken after reading the logs
  // could: a ptsnap killed then left decode errors for unmapped code.
  [[nodiscard]] std::map<uint32_t, uint64_t> FullSizesNow();
  // Syncs each stream and lists its size from `sizes` where it grew.
  Result<void> ListFullSizes(const std::map<uint32_t, uint64_t>& sizes);
};

}  // namespace ptsnap::emulate
