// /proc/PID/maps: "start-end perms offset major:minor inode   path".
// The recorder synthesises PERF_RECORD_MMAP2 records from it for mappings
// that existed before tracing started.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
  bool read = false;
  bool write = false;
  bool exec = false;
  bool shared = false;  // 's' (else 'p', private)
  uint64_t offset = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  // Pathname as the kernel prints it (may contain spaces); "[heap]",
  // "[vdso]"..., empty for anonymous memory. A " (deleted)" suffix is
  // removed and reported in `deleted`.
  std::string path;
  bool deleted = false;
};

// Pure. Fails on the first malformed line, naming its number (1-based).
Result<std::vector<MapEntry>> ParseProcMaps(std::string_view text);

// Reads root/proc/<pid>/maps ("self" when pid is 0).
Result<std::vector<MapEntry>> ReadProcMaps(const base::RootPath& root, pid_t pid);

}  // namespace ptsnap::sys
