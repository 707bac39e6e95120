// Readers for the two rings of a perf event mapping (uapi perf_event.h):
// the data ring (sideband records) and the AUX area (raw Intel PT bytes).
//
// The readers never touch a file descriptor. They work on a header struct
// (`perf_event_mmap_page`, the first page of the mapping) plus a byte span,
// so tests drive them with heap memory and the recorder with the real
// mapping. Memory ordering follows tools/include/linux/ring_buffer.h:
// acquire-load of data_head/aux_head, release-store of data_tail/aux_tail
// (std::atomic_ref), which is what the kernel's smp_rmb/smp_mb contract asks.
//
// None of these types is thread-safe; one reader per ring.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::perf {

// Called once per complete record, header included. The span is valid only
// during the call (it may point into the ring or into a scratch buffer).
using RecordFn = std::function<void(std::span<const std::byte> record)>;

// Reads perf records from a data ring mapped PROT_READ|PROT_WRITE.
class DataRingReader {
 public:
  // `data` is the data area (size a power of two); `header` its user page.
  // Both must outlive the reader.
  DataRingReader(perf_event_mmap_page* header, std::span<std::byte> data)
      : header_(header), data_(data) {}

  // Hands every record between data_tail and data_head to `fn`, then
  // publishes the new data_tail so the kernel may reuse the space. Records
  // straddling the end of the ring are copied into a contiguous scratch
  // buffer first. Returns the number of records read. A header whose size is
  // smaller than a header or larger than the ring is corrupt: the tail is set
  // to head (the rest is dropped) and an error is returned.
  Result<size_t> Drain(const RecordFn& fn);

  // Bytes waiting to be read.
  [[nodiscard]] uint64_t Pending() const;

 private:
  perf_event_mmap_page* header_;
  std::span<std::byte> data_;
  std::vector<std::byte> scratch_;
};

// Facts about the records seen in the data ring that the recorder must act
// on: PERF_RECORD_AUX with TRUNCATED (full mode: the kernel disabled the PT
// event; re-enable it) and PERF_RECORD_LOST (sideband dropped).
struct RingStats {
  uint64_t aux_records = 0;
  uint64_t aux_truncated = 0;  // AUX records with PERF_AUX_FLAG_TRUNCATED
  uint64_t aux_partial = 0;    // ... with PERF_AUX_FLAG_PARTIAL
  uint64_t lost_records = 0;   // sum of PERF_RECORD_LOST.lost
  uint64_t lost_events = 0;    // number of PERF_RECORD_LOST records
};
// Updates `stats` from one record (any type; malformed ones are ignored).
// Returns true when the record is an AUX record with TRUNCATED set.
bool AccountRecord(std::span<const std::byte> record, RingStats& stats);

// Snapshot (overwrite) mode: the AUX area is mapped PROT_READ and the
// hardware keeps overwriting it; aux_head is an *offset* in [0, aux_size)
// published when the event is stopped (pt-kernel-interface.md 3.1).
struct AuxSnapshot {
  std::vector<std::byte> bytes;  // oldest first
  bool wrapped = false;          // the start is torn: decoders sync at the first PSB
};

class AuxSnapshotReader {
 public:
  // `aux` is the AUX area (size a power of two, at least one page).
  AuxSnapshotReader(perf_event_mmap_page* header, std::span<const std::byte> aux)
      : header_(header), aux_(aux) {}

  // Copies the buffer oldest-first. Call with the event disabled
  // (PERF_EVENT_IOC_DISABLE), so aux_head is current and the hardware is
  // stopped. Wrap detection follows perf's intel_pt_first_wrap: the pages
  // start zeroed, so any non-zero u64 in the last 4 KiB means the hardware
  // reached the end at least once. It is sticky across snapshots.
  // Wrapped: [head, end) + [0, head); otherwise [0, head).
  AuxSnapshot Copy();

  [[nodiscard]] bool wrapped() const { return wrapped_; }

 private:
  perf_event_mmap_page* header_;
  std::span<const std::byte> aux_;
  bool wrapped_ = false;
};

// Full-execution mode: the AUX area is mapped PROT_READ|PROT_WRITE, aux_head
// grows monotonically and the kernel never overwrites bytes before aux_tail.
class AuxFullReader {
 public:
  AuxFullReader(perf_event_mmap_page* header, std::span<const std::byte> aux)
      : header_(header), aux_(aux) {}

  // Hands the bytes between aux_tail and aux_head to `fn` (one or two chunks
  // when they straddle the end), then release-stores aux_tail = aux_head.
  // Returns the number of bytes handed over. When more than one buffer's
  // worth is pending (the kernel overwrote unread data, which it should not
  // do in this mode), only the newest aux_size bytes exist: the rest is
  // counted in overrun_bytes().
  uint64_t Drain(const std::function<void(std::span<const std::byte>)>& fn);

  [[nodiscard]] uint64_t overrun_bytes() const { return overrun_; }

 private:
  perf_event_mmap_page* header_;
  std::span<const std::byte> aux_;
  uint64_t overrun_ = 0;
};

}  // namespace ptsnap::perf
