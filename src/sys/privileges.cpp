#include "sys/privileges.h"

#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

// The value part of the first line starting with `key` (e.g. "CapEff:").
std::optional<std::string_view> FindLine(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (base::StartsWith(line, key)) return line.substr(key.size());
  }
  return std::nullopt;
}

std::string Snippet(std::string_view s) { return std::string(base::Trim(s).substr(0, 40)); }

}  // namespace

std::string CapabilityName(int cap) {
  switch (cap) {
    case kCapDacOverride: return "CAP_DAC_OVERRIDE";
    case kCapDacReadSearch: return "CAP_DAC_READ_SEARCH";
    case kCapIpcLock: return "CAP_IPC_LOCK";
    case kCapSysRawio: return "CAP_SYS_RAWIO";
    case kCapSysAdmin: return "CAP_SYS_ADMIN";
    case kCapSyslog: return "CAP_SYSLOG";
    case kCapPerfmon: return "CAP_PERFMON";
    default: return "CAP_" + std::to_string(cap);
  }
}

Result<uint64_t> ParseCapEff(std::string_view status) {
  auto v = FindLine(status, "CapEff:");
  if (!v) return Error("no CapEff line");
  auto caps = base::ParseUint(*v, 16);
  if (!caps) return Error("bad CapEff value '" + Snippet(*v) + "'");
  return *caps;
}

Result<uint32_t> ParseEffectiveUid(std::string_view status) {
  auto v = FindLine(status, "Uid:");
  if (!v) return Error("no Uid line");
  std::vector<std::string_view> f = base::SplitWhitespace(*v);
  std::optional<uint64_t> euid = f.size() >= 2 ? base::ParseUint(f[1]) : std::nullopt;
  if (!euid || *euid > UINT32_MAX) return Error("bad Uid line '" + Snippet(*v) + "'");
  return static_cast<uint32_t>(*euid);
}

Result<std::string> ParseLockdown(std::string_view text) {
  size_t open = text.find('[');
  size_t close = open == std::string_view::npos ? open : text.find(']', open);
  if (close == std::string_view::npos || close == open + 1) {
    return Error("no [selected] lockdown mode in '" + Snippet(text) + "'");
  }
  std::string_view mode = text.substr(open + 1, close - open - 1);
  for (char c : mode) {
    if (c < 'a' || c > 'z') return Error("bad lockdown mode '" + Snippet(mode) + "'");
  }
  return std::string(mode);
}

Result<std::optional<uint64_t>> ParseMemlockLimit(std::string_view limits) {
  auto v = FindLine(limits, "Max locked memory");
  if (!v) return Error("no 'Max locked memory' line");
  std::vector<std::string_view> f = base::SplitWhitespace(*v);
  if (f.empty()) return Error("empty 'Max locked memory' line");
  if (f[0] == "unlimited") return std::optional<uint64_t>();
  auto bytes = base::ParseUint(f[0]);
  if (!bytes) return Error("bad 'Max locked memory' value '" + Snippet(f[0]) + "'");
  return std::optional<uint64_t>(*bytes);
}

Result<int64_t> ParseSysctlInt(std::string_view text) {
  auto v = base::ParseInt(text);
  if (!v) return Error("not an integer: '" + Snippet(text) + "'");
  return *v;
}

Privileges ReadPrivileges(const base::RootPath& root) {
  Privileges p;
  std::error_code ec;
  // Reads `path` if it exists; a file that exists but fails is a warning.
  auto read = [&](const std::string& path) -> std::optional<std::string> {
    std::filesystem::path real = root.Resolve(path);
    if (!std::filesystem::exists(real, ec)) return std::nullopt;
    auto text = base::ReadFile(real, 1 << 20);
    if (!text) {
      p.warnings.push_back(path + ": " + text.error().ToString());
      return std::nullopt;
    }
    return std::move(*text);
  };
  auto warn = [&](const std::string& path, const Error& e) {
    p.warnings.push_back(path + ": " + e.ToString());
  };

  if (auto status = read("/proc/self/status")) {
    if (auto uid = ParseEffectiveUid(*status)) {
      p.euid = *uid;
    } else {
      warn("/proc/self/status", uid.error());
    }
    if (auto caps = ParseCapEff(*status)) {
      p.cap_eff = *caps;
    } else {
      warn("/proc/self/status", caps.error());
    }
  }
  if (auto limits = read("/proc/self/limits")) {
    if (auto m = ParseMemlockLimit(*limits)) {
      p.memlock_known = true;
      p.memlock_bytes = *m;
    } else {
      warn("/proc/self/limits", m.error());
    }
  }
  auto sysctl = [&](const std::string& path, std::optional<int64_t>* out) {
    if (auto text = read(path)) {
      if (auto v = ParseSysctlInt(*text)) {
        *out = *v;
      } else {
        warn(path, v.error());
      }
    }
  };
  sysctl("/proc/sys/kernel/perf_event_paranoid", &p.perf_event_paranoid);
  sysctl("/proc/sys/kernel/kptr_restrict", &p.kptr_restrict);
  sysctl("/proc/sys/kernel/yama/ptrace_scope", &p.ptrace_scope);
  sysctl("/proc/sys/kernel/perf_event_mlock_kb", &p.perf_event_mlock_kb);
  if (auto text = read("/sys/kernel/security/lockdown")) {
    if (auto mode = ParseLockdown(*text)) {
      p.lockdown = *mode;
    } else {
      warn("/sys/kernel/security/lockdown", mode.error());
    }
  }
  return p;
}

}  // namespace ptsnap::sys
