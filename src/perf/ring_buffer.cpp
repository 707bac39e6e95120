#include "perf/ring_buffer.h"

#include <atomic>
#include <cstring>
#include <string>

namespace ptsnap::perf {
namespace {

// The user page's fields are __u64 (unsigned long long).
uint64_t LoadAcquire(__u64& v) { return std::atomic_ref<__u64>(v).load(std::memory_order_acquire); }
void StoreRelease(__u64& v, uint64_t x) {
  std::atomic_ref<__u64>(v).store(x, std::memory_order_release);
}

// Copies `n` bytes starting at ring offset `pos` (any value; taken modulo the
// ring size) into `out`, wrapping at the end.
void CopyFromRing(std::span<const std::byte> ring, uint64_t pos, size_t n, std::byte* out) {
  const size_t size = ring.size();
  const size_t start = static_cast<size_t>(pos & (size - 1));
  const size_t first = std::min(n, size - start);
  std::memcpy(out, ring.data() + start, first);
  if (first < n) std::memcpy(out + first, ring.data(), n - first);
}

}  // namespace

uint64_t DataRingReader::Pending() const {
  uint64_t head = LoadAcquire(header_->data_head);
  return head - header_->data_tail;
}

Result<size_t> DataRingReader::Drain(const RecordFn& fn) {
  // Kernel side (ring_buffer.c): write data, smp_wmb, store data_head.
  // We pair that with an acquire load of data_head, read, then a release
  // store of data_tail (the smp_mb before the tail update).
  const uint64_t head = LoadAcquire(header_->data_head);
  uint64_t tail = header_->data_tail;
  const size_t size = data_.size();
  size_t count = 0;
  while (tail < head) {
    perf_event_header hdr;
    if (head - tail < sizeof(hdr)) break;  // should not happen: records are 8-aligned
    CopyFromRing(data_, tail, sizeof(hdr), reinterpret_cast<std::byte*>(&hdr));
    if (hdr.size < sizeof(hdr) || hdr.size > size || hdr.size > head - tail) {
      StoreRelease(header_->data_tail, head);
      return Error("corrupt record in the perf data ring at offset " + std::to_string(tail) +
                   " (type " + std::to_string(hdr.type) + ", size " + std::to_string(hdr.size) +
                   "); the rest of the ring was dropped");
    }
    const size_t start = static_cast<size_t>(tail & (size - 1));
    if (start + hdr.size <= size) {
      fn(std::span<const std::byte>(data_.data() + start, hdr.size));
    } else {
      scratch_.resize(hdr.size);
      CopyFromRing(data_, tail, hdr.size, scratch_.data());
      fn(std::span<const std::byte>(scratch_.data(), hdr.size));
    }
    tail += hdr.size;
    ++count;
  }
  StoreRelease(header_->data_tail, tail);
  return count;
}

bool AccountRecord(std::span<const std::byte> record, RingStats& stats) {
  perf_event_header hdr;
  if (record.size() < sizeof(hdr)) return false;
  std::memcpy(&hdr, record.data(), sizeof(hdr));
  const std::byte* body = record.data() + sizeof(hdr);
  const size_t body_size = record.size() - sizeof(hdr);
  if (hdr.type == PERF_RECORD_AUX && body_size >= 24) {
    uint64_t flags;
    std::memcpy(&flags, body + 16, sizeof(flags));
    ++stats.aux_records;
    if (flags & PERF_AUX_FLAG_PARTIAL) ++stats.aux_partial;
    if (flags & PERF_AUX_FLAG_TRUNCATED) {
      ++stats.aux_truncated;
      return true;
    }
  } else if (hdr.type == PERF_RECORD_LOST && body_size >= 16) {
    uint64_t lost;
    std::memcpy(&lost, body + 8, sizeof(lost));
    stats.lost_records += lost;
    ++stats.lost_events;
  }
  return false;
}

AuxSnapshot AuxSnapshotReader::Copy() {
  AuxSnapshot snap;
  const size_t size = aux_.size();
  if (size == 0) return snap;
  const size_t head = static_cast<size_t>(LoadAcquire(header_->aux_head) & (size - 1));
  if (!wrapped_) {
    // intel_pt_first_wrap: any non-zero qword in the last 512 qwords.
    const size_t check = std::min<size_t>(size, 4096);
    const std::byte* p = aux_.data() + size - check;
    for (size_t i = 0; i + 8 <= check; i += 8) {
      uint64_t q;
      std::memcpy(&q, p + i, sizeof(q));
      if (q != 0) {
        wrapped_ = true;
        break;
      }
    }
  }
  snap.wrapped = wrapped_;
  if (wrapped_) {
    snap.bytes.resize(size);
    CopyFromRing(aux_, head, size, snap.bytes.data());
  } else {
    snap.bytes.assign(aux_.begin(), aux_.begin() + static_cast<std::ptrdiff_t>(head));
  }
  return snap;
}

uint64_t AuxFullReader::Drain(const std::function<void(std::span<const std::byte>)>& fn) {
  const uint64_t head = LoadAcquire(header_->aux_head);
  const uint64_t tail = header_->aux_tail;
  const size_t size = aux_.size();
  if (head <= tail || size == 0) return 0;
  // The kernel never writes past aux_tail + aux_size, so at most one lap.
  const uint64_t n = std::min<uint64_t>(head - tail, size);
  overrun_ += head - tail - n;
  const uint64_t from = head - n;
  const size_t start = static_cast<size_t>(from & (size - 1));
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size - start));
  fn(aux_.subspan(start, first));
  if (first < n) fn(aux_.subspan(0, static_cast<size_t>(n - first)));
  StoreRelease(header_->aux_tail, head);
  return n;
}

}  // namespace ptsnap::perf
