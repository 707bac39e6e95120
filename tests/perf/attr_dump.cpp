// attr_dump: the perf_event_attrs `ptsnap run` would open, printed in
// perf record -vv's layout (perf/attr_text.h), without opening anything.
// It goes through record::Prepare, the function `ptsnap run` itself calls,
// so the attrs are the recorder's, not a re-derivation.
//
//   attr_dump [--root DIR] [--timer low|normal|high|custom:...]
//             [--scope user|kernel|both] [--full] [--all-cpus]
//             [--snapshot-size BYTES] [--pwr-evt]
//
// Prints the PT event's block, then the tracking (dummy) event's, then (a
// per-thread kernel scope with the privilege for CPU-wide events) the
// KSYMBOL/TEXT_POKE dummy's, each under perf's "perf_event_attr:" header; warnings (e.g. a timer
// preset downgraded) go to stderr. Exit 1 with the error when Prepare refuses. Used by
// perf_attr_agree (tests/perf/perf_attr_agree_test.cpp).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "base/string_util.h"
#include "perf/attr.h"
#include "perf/attr_text.h"
#include "record/options.h"
#include "record/recorder.h"
#include "sys/cpuid.h"

namespace {

constexpr char kDashes[] = "------------------------------------------------------------\n";

int Usage() {
  std::fprintf(stderr,
               "usage: attr_dump [--root DIR] [--timer SPEC] [--scope user|kernel|both] [--full] "
               "[--all-cpus] [--snapshot-size BYTES] [--pwr-evt]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ptsnap;
  record::RecordOptions opts;
  opts.command = {"true"};  // `ptsnap run -- true`: per-thread, enable_on_exec
  std::string root = "/";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--full") {
      opts.full_execution = true;
    } else if (arg == "--all-cpus") {
      opts.all_cpus = true;
    } else if (arg == "--pwr-evt") {
      opts.pwr_evt = true;
    } else if (arg == "--root" && has_value) {
      root = argv[++i];
    } else if (arg == "--timer" && has_value) {
      auto t = perf::ParseTiming(argv[++i]);
      if (!t) {
        std::fprintf(stderr, "attr_dump: %s\n", t.error().ToString().c_str());
        return 2;
      }
      opts.timer = *t;
    } else if (arg == "--scope" && has_value) {
      const std::string_view s = argv[++i];
      if (s == "user") {
        opts.scope = trace::Scope::kUser;
      } else if (s == "kernel") {
        opts.scope = trace::Scope::kKernel;
      } else if (s == "both") {
        opts.scope = trace::Scope::kUserKernel;
      } else {
        return Usage();
      }
    } else if (arg == "--snapshot-size" && has_value) {
      auto n = base::ParseUint(argv[++i]);
      if (!n) return Usage();
      opts.snapshot_size = *n;
    } else {
      return Usage();
    }
  }
  sys::HostCpuid cpuid;
  auto p = record::Prepare(opts, base::RootPath(root), cpuid);
  if (!p) {
    std::fprintf(stderr, "attr_dump: %s\n", p.error().ToString().c_str());
    return 1;
  }
  for (const std::string& w : p->warnings)
    std::fprintf(stderr, "attr_dump: warning: %s\n", w.c_str());
  if (!p->hw.pt_attr) {
    std::fprintf(stderr, "attr_dump: Prepare built no PT event\n");
    return 1;
  }
  std::vector<const perf_event_attr*> attrs = {&*p->hw.pt_attr, &p->hw.tracking_attr};
  if (p->hw.kernel_sideband_attr) attrs.push_back(&*p->hw.kernel_sideband_attr);
  for (const perf_event_attr* a : attrs) {
    std::printf("%sperf_event_attr:\n%s%s", kDashes, perf::FormatAttrLikePerf(*a).c_str(), kDashes);
  }
  return 0;
}
