// SampleRing: a sampled recording's snapshot buffer for one thread or CPU.
// The kernel's data ring cannot overwrite like PT's AUX area (the sideband
// shares it and must not be lost), so ptsnap drains every sample and keeps
// the most recent ones here: at most `capacity` bytes of whole
// PERF_RECORD_SAMPLE records, the oldest dropped first. A snapshot copies
// the ring without clearing it, as a PT snapshot copies its AUX area, so
// consecutive snapshots may overlap.
//
// Pure: no file descriptors, no kernel memory. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace ptsnap::record {

class SampleRing {
 public:
  // `capacity` bytes of records (the snapshot size); at least 1. Memory is
  // taken as records arrive (allocated() <= max(2 x bytes held, 64 KiB)
  // until the ring is full), not up front.
  explicit SampleRing(size_t capacity);

  // Appends one whole record (header included). Older records are dropped
  // until it fits; a record larger than the whole ring is dropped itself.
  // Either way wrapped() becomes true.
  void Push(std::span<const std::byte> record);

  // The records held, oldest first, back to back.
  [[nodiscard]] std::vector<std::byte> Copy() const;

  [[nodiscard]] size_t bytes() const { return used_; }
  [[nodiscard]] size_t records() const { return sizes_.size(); }
  [[nodiscard]] size_t capacity() const { return capacity_; }
  // Bytes of memory the ring holds now: capacity() once it has filled.
  [[nodiscard]] size_t allocated() const { return buf_.size(); }
  // Samples were dropped since the ring was made (sticky, like a PT
  // snapshot's wrap): the oldest sample held is not the first one taken.
  [[nodiscard]] bool wrapped() const { return dropped_ > 0; }
  [[nodiscard]] uint64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::vector<std::byte> buf_;  // circular once capacity_ long; records may straddle the end
  std::deque<size_t> sizes_;    // sizes of the records held, oldest first
  size_t start_ = 0;            // offset of the oldest record
  size_t used_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace ptsnap::record
