// Fuzzes the /proc/modules parser (the exporter runs it on a trace's kcore
// copy, the kcore copy on /proc/modules before and after): it must never
// crash, and every module it returns has a name, a size and an address.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sys/kallsyms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& m : ptsnap::sys::ParseModules(text)) {
    if (m.name.empty() || m.size == 0 || m.addr == 0) __builtin_trap();
  }
  return 0;
}
