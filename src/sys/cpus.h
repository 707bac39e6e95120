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

// Pure: whether every processor of a /proc/cpuinfo text lists `flag` on its
// "flags" line (magic-trace's LBR test is the pdcm flag on every CPU).
// False when the text has no "flags" line at all.
bool ParseFlagOnEveryCpu(std::string_view cpuinfo, std::string_view flag);

// root/proc/cpuinfo through ParseFlagOnEveryCpu; false when unreadable.
bool FlagOnEveryCpu(const base::RootPath& root, std::string_view flag);

}  // namespace ptsnap::sys
