#include "sys/perf_event.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace ptsnap::sys {

Result<base::UniqueFd> PerfEventOpen(const perf_event_attr& attr, pid_t pid, int cpu, int group_fd,
                                     unsigned long flags) {
  long fd;
  do {
    fd = ::syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, flags | PERF_FLAG_FD_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    return Error::FromErrno("perf_event_open(type " + std::to_string(attr.type) + ", config " +
                                std::to_string(attr.config) + ", pid " + std::to_string(pid) +
                                ", cpu " + std::to_string(cpu) + ")",
                            err);
  }
  return base::UniqueFd(static_cast<int>(fd));
}

const char* ExplainPerfEventErrno(int errnum) {
  // Meanings from perf_event_open(2) ERRORS and perf's evsel__open_strerror.
  switch (errnum) {
    case EACCES:
    case EPERM: return "not allowed: perf_event_paranoid or missing CAP_PERFMON/CAP_SYS_ADMIN";
    case ENOENT: return "this event type does not exist on this machine";
    case ENODEV: return "the PMU has no such event or CPU";
    case EOPNOTSUPP: return "the hardware does not support this event (common in VMs)";
    case EINVAL: return "the kernel rejected the event attributes";
    case ENOSPC: return "no free hardware slot (debug registers or counters in use)";
    case EBUSY: return "the PMU is in exclusive use by another user (e.g. another PT or LBR user)";
    case EMFILE: return "too many open files";
    case ENOSYS: return "perf_event_open is not available in this kernel";
    default: return "";
  }
}

}  // namespace ptsnap::sys
