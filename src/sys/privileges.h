// Who we are to the perf subsystem: effective uid, effective capabilities,
// and the sysctls and limits that decide what perf_event_open and mmap allow
// (pt-kernel-interface.md sections 4.2, 4.3 and 6).
//
// Everything is read from files under a RootPath, so `probe --root` can
// describe a captured tree: /proc/self/status (Uid, CapEff),
// /proc/self/limits (RLIMIT_MEMLOCK), /proc/sys/kernel/*, and
// /sys/kernel/security/lockdown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

// Capability numbers (uapi linux/capability.h).
inline constexpr int kCapDacOverride = 1;
inline constexpr int kCapDacReadSearch = 2;
inline constexpr int kCapIpcLock = 14;
inline constexpr int kCapSysRawio = 17;
inline constexpr int kCapSysAdmin = 21;
inline constexpr int kCapSyslog = 34;
inline constexpr int kCapPerfmon = 38;

// "CAP_PERFMON" for the seven above, "CAP_<n>" otherwise.
std::string CapabilityName(int cap);

// Pure parsers of /proc/self/status. Each finds its line ("CapEff:\t...",
// "Uid:\treal\teffective\tsaved\tfs") and fails when it is missing or bad.
Result<uint64_t> ParseCapEff(std::string_view status);
Result<uint32_t> ParseEffectiveUid(std::string_view status);

// Pure: "[none] integrity confidentiality" -> "none".
Result<std::string> ParseLockdown(std::string_view text);

// Pure: the "Max locked memory" soft limit in bytes from /proc/PID/limits;
// nullopt value inside means "unlimited".
Result<std::optional<uint64_t>> ParseMemlockLimit(std::string_view limits);

// Pure: a sysctl holding one decimal integer ("2\n", "-1\n").
Result<int64_t> ParseSysctlInt(std::string_view text);

struct Privileges {
  std::optional<uint32_t> euid;
  std::optional<uint64_t> cap_eff;
  std::optional<int64_t> perf_event_paranoid;  // absent: no perf events in this kernel
  std::optional<int64_t> kptr_restrict;
  std::optional<int64_t> ptrace_scope;  // absent: Yama not built in
  std::optional<int64_t> perf_event_mlock_kb;
  bool memlock_known = false;
  std::optional<uint64_t> memlock_bytes;  // RLIMIT_MEMLOCK soft; nullopt = unlimited
  std::optional<std::string> lockdown;    // absent: no lockdown LSM
  // "<path>: <what was wrong>" for files that exist but cannot be read or parsed.
  std::vector<std::string> warnings;

  [[nodiscard]] bool IsRoot() const { return euid && *euid == 0; }
  [[nodiscard]] bool Has(int cap) const { return cap_eff && ((*cap_eff >> cap) & 1); }
  // CAP_PERFMON (5.8+) or CAP_SYS_ADMIN: the kernel's perfmon_capable().
  [[nodiscard]] bool PerfmonCapable() const { return Has(kCapPerfmon) || Has(kCapSysAdmin); }
};

// Never fails; problems end up in `warnings`.
Privileges ReadPrivileges(const base::RootPath& root);

}  // namespace ptsnap::sys
