// libFuzzer: the /proc/self/status and /proc/self/limits parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sys/privileges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ptsnap::sys::ParseCapEff(text);
  (void)ptsnap::sys::ParseEffectiveUid(text);
  (void)ptsnap::sys::ParseMemlockLimit(text);
  return 0;
}
