// Fuzzes ParseManifest on arbitrary text; a manifest that parses must
// serialise and parse back to the same value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trace/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::trace;
  auto m = ParseManifest(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!m) return 0;
  auto again = ParseManifest(SerializeManifest(*m));
  if (!again || !(*again == *m)) __builtin_trap();
  return 0;
}
