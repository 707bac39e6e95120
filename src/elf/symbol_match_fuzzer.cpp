// Fuzzes the name matcher on what a user could type: the input's first line
// is the typed name, each further line a symbol "MANGLED\tDEMANGLED\tDSO".
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "elf/symbol_match.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  const std::string_view typed = in.substr(0, nl);
  std::vector<ptsnap::elf::NamedSymbol> symbols;
  while (nl != std::string_view::npos && symbols.size() < 64) {
    in.remove_prefix(nl + 1);
    nl = in.find('\n');
    const std::string_view line = in.substr(0, nl);
    ptsnap::elf::NamedSymbol s;
    const size_t t1 = line.find('\t');
    s.mangled = std::string(line.substr(0, t1));
    if (t1 != std::string_view::npos) {
      const std::string_view rest = line.substr(t1 + 1);
      const size_t t2 = rest.find('\t');
      s.demangled = std::string(rest.substr(0, t2));
      if (t2 != std::string_view::npos) s.dso = std::string(rest.substr(t2 + 1));
    }
    symbols.push_back(std::move(s));
  }
  (void)ptsnap::elf::MatchSymbols(typed, symbols);
  (void)ptsnap::elf::ClosestNames(typed, symbols);
  (void)ptsnap::elf::GlobMatch(typed, typed);
  (void)ptsnap::elf::WithoutParameters(typed);
  return 0;
}
