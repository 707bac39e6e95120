// Fuzzes libelf on arbitrary bytes through ptsnap's ELF readers: function
// tables, the build-id note walk and MiniDebugInfo (xz, then ELF).
#include <cstddef>
#include <cstdint>
#include <span>

#include "elf/elf_file.h"
#include "elf/symbol_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span(data, size));
  auto image = ptsnap::elf::ParseFunctions(bytes);
  if (image) (void)ptsnap::elf::FindFunction(*image, "main");
  (void)ptsnap::elf::ReadBuildId(bytes);
  // MiniDebugInfo: xz, then libelf on what it holds.
  (void)ptsnap::elf::ParseMiniDebugInfo(bytes);
  return 0;
}
