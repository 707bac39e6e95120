// AuxStreamer: full-execution mode's path from one AUX area to one stream of
// the trace directory. Every drain appends what the kernel wrote since the
// last one to pt/<id>.pt (TraceWriter::AppendStream), so ptsnap's memory
// stays flat however long the recording runs, and a crash keeps everything
// drained so far. It also keeps the stream's loss figures in the manifest:
//   - truncated: AUX records with PERF_AUX_FLAG_TRUNCATED (the buffer was
//     full; the kernel stopped PT until ptsnap drained and re-enabled it:
//     a gap of unknown size in the trace);
//   - lost_bytes: bytes known to be missing: an AUX record whose aux_offset
//     lies beyond the previous record's end (the kernel skipped them), or
//     more than one buffer pending at a drain (AuxFullReader overrun).
//
// It never touches a file descriptor: the header and AUX span may be a real
// mapping or heap memory (tests). Not thread-safe.
#pragma once

#include <linux/perf_event.h>
#include <utility>

#include <cstdint>
#include <optional>
#include <span>

#include "perf/ring_buffer.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {

class AuxStreamer {
 public:
  // `info` names the stream (pid/tid or cpu); its id, file and size are
  // assigned when the first bytes arrive (a thread that never ran leaves no
  // empty stream). `header` and `aux` must outlive the streamer.
  AuxStreamer(perf_event_mmap_page* header, std::span<const std::byte> aux, trace::Stream info)
      : reader_(header, aux), info_(std::move(info)) {}

  // Moves the pending AUX bytes into the stream and advances aux_tail.
  // Returns the number of bytes moved. Errors are the writer's (disk full).
  Result<uint64_t> Drain(trace::TraceWriter& writer);

  // Accounts one PERF_RECORD_AUX of this AUX area (from the data ring of the
  // same event).
  void NoteAux(const trace::Aux& aux, trace::TraceWriter& writer);

  [[nodiscard]] uint64_t bytes() const { return bytes_; }
  [[nodiscard]] uint64_t lost_bytes() const { return skipped_ + reader_.overrun_bytes(); }
  [[nodiscard]] uint32_t truncated() const { return truncated_; }
  // The stream's id once it exists.
  [[nodiscard]] std::optional<uint32_t> stream_id() const { return id_; }

 private:
  void UpdateManifest(trace::TraceWriter& writer) const;
  // The stream's size in the writer: what reached the file.
  uint64_t bytes_on_disk(trace::TraceWriter& writer) const;

  perf::AuxFullReader reader_;
  trace::Stream info_;
  std::optional<uint32_t> id_;
  uint64_t bytes_ = 0;
  uint64_t next_offset_ = 0;  // where the next AUX record should start
  uint64_t skipped_ = 0;
  uint32_t truncated_ = 0;
};

}  // namespace ptsnap::record
