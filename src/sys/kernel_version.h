// Kernel release strings ("6.1.0-27-amd64", "5.4.0-1103-aws", "5.15.0+",
// "4.19") parsed into a comparable version, and the perf features ptsnap
// cares about gated by the first kernel version that has them.
#pragma once

#include <compare>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

struct KernelVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string release;  // the full string as read

  [[nodiscard]] bool AtLeast(int maj, int min, int pat = 0) const {
    return std::tie(major, minor, patch) >= std::tie(maj, min, pat);
  }
  [[nodiscard]] std::string Short() const;  // "6.1.0"
};

// Pure. Needs at least "MAJOR.MINOR"; the patch level stops at the first
// character that is not a digit ("5.15.0+", "6.1.0-27-amd64", "6.8.0rc1").
Result<KernelVersion> ParseKernelRelease(std::string_view release);

// Reads root/proc/sys/kernel/osrelease (what uname -r prints); on the live
// system falls back to uname(2) when that file cannot be read.
Result<KernelVersion> ReadKernelVersion(const base::RootPath& root);

// A perf/kernel feature and the first upstream release that has it.
struct KernelFeature {
  std::string_view id;  // stable name, used in probe JSON
  int major;
  int minor;
  std::string_view what;  // one-line description
};

// AUX area 4.1, address filters 4.7, kcore copy (perf --kcore) 5.5,
// TEXT_POKE 5.9, MMAP2 build-ids 5.12, AUX pause/resume 6.13.
std::span<const KernelFeature> KernelFeatures();

}  // namespace ptsnap::sys
