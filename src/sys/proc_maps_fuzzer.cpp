// libFuzzer: ParseProcMaps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sys/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto maps = ptsnap::sys::ParseProcMaps(text);
  if (!maps) return 0;
  for (const auto& m : *maps) {
    if (m.end < m.start) std::abort();
  }
  return 0;
}
