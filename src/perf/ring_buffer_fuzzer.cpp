// Fuzzes the data-ring reader and record accounting on arbitrary ring
// contents and head/tail positions (kernel bytes are not trusted).
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "perf/ring_buffer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16) return 0;
  uint64_t head, tail;
  std::memcpy(&head, data, 8);
  std::memcpy(&tail, data + 8, 8);
  data += 16;
  size -= 16;
  size_t ring_size = 64;
  while (ring_size < size && ring_size < (1u << 16)) ring_size <<= 1;
  std::vector<std::byte> ring(ring_size);
  std::memcpy(ring.data(), data, std::min(size, ring_size));
  perf_event_mmap_page header{};
  // Keep head - tail within a plausible window, as the kernel does.
  header.data_tail = tail;
  header.data_head = tail + (head % (ring_size + 1));
  ptsnap::perf::DataRingReader reader(&header, ring);
  ptsnap::perf::RingStats stats;
  (void)reader.Drain(
      [&](std::span<const std::byte> rec) { ptsnap::perf::AccountRecord(rec, stats); });
  header.aux_head = head;
  ptsnap::perf::AuxSnapshotReader snap(&header, ring);
  (void)snap.Copy();
  header.aux_tail = tail;
  header.aux_head = tail + (head % (2 * ring_size));
  ptsnap::perf::AuxFullReader full(&header, ring);
  (void)full.Drain([](std::span<const std::byte>) {});
  return 0;
}
