// Fuzzes libelf on arbitrary bytes through ptsnap's ELF readers: function
// tables and the build-id note walk.
#include <cstddef>
#include <cstdint>
#include <span>

#include "elf/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span(data, size));
  auto image = ptsnap::elf::ParseFunctions(bytes);
  if (image) (void)ptsnap::elf::FindFunction(*image, "main");
  (void)ptsnap::elf::ReadBuildId(bytes);
  return 0;
}
