// Fuzzes ParseJitCode (the emulator's captured JIT code, jit_code.h): every
// input parses or fails cleanly, and what parses formats back to the same
// records.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trace/jit_code.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Half the inputs get a valid header, so records are reached.
  std::string text(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1) != 0) text = ptsnap::trace::JitCodeHeader() + text.substr(1);
  auto f = ptsnap::trace::ParseJitCode(text);
  if (!f) return 0;
  std::string again = ptsnap::trace::JitCodeHeader();
  for (const auto& l : f->loads) again += ptsnap::trace::FormatJitCodeRecord(l);
  auto g = ptsnap::trace::ParseJitCode(again);
  if (!g || g->loads.size() != f->loads.size() || g->torn_tail) __builtin_trap();
  for (size_t i = 0; i < f->loads.size(); ++i) {
    const auto &a = f->loads[i], &b = g->loads[i];
    if (a.time != b.time || a.addr != b.addr || a.tid != b.tid || a.flags != b.flags ||
        a.code != b.code)
      __builtin_trap();
  }
  return 0;
}
