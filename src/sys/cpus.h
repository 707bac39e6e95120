// CPU lists as sysfs prints them ("0-3,6,8-9" in
// /sys/devices/system/cpu/online): the recorder opens one event per online
// CPU in per-CPU mode, and the perf mlock budget scales with their count.
#pragma once

#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

// Pure. Sorted, without duplicates. Fails on junk, reversed ranges, or CPU
// numbers above 65535.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// root/sys/devices/system/cpu/online.
Result<std::vector<int>> ReadOnlineCpus(const base::RootPath& root);

}  // namespace ptsnap::sys
