// Fuzzes the ELF program-header reader: never crashes on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "elf/segments.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto layout =
      ptsnap::elf::ParseLoadLayout(std::string_view(reinterpret_cast<const char*>(data), size));
  if (layout) {
    (void)ptsnap::elf::LowestExecVaddr(layout->segments);
    (void)ptsnap::elf::OffsetToVaddr(layout->segments, 0x1000);
  }
  return 0;
}
