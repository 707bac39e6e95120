// Every cause-and-fix line a user can meet about the machine itself: no
// intel_pt PMU, privileges for a scope or for system-wide tracing, an errno
// from perf_event_open or from mapping a perf ring, a refused
// PTRACE_TRACEME. `ptsnap probe`'s fixes, the recorder's errors and the
// CLI's messages all come from here (docs/errors.md lists them). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ptsnap/result.h"
#include "sys/cpuid.h"
#include "sys/kernel_version.h"
#include "sys/privileges.h"

namespace ptsnap::probe {

// perf_event_paranoid as text ("2", or "unknown").
std::string ParanoidText(const sys::Privileges& priv);

// One line for a missing intel_pt PMU: what is missing, the likely cause
// (virtual machine, non-Intel or old CPU, kernel), and the --emulate hint.
std::string NoPmuMessage(const sys::CpuInfo& cpu);
// The probe's fix line for the same: what to do about it.
std::string NoPmuFix(const sys::CpuInfo& cpu);

// One line for an errno from perf_event_open or mmap of a PT/sideband
// event, naming the cause and the fix: EBUSY (another PT user), EACCES/EPERM
// (perf_event_paranoid with the sysctl, or capabilities), EPERM from mmap
// (perf_event_mlock_kb), ENOMEM from mmap (the kernel could not allocate the
// buffer: --snapshot-size), ESRCH (process gone), ENOENT/EOPNOTSUPP.
// `system_wide`: the event was a per-CPU one (-a), whose EACCES/EPERM means
// the system-wide privilege.
std::string ExplainOpenFailure(int errnum, bool kernel_scope, const sys::Privileges& priv,
                               bool during_mmap, uint64_t bytes, bool system_wide = false);

// System-wide tracing (pid -1 on each CPU) is what the kernel's
// perf_allow_cpu() allows: CAP_PERFMON or CAP_SYS_ADMIN, or
// kernel.perf_event_paranoid <= 0. The error names the missing privilege,
// the current value and the sysctl.
Result<void> CheckSystemWidePrivilege(const sys::Privileges& priv);

// May this process open PT events with the kernel in scope (`kernel`;
// `kernel_only`: --trace-kernel-only) or user space only? The kernel's own
// rules (kernel/events/core.c: perf_event_open() refuses exclude_kernel = 0
// when perf_event_paranoid > 1 without perfmon_capable(), i.e. CAP_PERFMON
// (5.8+) or CAP_SYS_ADMIN; Debian's level 3 refuses every event without
// them), on the privileges and kernel version (nullopt: unknown); the same
// rules as the probe's priv.scopes (AllowedScopes).
Result<void> CheckScopePrivileges(bool kernel, bool kernel_only, const sys::Privileges& priv,
                                  const std::optional<sys::KernelVersion>& kv);

// PTRACE_TRACEME refused in `run`'s child. With kernel.yama.ptrace_scope 3
// (or without Yama) no process may be traced, root included, until reboot;
// other refusals come from a seccomp filter or container policy. Both name
// the fix and `ptsnap attach`, which needs no ptrace.
std::string ExplainTracemeFailure(int errnum, std::optional<int64_t> ptrace_scope,
                                  const std::string& command);

}  // namespace ptsnap::probe
