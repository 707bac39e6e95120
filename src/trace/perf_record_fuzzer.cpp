// Fuzzes the perf record parser on arbitrary bytes, and checks that whatever
// parses re-serialises to bytes that parse back to the same record.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "trace/perf_record.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::trace;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);

  auto stream = ParseRecords(bytes);
  RecordScan scan = ScanRecords(bytes);
  Check(stream.has_value() == !scan.corrupt_offset.has_value());
  if (stream) Check(stream->records == scan.stream.records);

  size_t off = 0;
  while (off < bytes.size()) {
    auto parsed = ParseRecord(bytes.subspan(off));
    if (!parsed) break;
    const Record& r1 = parsed->record;
    (void)DescribeRecord(r1);
    std::string s1 = SerializeRecord(r1);
    Check(s1.size() % 8 == 0 && s1.size() <= 0xffff);
    auto again = ParseRecord(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(s1.data()), s1.size()));
    Check(again.has_value());
    Check(again->size == s1.size());
    // Serialising normalises padding; a second round changes nothing.
    Check(SerializeRecord(again->record) == s1);
    // Records in kernel form (8-byte aligned) survive the round trip intact.
    if (parsed->size % 8 == 0) Check(again->record == r1);
    off += parsed->size;
  }
  return 0;
}
