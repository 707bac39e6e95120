// --only-in FUNC on real hardware: how this kernel keeps Intel PT off
// outside FUNC. Linux 6.13+ has AUX pause/resume: the intel_pt event opens
// paused (aux_start_paused) and an entry uprobe (aux_resume) and a return
// uprobe (aux_pause) on FUNC join its group (HardwareConfig::only_in). Older
// kernels fall back to `--filter FUNC` (its own code only) with a note.
// docs/recording.md, "Catching the slow call".
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/root_path.h"
#include "ptsnap/result.h"
#include "record/hardware_source.h"
#include "record/options.h"
#include "sys/kernel_version.h"
#include "sys/pmu.h"

namespace ptsnap::record {

struct OnlyInPlan {
  std::optional<AuxActionProbes> probes;  // 6.13+
  std::string fallback_filter;            // older kernels: "filter FUNC" (perf's syntax)
  std::string note;                       // the fallback's one line for the user
};

// FUNC (opts.only_in) is looked up in the program (run: the command's
// executable; attach: the first process's /proc/PID/exe). With AUX pause
// (perf::HasAuxPause(kernel)): the probes' attrs on the uprobe PMU under
// `root`. Else the fallback, which needs IP filtering on `intel_pt` and
// per-thread tracing. Errors: no such function, no uprobe PMU or retprobe
// term, the fallback impossible (system-wide, no ip_filtering). Nothing is
// opened. Empty plan when opts.only_in is "".
// The program's file for --only-in, once its function was found there
// (the first check of a plan: a typo is reported on any machine). Error:
// no function of that name (kind kTrigger), the program unreadable.
Result<std::filesystem::path> FindOnlyInFunction(const RecordOptions& opts);

Result<OnlyInPlan> PlanOnlyIn(const RecordOptions& opts, const base::RootPath& root,
                              const std::optional<sys::KernelVersion>& kernel,
                              const sys::PmuInfo& intel_pt, bool system_wide);

}  // namespace ptsnap::record
