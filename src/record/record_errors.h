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

// A refused uprobe: privilege (the uprobe PMU needs CAP_PERFMON or
// CAP_SYS_ADMIN, or perf_event_paranoid -1) or what the kernel said.
Error ExplainUprobeError(const Error& e);

}  // namespace ptsnap::record
