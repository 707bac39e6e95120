// Fuzzes the ELF program-header reader: never crashes on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "emulate/elf_segments.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto img = ptsnap::emulate::ParseElfSegments(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (img) (void)ptsnap::emulate::LowestExecVaddr(*img);
  return 0;
}
