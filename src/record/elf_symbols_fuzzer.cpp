// Fuzzes the trigger resolver's parsers: ELF symbol tables (libelf on
// arbitrary bytes) and the /proc/PID/maps scan for the PIE load base.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "record/elf_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span(data, size));
  auto image = ptsnap::elf::ParseFunctions(bytes);
  if (image) {
    for (const auto& fn : image->functions) {
      (void)ptsnap::record::RuntimeAddress(*image, fn, 0x555555554000);
    }
    (void)ptsnap::elf::FindFunction(*image, "main");
  }
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ptsnap::record::LowestMappingStart(text, "/usr/bin/prog");
  return 0;
}
