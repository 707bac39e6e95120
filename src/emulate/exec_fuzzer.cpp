// Fuzzes the two parsers of exec_follow.h: a file's first bytes read as a
// `#!` line (ParseScriptInterpreter: any file the guest execs), and the
// hand-over file across a followed exec (ParseExecCarry). Neither crashes
// on arbitrary bytes; an interpreter it finds has no space, tab or NUL in
// it (it may be empty: for "#! \0" the kernel opens "", which fails); a
// hand-over it accepts formats back to text that parses to the same value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "emulate/exec_follow.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto script =
      ptsnap::emulate::ParseScriptInterpreter(text.substr(0, ptsnap::emulate::kExecHeadBytes));
  if (script && script->path.find_first_of(std::string(" \t\0", 3)) != std::string::npos)
    __builtin_trap();
  auto carry = ptsnap::emulate::ParseExecCarry(text);
  if (carry) {
    auto again = ptsnap::emulate::ParseExecCarry(ptsnap::emulate::FormatExecCarry(*carry));
    if (!again || !(*again == *carry)) __builtin_trap();
  }
  return 0;
}
