// Fuzzes the .eh_frame reader: never crashes, and every range it returns
// is non-empty and sorted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "elf/eh_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto fdes = ptsnap::elf::ParseEhFrame(std::as_bytes(std::span(data, size)), 0x401000);
  for (size_t i = 0; i < fdes.size(); ++i) {
    if (fdes[i].end <= fdes[i].start) std::abort();
    if (i > 0 && fdes[i].start < fdes[i - 1].start) std::abort();
  }
  return 0;
}
