// libFuzzer: ParseCpuList.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sys/cpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cpus = ptsnap::sys::ParseCpuList(text);
  if (cpus && cpus->empty()) std::abort();
  return 0;
}
