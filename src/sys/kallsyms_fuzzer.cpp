// libFuzzer: ParseKallsyms.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sys/kallsyms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto k = ptsnap::sys::ParseKallsyms(text);
  if (k.symbols.size() != k.symbol_count) std::abort();
  if (k.masked && k.symbol_count == 0) std::abort();
  return 0;
}
