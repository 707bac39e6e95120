// Every cause-and-fix line a user can meet about the machine: no PMU,
// privileges, a refused perf_event_open or mmap, a refused ptrace. The
// probe's fixes, the recorder's errors and the CLI's messages come from
// here, so the same problem is explained the same way everywhere.
#include "probe/explain.h"

#include <cerrno>
#include <cstring>

#include "base/string_util.h"
#include "probe/probe.h"

namespace ptsnap::probe {

std::string ParanoidText(const sys::Privileges& priv) {
  return priv.perf_event_paranoid ? std::to_string(*priv.perf_event_paranoid) : "unknown";
}

Result<void> CheckScopePrivileges(bool kernel, bool kernel_only, const sys::Privileges& priv,
                                  const std::optional<sys::KernelVersion>& kv) {
  const bool has_cap_perfmon = !kv || kv->AtLeast(5, 8);
  // Without a readable CapEff, euid 0 stands for the full set (as root has).
  sys::Privileges effective = priv;
  if (!effective.cap_eff && priv.IsRoot()) effective.cap_eff = ~uint64_t{0};
  const Scopes allowed = AllowedScopes(effective, has_cap_perfmon);
  const std::string paranoid = ParanoidText(priv);
  if (kernel && !allowed.kernel) {
    std::string flag = kernel_only ? "--trace-kernel-only" : "--trace-include-kernel";
    std::string msg = flag +
                      " needs CAP_PERFMON or CAP_SYS_ADMIN (root), or kernel.perf_event_paranoid "
                      "<= 1 (it is " +
                      paranoid + "); run as root or `sysctl -w kernel.perf_event_paranoid=1`";
    if (kv && !has_cap_perfmon && priv.Has(sys::kCapPerfmon) && !priv.Has(sys::kCapSysAdmin)) {
      msg += " (CAP_PERFMON counts only from Linux 5.8; this kernel is " + kv->Short() + ")";
    }
    return Error(msg);
  }
  if (!kernel && priv.perf_event_paranoid && !allowed.user) {
    return Error("not allowed to use perf events: kernel.perf_event_paranoid is " + paranoid +
                 " (perf disabled for users); run as root or `sysctl -w "
                 "kernel.perf_event_paranoid=2`");
  }
  return {};
}

std::string NoPmuMessage(const sys::CpuInfo& cpu) {
  std::string why;
  if (cpu.hypervisor) {
    why = "this looks like a virtual machine" +
          (cpu.hypervisor_vendor.empty() ? std::string()
                                         : " (hypervisor " + cpu.hypervisor_vendor + ")") +
          " without Intel PT pass-through";
  } else if (cpu.available && cpu.vendor != "GenuineIntel") {
    why = "this CPU (" + cpu.vendor + ") has no Intel PT";
  } else if (cpu.available && !cpu.pt_supported) {
    why = "this CPU has no Intel PT (needs Broadwell or newer)";
  } else {
    why = "the kernel has no intel_pt driver (needs Linux 4.1+ with CONFIG_PERF_EVENTS_INTEL_PT)";
  }
  return "no Intel PT on this machine: /sys/bus/event_source/devices/intel_pt does not exist; " +
         why +
         ". Use --emulate to record under the PT emulator instead (exact, user space), or "
         "--sampling for stack samples (statistical, any process)";
}

std::string ExplainOpenFailure(int errnum, bool kernel_scope, const sys::Privileges& priv,
                               bool during_mmap, uint64_t bytes, bool system_wide) {
  // mmap of a perf ring: EPERM is perf_mmap_calc_limits() refusing to lock
  // more (the budget); ENOMEM is rb_alloc()/rb_alloc_aux() failing to get the
  // pages. Without caps/topa_multiple_entries (PERF_PMU_CAP_AUX_NO_SG) an
  // overwrite-mode AUX buffer must be one high-order allocation, so above
  // MAX_ORDER (4 MiB) it always fails; perf too gives its mlock hint only for
  // EPERM (builtin-record.c record__mmap_evlist).
  if (during_mmap && errnum == ENOMEM) {
    return "the kernel could not allocate " + base::ExactSize(bytes) +
           " of perf buffer memory (ENOMEM while mapping it: not a limit; memory is short or "
           "fragmented, and CPUs without multi-entry ToPA need the AUX buffer in one contiguous "
           "block of at most 4 MiB); pass a smaller --snapshot-size";
  }
  if (during_mmap && errnum == EPERM) {
    std::string budget = priv.perf_event_mlock_kb
                             ? std::to_string(*priv.perf_event_mlock_kb) + " KiB per CPU"
                             : "per-CPU budget";
    return "cannot lock " + base::ExactSize(bytes) +
           " of perf buffer memory: over kernel.perf_event_mlock_kb (" + budget +
           ") plus ulimit -l; raise it (sysctl -w kernel.perf_event_mlock_kb=" +
           std::to_string(std::max<uint64_t>(bytes / 1024 * 2, 2048)) +
           "), run as root, or pass a smaller --snapshot-size";
  }
  switch (errnum) {
    case EBUSY:
      return "Intel PT is busy: another tracer holds it (perf record -e intel_pt, a debugger, "
             "VTune; the PT PMU is exclusive); stop it and try again";
    case EACCES:
    case EPERM: {
      const std::string paranoid = ParanoidText(priv);
      if (system_wide)
        return "not allowed to trace all CPUs: needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
               "kernel.perf_event_paranoid <= 0 (it is " +
               paranoid + "); run as root or `sysctl -w kernel.perf_event_paranoid=0`";
      if (kernel_scope)
        return "not allowed to trace the kernel: needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
               "kernel.perf_event_paranoid <= 1 (it is " +
               paranoid + "); run as root or `sysctl -w kernel.perf_event_paranoid=1`";
      if (priv.perf_event_paranoid && *priv.perf_event_paranoid >= 3)
        return "not allowed to use perf events: kernel.perf_event_paranoid is " + paranoid +
               " (perf disabled for users); run as root or `sysctl -w "
               "kernel.perf_event_paranoid=2`";
      return "not allowed to trace this process (kernel.perf_event_paranoid is " + paranoid +
             "): trace your own processes, run as root, or check kernel.yama.ptrace_scope "
             "(`sysctl -w kernel.perf_event_paranoid=2` allows user-space tracing of your own "
             "processes)";
    }
    case ESRCH: return "the process is gone: it exited before ptsnap could attach";
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
      return "the kernel does not support this event here (no Intel PT in this virtual machine?); "
             "use --emulate";
    case ENOSPC:
      return "no free hardware debug register for the trigger breakpoint (a debugger may hold "
             "them)";
    case EINVAL:
      return "the kernel rejected the event settings (try --timer-resolution low, or a smaller "
             "--snapshot-size)";
    case EMFILE: return "too many open files: raise `ulimit -n` (each traced thread needs several)";
    default: return std::string(std::strerror(errnum));
  }
}

Result<void> CheckSystemWidePrivilege(const sys::Privileges& priv) {
  // kernel/events/core.c perf_allow_cpu(): paranoid > 0 needs perfmon_capable().
  if (priv.PerfmonCapable()) return Ok();
  if (priv.perf_event_paranoid && *priv.perf_event_paranoid <= 0) return Ok();
  return Error(
      "--all-cpus (system-wide tracing) needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
      "kernel.perf_event_paranoid <= 0 (it is " +
      ParanoidText(priv) + "); run as root or `sysctl -w kernel.perf_event_paranoid=0`");
}

std::string ExplainTracemeFailure(int errnum, std::optional<int64_t> ptrace_scope,
                                  const std::string& command) {
  const std::string head = "cannot start '" + command +
                           "' under ptsnap: PTRACE_TRACEME was refused (" + std::strerror(errnum) +
                           ")";
  const std::string attach =
      "or start the program yourself and use `ptsnap attach -p PID` (attach needs no ptrace)";
  if (ptrace_scope && *ptrace_scope >= 3) {
    // Documentation/admin-guide/LSM/Yama.rst: "3 - no attach: no processes
    // may use ptrace with PTRACE_ATTACH nor via PTRACE_TRACEME. Once set,
    // this sysctl value cannot be changed."
    return head +
           ": kernel.yama.ptrace_scope is 3, which forbids ptrace for every process, root "
           "included, and cannot be lowered until reboot; `ptsnap run` needs ptrace to stop the "
           "program at its exec. Boot with kernel.yama.ptrace_scope=2 or lower (/etc/sysctl.d), " +
           attach;
  }
  return head + ": ptrace is blocked here (kernel.yama.ptrace_scope is " +
         (ptrace_scope ? std::to_string(*ptrace_scope) : std::string("not set: no Yama")) +
         "; a seccomp filter or container policy may forbid ptrace); allow ptrace, " + attach;
}

std::string NoPmuFix(const sys::CpuInfo& cpu) {
  if (cpu.available && cpu.vendor != "GenuineIntel")
    return "Intel PT needs an Intel CPU (this one is " + cpu.vendor +
           "); use `ptsnap run --emulate`";
  if (cpu.available && cpu.hypervisor)
    return "this is a VM without PT pass-through: enable it in the hypervisor or run on bare "
           "metal; meanwhile use `ptsnap run --emulate`";
  return "needs a Broadwell+ Intel CPU and a kernel with CONFIG_PERF_EVENTS_INTEL_PT (4.1+); "
         "meanwhile use `ptsnap run --emulate`";
}

}  // namespace ptsnap::probe
