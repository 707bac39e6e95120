// libFuzzer target: the FXT reader over arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "output/fxt_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = ptsnap::output::ParseFxt(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)r;
  return 0;
}
