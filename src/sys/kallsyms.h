// /proc/kallsyms: "ffffffff81000000 T _stext" per line, module symbols with a
// trailing "\t[module]". The kernel prints all-zero addresses to readers it
// does not trust (kptr_restrict, perf_event_paranoid > 1 without CAP_SYSLOG),
// which ParseKallsyms reports as `masked`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

struct KallsymsSymbol {
  uint64_t addr = 0;
  char type = '?';  // nm-style: T/t text, D/d data, ...
  std::string name;
  std::string module;  // empty for the core kernel
};

struct Kallsyms {
  std::vector<KallsymsSymbol> symbols;  // only when parsed with keep_symbols
  size_t symbol_count = 0;              // well-formed lines
  size_t malformed_lines = 0;           // lines that are not "<hex> <type> <name> [module]"
  std::string first_malformed;          // the first such line, for messages (truncated)
  // Every symbol's address is zero: the kernel hid them from this reader.
  bool masked = false;
  std::optional<uint64_t> stext;  // _stext (start of kernel text)
  std::optional<uint64_t> etext;  // _etext (end of kernel text)
  std::optional<uint64_t> text;   // _text (lowest kernel text address)
  // Lowest and highest module symbol addresses, when any module is loaded.
  std::optional<uint64_t> modules_start;
  std::optional<uint64_t> modules_end;
};

// Pure; never fails. Lines that do not parse are counted in malformed_lines.
// With keep_symbols false only the summary fields are filled (cheap on the
// ~100k-line live file).
Kallsyms ParseKallsyms(std::string_view text, bool keep_symbols = true);

// Reads root/proc/kallsyms and parses it. Fails when the file cannot be read.
Result<Kallsyms> ReadKallsyms(const base::RootPath& root, bool keep_symbols = true);

// One module of /proc/modules: "name size refcount deps state address
// [taints]". Only the columns that say where the module's code is; the
// refcount changes all the time on a busy machine.
struct ModuleLine {
  std::string name;
  uint64_t size = 0, addr = 0;
  bool operator==(const ModuleLine&) const = default;
};
// Pure; never fails: lines that do not parse, and masked (zero) addresses,
// are skipped.
std::vector<ModuleLine> ParseModules(std::string_view text);

}  // namespace ptsnap::sys
