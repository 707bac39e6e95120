#include "record/aux_stream.h"

#include <algorithm>

namespace ptsnap::record {

Result<uint64_t> AuxStreamer::Drain(trace::TraceWriter& writer) {
  Result<void> status = Ok();
  const uint64_t n = reader_.Drain([&](std::span<const std::byte> chunk) {
    if (!status) return;
    if (!id_) {
      auto id = writer.BeginStream(info_);
      if (!id) {
        status = std::move(id).error();
        return;
      }
      id_ = *id;
    }
    // PT needs no record boundary (the decoder ends the stream at its last
    // whole packet): a full disk keeps what fits, a page at a time.
    status = writer.AppendStreamKeepingWhatFits(
        *id_, chunk, [](auto rest) { return std::min<size_t>(4096, rest.size()); });
  });
  // aux_tail has moved on either way: bytes that could not be written are
  // gone from the ring, so they count as lost.
  if (!status) {
    // bytes_ is what this stream held before the drain.
    const uint64_t written = bytes_on_disk(writer) - bytes_;
    bytes_ += written;
    skipped_ += n - written;
    UpdateManifest(writer);
    return std::move(status).error().AddContext("writing a full-execution PT stream");
  }
  bytes_ += n;
  UpdateManifest(writer);
  return n;
}

void AuxStreamer::NoteAux(const trace::Aux& aux, trace::TraceWriter& writer) {
  // Full mode: aux_offset is the monotonic AUX position before this chunk
  // and aux_size the bytes written (ring_buffer.c perf_aux_output_end).
  if (aux.aux_offset > next_offset_) skipped_ += aux.aux_offset - next_offset_;
  next_offset_ = std::max(next_offset_, aux.aux_offset + aux.aux_size);
  if ((aux.flags & PERF_AUX_FLAG_TRUNCATED) != 0) ++truncated_;
  UpdateManifest(writer);
}

uint64_t AuxStreamer::bytes_on_disk(trace::TraceWriter& writer) const {
  const trace::Stream* s = id_ ? writer.FindStream(*id_) : nullptr;
  return s != nullptr ? s->size : 0;
}

void AuxStreamer::UpdateManifest(trace::TraceWriter& writer) const {
  if (!id_) return;
  if (trace::Stream* s = writer.FindStream(*id_)) {
    s->lost_bytes = lost_bytes();
    s->truncated = truncated_;
  }
}

}  // namespace ptsnap::record
