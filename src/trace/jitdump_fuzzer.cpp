// Fuzzes ParseJitdump (perf's jitdump format, jitdump.h): every input
// parses or fails cleanly, and what it returns stays inside the input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "trace/jitdump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = ptsnap::trace::ParseJitdump(text);
  if (!j) return 0;
  auto inside = [&](std::string_view v) {
    return v.empty() || (v.data() >= text.data() && v.data() + v.size() <= text.data() + size);
  };
  for (const auto& l : j->loads)
    if (!inside(l.code)) __builtin_trap();
  for (const auto& u : j->unwinding)
    if (!inside(u.data) || u.data.size() != u.unwinding_size) __builtin_trap();
  return 0;
}
