// libFuzzer: the ELF64 core header parser and FindLoadCovering.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "sys/kcore.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto need = ptsnap::sys::KcoreHeaderSize(bytes);
  auto h = ptsnap::sys::ParseKcoreHeader(bytes);
  if (h && (!need || *need > size)) std::abort();
  if (!h) return 0;
  for (const auto& l : h->loads) {
    if (l.filesz == 0) continue;
    const auto* hit = ptsnap::sys::FindLoadCovering(*h, l.vaddr, 1);
    if (hit == nullptr) std::abort();
    (void)ptsnap::sys::FindLoadCovering(*h, l.vaddr + l.filesz - 1, 2);
  }
  return 0;
}
