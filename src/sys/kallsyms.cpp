#include "sys/kallsyms.h"

#include <algorithm>

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

// x86-64 kernel addresses start here (the canonical upper half).
constexpr uint64_t kKernelHalf = 0xffff800000000000;

}  // namespace

Kallsyms ParseKallsyms(std::string_view text, bool keep_symbols) {
  Kallsyms out;
  bool any_nonzero = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (base::Trim(line).empty()) continue;
    std::vector<std::string_view> f = base::SplitWhitespace(line);
    std::optional<uint64_t> addr;
    if (f.size() >= 3 && f.size() <= 4 && f[0].size() <= 16 && f[1].size() == 1) {
      addr = base::ParseUint(f[0], 16);
    }
    bool module_ok =
        f.size() != 4 || (f[3].size() >= 3 && f[3].front() == '[' && f[3].back() == ']');
    if (!addr || !module_ok) {
      if (out.malformed_lines++ == 0) out.first_malformed = std::string(line.substr(0, 80));
      continue;
    }
    ++out.symbol_count;
    if (*addr != 0) any_nonzero = true;
    std::string_view name = f[2];
    std::string_view module = f.size() == 4 ? f[3].substr(1, f[3].size() - 2) : std::string_view{};
    if (module.empty()) {
      if (name == "_stext") out.stext = *addr;
      if (name == "_etext") out.etext = *addr;
      if (name == "_text") out.text = *addr;
    } else if (*addr >= kKernelHalf && f[1][0] != 'a' && f[1][0] != 'A') {
      // A module's per-CPU variables are absolute symbols at their offset in
      // the per-CPU area (e.g. "0000000000035000 a kvm_cpu [kvm]"): not in
      // the module area, and taken for one they stretched the range over all
      // of /proc/kcore (found on Debian's 6.1 under the VM suite).
      out.modules_start = std::min(out.modules_start.value_or(*addr), *addr);
      out.modules_end = std::max(out.modules_end.value_or(*addr), *addr);
    }
    if (keep_symbols) {
      out.symbols.push_back({*addr, f[1][0], std::string(name), std::string(module)});
    }
  }
  out.masked = out.symbol_count > 0 && !any_nonzero;
  return out;
}

Result<Kallsyms> ReadKallsyms(const base::RootPath& root, bool keep_symbols) {
  PTSNAP_ASSIGN_OR_RETURN(std::string text, base::ReadFile(root.Resolve("/proc/kallsyms")));
  return ParseKallsyms(text, keep_symbols);
}

std::vector<ModuleLine> ParseModules(std::string_view text) {
  std::vector<ModuleLine> out;
  for (auto line : base::Split(text, '\n')) {
    auto f = base::SplitWhitespace(line);
    if (f.size() < 6) continue;
    std::string_view a = f[5];
    if (a.starts_with("0x")) a.remove_prefix(2);
    auto size = base::ParseUint(f[1]);
    auto addr = base::ParseUint(a, 16);
    if (!size || !addr || *size == 0 || *addr == 0) continue;  // masked (kptr_restrict)
    out.push_back({std::string(f[0]), *size, *addr});
  }
  return out;
}

}  // namespace ptsnap::sys
