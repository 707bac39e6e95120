// `ptsnap probe`: can this machine record Intel PT, in which scopes, with
// kernel images, and if not, why not and what to do. docs/probe.md lists
// every check, its stable id and the JSON schema.
//
// RunProbe() reads everything through ProbeEnv (a RootPath for /sys and
// /proc, a CPUID source, an environment lookup), so tests run it on fake
// trees; the live checks (real perf_event_open calls) run only when
// `live_syscalls` is set. It never fails: every problem is a Check.
// Inside, it is GatherFacts() (facts.h: all the I/O, into a plain
// ProbeFacts) then AssembleReport() (checks.h: one pure check per section).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"
#include "sys/cpuid.h"
#include "sys/privileges.h"

namespace ptsnap::probe {

enum class Status { kOk, kWarn, kFail, kInfo };

// "ok", "warn", "fail", "info": the JSON spelling.
std::string_view StatusName(Status s);

struct Check {
  std::string id;     // stable, dotted: "pmu.intel_pt" (docs/probe.md)
  std::string title;  // short human label
  Status status = Status::kInfo;
  std::string value;  // what was found
  std::string fix;    // one line: what to do; empty when nothing to do
};

// Which tracing scopes this user may open (pt-kernel-interface.md 4.3).
struct Scopes {
  bool user = false;         // own processes, exclude_kernel = 1
  bool kernel = false;       // exclude_kernel = 0
  bool system_wide = false;  // pid = -1, per CPU
};

struct ProbeReport {
  std::vector<Check> checks;  // in a fixed order (docs/probe.md)
  // The verdict: Intel PT recording possible for at least the user scope.
  bool pt_available = false;
  std::string pt_reason;  // why not, when !pt_available
  // Collection modes this machine offers, stable names: "intel_pt-user",
  // "intel_pt-kernel", "intel_pt-system-wide", "kcore", "emulated".
  std::vector<std::string> modes;
  Scopes scopes;
  bool kcore_usable = false;  // kernel images can be snapshotted
  // Default AUX (snapshot) size per traced thread/CPU, bytes.
  uint64_t default_snapshot_bytes = 0;
  // Every file that existed but could not be read or parsed ("<path>: why").
  std::vector<std::string> warnings;

  [[nodiscard]] const Check* Find(std::string_view id) const;
};

struct ProbeEnv {
  base::RootPath root;
  // CPUID of the machine being described; nullptr when unknown (--root trees
  // describe another machine, whose CPUID we cannot ask).
  const sys::CpuidSource* cpuid = nullptr;
  // Environment lookup (PTSNAP_NO_KCORE, MAGIC_TRACE_PERF_NO_KCORE, PATH).
  std::function<std::optional<std::string>(std::string_view)> getenv;
  // Open real perf events (dummy, breakpoint, uprobe) on this process. Off
  // for --root trees: the answers would describe this machine instead.
  bool live_syscalls = false;
};

// ::getenv as a ProbeEnv::getenv: the variable's value, nullopt when unset.
std::optional<std::string> GetenvFromProcess(std::string_view name);

// The environment for describing this machine: RootPath "/", host CPUID,
// ::getenv, live syscalls on.
ProbeEnv LiveEnv();

// The environment for `probe --root DIR`: DIR's sys/ and proc/, no CPUID, no
// live syscalls (both would describe this machine, not the tree). Fails when
// DIR is not a directory, with the message the CLI prints.
Result<ProbeEnv> RootEnv(const std::filesystem::path& dir);

ProbeReport RunProbe(const ProbeEnv& env);

// Pure helpers, exposed for the recorder and for tests.

// perf's rule: 4 MiB when the user may lock memory freely (CAP_IPC_LOCK or
// perf_event_paranoid -1), else 128 KiB, never more than the largest AUX
// buffer the mlock budget allows. 0 when not even 4 pages fit.
// `buffers`: how many PT buffers share the user's budget: 0 means one per
// online CPU (system-wide, and what `ptsnap probe` reports); per-thread
// recordings pass the number of threads traced with PT.
uint64_t DefaultSnapshotBytes(const sys::Privileges& priv, int online_cpus, int buffers = 0);

// The largest power-of-two AUX buffer per CPU the perf mlock accounting
// allows this user next to a 256 KiB + 1 page data ring; nullopt = no limit.
std::optional<uint64_t> LargestAuxBytes(const sys::Privileges& priv, int online_cpus,
                                        int buffers = 0);

// Scopes from paranoid, capabilities and kernel version (CAP_PERFMON counts
// only from 5.8; before that, CAP_SYS_ADMIN).
Scopes AllowedScopes(const sys::Privileges& priv, bool kernel_has_cap_perfmon);

}  // namespace ptsnap::probe
