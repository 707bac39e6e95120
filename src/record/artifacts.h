// What a trace needs besides its streams to be decoded later, elsewhere:
// the mapped files' build-ids (and copies), the vDSO, the kernel's image or
// symbols, the JIT runtimes' jitdumps (docs/trace-format.md: binaries/,
// vdso/, kcore/, jit/).
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "record/recorder.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {

// Build-ids (and with --copy-binaries, copies) of the executable files the
// traced processes mapped, and the vdso, which exists only in memory. The
// vdso is the kernel's, the same for every process of one ABI on this
// kernel, so ptsnap dumps its own (getauxval(AT_SYSINFO_EHDR)) for each pid.
void RecordBinaries(trace::TraceWriter& writer, const std::set<std::string>& files, bool copy,
                    const std::vector<pid_t>& pids, bool host_vdso);

// The kernel image copy, gated like `ptsnap probe` (record/kcore_copy.h).
void CopyKernel(const Prepared& p, const base::RootPath& root, trace::TraceWriter& writer);

// A runtime's jitdump (node --perf-prof, the JVM agent, .NET) shows as the
// marker mapping of its file: each such file of `mapped_files` is copied as
// a jitdump, not a binary, and taken out of the set. Failures are added to
// `warnings`.
void CopyJitdumps(trace::TraceWriter& writer, std::set<std::string>& mapped_files,
                  std::vector<std::string>& warnings);

}  // namespace ptsnap::record
