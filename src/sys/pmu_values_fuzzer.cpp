// libFuzzer: the caps/* and tsc_art_ratio parsers, and the integer sysctls.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sys/pmu.h"
#include "sys/privileges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ptsnap::sys::ParseCapValue(text);
  (void)ptsnap::sys::ParseTscArtRatio(text);
  (void)ptsnap::sys::ParseSysctlInt(text);
  (void)ptsnap::sys::ParseLockdown(text);
  return 0;
}
