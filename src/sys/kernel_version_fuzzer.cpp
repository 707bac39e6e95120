// libFuzzer: ParseKernelRelease.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sys/kernel_version.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = ptsnap::sys::ParseKernelRelease(text);
  if (v && (v->major < 0 || v->minor < 0 || v->patch < 0)) std::abort();
  if (v) (void)v->AtLeast(5, 5);
  return 0;
}
