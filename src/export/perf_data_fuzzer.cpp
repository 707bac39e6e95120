// Fuzzes the perf.data reader on arbitrary bytes: it must return an error or
// a file whose records and features all lie inside the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "export/perf_data.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::exporter;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto pd = ParsePerfData(bytes);
  if (!pd) return 0;
  uint64_t total = 0;
  for (const DataRecord& r : pd->records) {
    Check(r.bytes.size() >= 8);
    Check(r.file_offset >= pd->data_offset);
    total += r.bytes.size() + r.payload.size();
  }
  Check(total == pd->data_size);
  for (const auto& [bit, body] : pd->features) {
    Check(bit >= 0 && bit < 256 && body.size() <= size);
    if (bit == kFeatAuxtrace) (void)ParseAuxtraceIndex(body);
  }
  return 0;
}
