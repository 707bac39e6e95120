#include "sys/cpus.h"

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  constexpr uint64_t kMaxCpu = 65535;
  std::string_view t = base::Trim(text);
  if (t.empty()) return Error("empty CPU list");
  // A bitmap bounds the work for lists that repeat large ranges.
  std::vector<bool> seen;
  for (std::string_view part : base::Split(t, ',')) {
    size_t dash = part.find('-');
    auto lo = base::ParseUint(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : base::ParseUint(part.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > kMaxCpu) {
      return Error("bad CPU list entry '" + std::string(part.substr(0, 20)) + "'");
    }
    if (seen.size() <= *hi) seen.resize(*hi + 1);
    for (uint64_t c = *lo; c <= *hi; ++c) seen[c] = true;
  }
  std::vector<int> cpus;
  for (size_t c = 0; c < seen.size(); ++c) {
    if (seen[c]) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

Result<std::vector<int>> ReadOnlineCpus(const base::RootPath& root) {
  PTSNAP_ASSIGN_OR_RETURN(std::string text,
                          base::ReadFile(root.Resolve("/sys/devices/system/cpu/online"), 4096));
  auto cpus = ParseCpuList(text);
  if (!cpus) return std::move(cpus).error().AddContext("/sys/devices/system/cpu/online");
  return cpus;
}

bool ParseFlagOnEveryCpu(std::string_view cpuinfo, std::string_view flag) {
  // One "flags\t\t: fpu vme ..." line per processor block.
  size_t blocks = 0;
  for (std::string_view line : base::Split(cpuinfo, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || base::Trim(line.substr(0, colon)) != "flags") continue;
    ++blocks;
    bool found = false;
    for (std::string_view f : base::SplitWhitespace(line.substr(colon + 1))) found |= f == flag;
    if (!found) return false;
  }
  return blocks > 0;
}

bool FlagOnEveryCpu(const base::RootPath& root, std::string_view flag) {
  auto text = base::ReadFile(root.Resolve("/proc/cpuinfo"), size_t{16} << 20);
  return text && ParseFlagOnEveryCpu(*text, flag);
}

}  // namespace ptsnap::sys
