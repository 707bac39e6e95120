// Why the machine refused a recording's events, said with the cause and
// the fix (probe/explain.h has the words), and the kind callers act on.
#pragma once

#include "ptsnap/result.h"
#include "record/recorder.h"

namespace ptsnap::record {

// The error from opening a thread's events, with the explanation in front.
// Its kind: a vanished thread, a refusal by privilege (perf_event_open's
// EACCES/EPERM; from mmap they mean the locked-memory limit), or the kind the
// perf layer gave it (kBufferMapping).
Error ExplainThreadError(const Error& e, const Prepared& p);

// What the kernel's uprobe PMU asks for: perf_uprobe_event_init checks a
// capability, whatever perf_event_paranoid says. CAP_PERFMON was enough
// from Linux 5.8 (c9e0924e5c2b) until the 2025 fix that asks for
// CAP_SYS_ADMIN again, backported to the stable kernels.
inline constexpr const char* kUprobePrivilege =
    "root (CAP_SYS_ADMIN; kernel.perf_event_paranoid does not change it, and CAP_PERFMON is "
    "enough only on kernels from before 2025's fix)";

// A refused uprobe: privilege (kUprobePrivilege) or what the kernel said.
Error ExplainUprobeError(const Error& e);

}  // namespace ptsnap::record
