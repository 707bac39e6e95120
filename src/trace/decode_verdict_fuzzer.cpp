// Fuzzes ParseDecodeVerdict: a verdict that parses must serialise and parse
// back to the same value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trace/decode_verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto v = ptsnap::trace::ParseDecodeVerdict(in);
  if (!v) return 0;
  auto again = ptsnap::trace::ParseDecodeVerdict(ptsnap::trace::SerializeDecodeVerdict(*v));
  if (!again || !(*again == *v)) __builtin_trap();
  return 0;
}
