#include "probe/probe.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "probe/checks.h"
#include "probe/facts.h"

namespace ptsnap::probe {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kPage = 4096;

}  // namespace

std::string_view StatusName(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kWarn: return "warn";
    case Status::kFail: return "fail";
    case Status::kInfo: return "info";
  }
  return "info";
}

const Check* ProbeReport::Find(std::string_view id) const {
  for (const Check& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::optional<std::string> GetenvFromProcess(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

ProbeEnv LiveEnv() {
  static const sys::HostCpuid host;
  ProbeEnv env;
  env.cpuid = &host;
  env.getenv = GetenvFromProcess;
  env.live_syscalls = true;
  return env;
}

Result<ProbeEnv> RootEnv(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error("--root " + dir.string() +
                 " is not a directory; give the folder that holds a captured sys/ and proc/");
  }
  ProbeEnv env = LiveEnv();
  env.root = base::RootPath(dir);
  env.cpuid = nullptr;
  env.live_syscalls = false;
  return env;
}

std::optional<uint64_t> LargestAuxBytes(const sys::Privileges& priv, int online_cpus, int buffers) {
  // kernel/events/core.c perf_mmap(): with CAP_IPC_LOCK, or paranoid -1,
  // pages beyond the budget are not refused.
  if (priv.Has(sys::kCapIpcLock) || (priv.perf_event_paranoid && *priv.perf_event_paranoid < 0)) {
    return std::nullopt;
  }
  if (priv.memlock_known && !priv.memlock_bytes) return std::nullopt;  // RLIMIT_MEMLOCK unlimited
  int cpus = std::max(online_cpus, 1);
  // The user's budget (kernel/events/core.c perf_mmap: user_lock_limit is
  // perf_event_mlock_kb times the online CPUs, then RLIMIT_MEMLOCK on top),
  // shared by every buffer the recording maps. Default 516 KiB per CPU.
  uint64_t per_cpu =
      static_cast<uint64_t>(std::max<int64_t>(priv.perf_event_mlock_kb.value_or(516), 0)) * kKiB;
  uint64_t memlock = priv.memlock_bytes.value_or(64 * kKiB);
  const uint64_t n = static_cast<uint64_t>(buffers > 0 ? buffers : cpus);
  uint64_t budget = (per_cpu * static_cast<uint64_t>(cpus) + memlock) / n;
  uint64_t data = 256 * kKiB + kPage;  // perf's unprivileged data ring + header page
  if (budget <= data) return 0;
  uint64_t aux = budget - data;
  uint64_t pow2 = kPage;
  if (aux < kPage) return 0;
  while (pow2 * 2 <= aux) pow2 *= 2;
  return pow2;
}

uint64_t DefaultSnapshotBytes(const sys::Privileges& priv, int online_cpus, int buffers) {
  bool privileged =
      priv.PerfmonCapable() || (priv.perf_event_paranoid && *priv.perf_event_paranoid < 0);
  uint64_t want = privileged ? 4 * kMiB : 128 * kKiB;
  std::optional<uint64_t> largest = LargestAuxBytes(priv, online_cpus, buffers);
  if (!largest) return want;
  if (*largest < 2 * kPage) return 0;
  return std::min(want, *largest);
}

Scopes AllowedScopes(const sys::Privileges& priv, bool kernel_has_cap_perfmon) {
  Scopes s;
  if (!priv.perf_event_paranoid) return s;  // no perf events at all
  bool capable =
      priv.Has(sys::kCapSysAdmin) || (kernel_has_cap_perfmon && priv.Has(sys::kCapPerfmon));
  int64_t p = *priv.perf_event_paranoid;
  s.user = capable || p <= 2;
  s.kernel = capable || p <= 1;
  s.system_wide = capable || p <= 0;
  return s;
}

ProbeReport RunProbe(const ProbeEnv& env) { return AssembleReport(GatherFacts(env)); }

}  // namespace ptsnap::probe
