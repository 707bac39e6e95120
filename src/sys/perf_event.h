// perf_event_open(2), which glibc does not wrap.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

// syscall(SYS_perf_event_open, ...) with PERF_FLAG_FD_CLOEXEC added to
// `flags`. On failure the Error keeps errno (errnum()) and says which event
// type and pid/cpu were asked for.
Result<base::UniqueFd> PerfEventOpen(const perf_event_attr& attr, pid_t pid, int cpu, int group_fd,
                                     unsigned long flags = 0);

// One line explaining an errno from perf_event_open in perf's terms
// (EACCES/EPERM: paranoid or capabilities; ENOENT/EOPNOTSUPP: no such
// event on this hardware; ...). Empty for errnos without a known meaning.
const char* ExplainPerfEventErrno(int errnum);

}  // namespace ptsnap::sys
