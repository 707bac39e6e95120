// Fuzzes the perf.data reader on arbitrary bytes: it must return an error or
// a file whose records and features all lie inside the input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "export/perf_data.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::exporter;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  // The samples-stream splitter the sampled export uses: the first 8 bytes
  // pick the sample_type, the rest is the stream.
  if (size >= 8) {
    uint64_t sample_type = 0;
    __builtin_memcpy(&sample_type, data, 8);
    std::string_view stream(reinterpret_cast<const char*>(data) + 8, size - 8);
    if (auto split = SplitSampleStream(stream, sample_type)) {
      uint64_t in_records = 0;
      for (const SampleRef& s : split->samples) {
        Check(s.bytes.data() >= stream.data() &&
              s.bytes.data() + s.bytes.size() <= stream.data() + stream.size());
        Check(WithSampleId(s.bytes, sample_type, 1).size() == s.bytes.size());
        in_records += s.bytes.size();
      }
      Check(in_records + split->torn_bytes <= stream.size());
    }
  }
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
