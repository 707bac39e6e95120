#include "record/aux_stream.h"

#include <algorithm>
#include <cerrno>

namespace ptsnap::record {

namespace {

// A full disk refused `chunk` whole (AppendWhole takes a cut-short write
// back): appends what still fits, a page at a time. PT needs no record
// boundary; the decoder ends the stream at its last whole packet. Returns
// the bytes appended.
uint64_t AppendWhatFits(trace::TraceWriter& writer, uint32_t id, std::span<const std::byte> chunk) {
  constexpr size_t kPiece = 4096;
  uint64_t written = 0;
  while (written < chunk.size()) {
    const auto piece = chunk.subspan(written, std::min<size_t>(kPiece, chunk.size() - written));
    if (!writer.AppendStream(id, piece)) break;
    written += piece.size();
  }
  return written;
}

}  // namespace

Result<uint64_t> AuxStreamer::Drain(trace::TraceWriter& writer) {
  Result<void> status = Ok();
  uint64_t written = 0;  // of the `n` drained, on disk
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
    status = writer.AppendStream(*id_, chunk);
    if (status) {
      written += chunk.size();
    } else if (status.error().errnum() == ENOSPC) {
      written += AppendWhatFits(writer, *id_, chunk);
    }
  });
  // aux_tail has moved on either way: bytes that could not be written are
  // gone from the ring, so they count as lost.
  if (!status) {
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

void AuxStreamer::UpdateManifest(trace::TraceWriter& writer) const {
  if (!id_) return;
  if (trace::Stream* s = writer.FindStream(*id_)) {
    s->lost_bytes = lost_bytes();
    s->truncated = truncated_;
  }
}

}  // namespace ptsnap::record
