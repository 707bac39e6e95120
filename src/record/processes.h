// The traced processes as /proc shows them: their threads, every process
// (system-wide), and the sideband of what a process had mapped before
// recording began.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::record {

// Whether `pid` exists (kill(pid, 0); EPERM: it does, another user's).
bool ProcessExists(pid_t pid);

// Threads of `pid` under `root` (/proc/PID/task), at least 1.
int CountThreads(const base::RootPath& root, pid_t pid);

// Threads of a process (/proc/PID/task), sorted; the main thread first.
Result<std::vector<pid_t>> ListThreads(pid_t pid);

// PERF_RECORD_MMAP2 (+ a COMM) records describing what `pid` has mapped now,
// for attach (the kernel only reports mappings made after the event opened).
Result<std::string> SynthesizeSideband(pid_t pid, uint64_t time);

// Every process in `root`/proc (numeric entries), sorted.
std::vector<pid_t> ListProcesses(const base::RootPath& root);

}  // namespace ptsnap::record
