#include "sys/kernel_version.h"

#include <sys/utsname.h>

#include <array>
#include <optional>
#include <tuple>

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

// Parses leading decimal digits (at most 6) from *s; nullopt if none.
std::optional<int> TakeNumber(std::string_view* s) {
  size_t i = 0;
  int v = 0;
  while (i < s->size() && (*s)[i] >= '0' && (*s)[i] <= '9') {
    if (i == 6) return std::nullopt;
    v = v * 10 + ((*s)[i] - '0');
    ++i;
  }
  if (i == 0) return std::nullopt;
  s->remove_prefix(i);
  return v;
}

constexpr std::array kFeatures = {
    KernelFeature{"aux_area", 4, 1, "AUX area for Intel PT data"},
    KernelFeature{"addr_filters", 4, 7, "address filters (PERF_EVENT_IOC_SET_FILTER)"},
    KernelFeature{"kcore", 5, 5, "kernel text snapshots from /proc/kcore (perf --kcore)"},
    KernelFeature{"text_poke", 5, 9, "PERF_RECORD_TEXT_POKE for kernel self-modification"},
    KernelFeature{"mmap2_build_id", 5, 12, "build-ids in PERF_RECORD_MMAP2"},
    KernelFeature{"aux_pause", 6, 13, "in-kernel AUX pause/resume"},
};

}  // namespace

std::string KernelVersion::Short() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Result<KernelVersion> ParseKernelRelease(std::string_view release) {
  std::string_view t = base::Trim(release);
  KernelVersion v;
  v.release = std::string(t);
  std::string_view s = t;
  auto bad = [&] {
    return Error("cannot parse kernel release '" + std::string(t.substr(0, 60)) + "'");
  };
  auto major = TakeNumber(&s);
  if (!major || s.empty() || s.front() != '.') return bad();
  s.remove_prefix(1);
  auto minor = TakeNumber(&s);
  if (!minor) return bad();
  v.major = *major;
  v.minor = *minor;
  if (!s.empty() && s.front() == '.') {
    s.remove_prefix(1);
    if (auto patch = TakeNumber(&s)) v.patch = *patch;
  }
  return v;
}

Result<KernelVersion> ReadKernelVersion(const base::RootPath& root) {
  auto text = base::ReadFile(root.Resolve("/proc/sys/kernel/osrelease"), 4096);
  if (!text && root.IsLive()) {
    struct utsname u;
    if (::uname(&u) != 0) return Error::FromErrno("uname");
    return ParseKernelRelease(u.release);
  }
  if (!text) return std::move(text).error();
  auto v = ParseKernelRelease(*text);
  if (!v) return std::move(v).error().AddContext("/proc/sys/kernel/osrelease");
  return v;
}

std::span<const KernelFeature> KernelFeatures() { return kFeatures; }

}  // namespace ptsnap::sys
