// Fuzzes ParseLdList (linked_libraries.h), the reader of `ld.so --list`'s
// output, and the lib_trigger argument's parser: neither crashes; every
// path the first returns is absolute and has no newline; an argument the
// second accepts formats back to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "emulate/plugin_protocol.h"
#include "record/linked_libraries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const std::string& p : ptsnap::record::ParseLdList(text))
    if (p.empty() || p[0] != '/' || p.find('\n') != std::string::npos) __builtin_trap();
  if (auto f = ptsnap::emulate::ParseFileOffsetArg(text)) {
    auto again = ptsnap::emulate::ParseFileOffsetArg(ptsnap::emulate::FormatFileOffsetArg(*f));
    if (!again || !(*again == *f)) __builtin_trap();
  }
  return 0;
}
