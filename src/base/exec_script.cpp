#include "base/exec_script.h"

namespace ptsnap::base {

namespace {

bool SpaceTab(char c) { return c == ' ' || c == '\t'; }

// The C string at `at` in `buf` (up to its first NUL).
std::string CString(const std::string& buf, size_t at) {
  const size_t nul = buf.find('\0', at);
  return buf.substr(at, nul == std::string::npos ? std::string::npos : nul - at);
}

}  // namespace

// fs/binfmt_script.c (load_script), index for pointer: the buffer is
// BINPRM_BUF_SIZE bytes, zero-filled past the file's end; buf_end is its
// last byte, and every range below includes its last element.
std::optional<ScriptInterpreter> ParseScriptInterpreter(std::string_view head) {
  std::string buf(head.substr(0, kExecHeadBytes));
  buf.resize(kExecHeadBytes, '\0');
  if (buf[0] != '#' || buf[1] != '!') return std::nullopt;
  constexpr size_t kNpos = std::string::npos;
  const size_t buf_end = kExecHeadBytes - 1;
  auto next_non_spacetab = [&](size_t first, size_t last) {
    for (; first <= last; ++first)
      if (!SpaceTab(buf[first])) return first;
    return kNpos;
  };
  auto next_terminator = [&](size_t first, size_t last) {
    for (; first <= last; ++first)
      if (SpaceTab(buf[first]) || buf[first] == '\0') return first;
    return kNpos;
  };
  size_t i_end = buf.find('\n');
  if (i_end == kNpos) {
    const size_t name = next_non_spacetab(2, buf_end);
    if (name == kNpos) return std::nullopt;  // only spaces and tabs
    // No later space, tab or NUL: the interpreter's name may be cut.
    if (next_terminator(name, buf_end) == kNpos) return std::nullopt;
    i_end = buf_end;
  }
  while (SpaceTab(buf[i_end - 1])) --i_end;
  const size_t i_name = next_non_spacetab(2, i_end);
  if (i_name == kNpos || i_name == i_end) return std::nullopt;  // no name
  const size_t i_sep = next_terminator(i_name, i_end);
  size_t i_arg = kNpos;
  if (i_sep != kNpos && buf[i_sep] != '\0') i_arg = next_non_spacetab(i_sep, i_end);
  buf[i_end] = '\0';
  if (i_sep != kNpos) buf[i_sep] = '\0';
  ScriptInterpreter out;
  out.path = CString(buf, i_name);
  if (i_arg != kNpos) out.arg = CString(buf, i_arg);
  return out;
}

}  // namespace ptsnap::base
