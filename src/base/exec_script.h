// A script's `#!` line, read as the kernel reads it: execve runs the
// interpreter it names. The emulator follows scripts by it
// (emulate/exec_follow.h) and the recorder looks a script's trigger up in
// its interpreter (record/elf_symbols.h). Pure; fuzzed in exec_fuzzer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ptsnap::base {

// A `#!` line as binfmt_script parses it (Linux 5.1+), from the first
// kExecHeadBytes bytes of a file: the interpreter runs to the first space,
// tab or NUL; the rest of the line, spaces and tabs trimmed at both ends,
// is one argument (which may hold spaces). Nullopt when `head` does not
// start with "#!", names no interpreter, or is cut inside the interpreter's
// name (no newline and no later space in the buffer): the kernel's ENOEXEC.
inline constexpr size_t kExecHeadBytes = 256;  // BINPRM_BUF_SIZE
struct ScriptInterpreter {
  std::string path;
  std::optional<std::string> arg;
  bool operator==(const ScriptInterpreter&) const = default;
};
[[nodiscard]] std::optional<ScriptInterpreter> ParseScriptInterpreter(std::string_view head);

}  // namespace ptsnap::base
