// The one orchestrator of a recording: planned once, run once. The public
// API (ptsnap::Recording, src/api/) and through it the CLI use only this;
// the tests drive it too.
//
// PlanRecording checks everything that can be checked before anything is
// started or written, the most fundamental problem first: the options
// themselves, the trace directory, the target (the command, the processes)
// and its trigger, then the machine (the intel_pt PMU and privileges, or the
// emulator's pieces). So `ptsnap run --trigger main -- /bin/true` on a
// machine without PT reports the missing `main`, not the missing PMU.
// RunRecording then runs the one session loop (record::Record) over the
// plan's source: hardware PT, sampling, or the emulator (emulate/emulate.h,
// a self-driven PtSource), with the same Control and events.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "emulate/emulate.h"
#include "ptsnap/result.h"
#include "record/control.h"
#include "record/options.h"
#include "record/recorder.h"
#include "sys/cpuid.h"

namespace ptsnap::session {

struct Plan {
  record::RecordOptions opts;
  std::filesystem::path trace_dir;
  // The default trace directory exists from an earlier recording: RunRecording
  // moves it to trace_dir + ".old" first (one generation, like perf.data.old).
  bool move_previous_aside = false;
  std::optional<record::Prepared> hardware;        // opts.emulate false
  std::optional<emulate::EmulationPlan> emulated;  // opts.emulate true
  std::vector<std::string> warnings;
};

struct PlanEnv {
  base::RootPath root;                      // /sys and /proc
  const sys::CpuidSource* cpuid = nullptr;  // nullptr: the host's
};

// Errors carry their kind: kNoPmu and kPrivilege (the machine), kTrigger,
// kProcessGone, kTraceDirExists; kOther for bad options and the emulator.
Result<Plan> PlanRecording(record::RecordOptions opts, const PlanEnv& env = {});

struct Outcome {
  int program_status = 0;  // run: the program's exit status (shell style)
  uint32_t snapshots = 0;
  bool interrupted = false;  // a stop request ended it
  std::filesystem::path trace_dir;
  std::vector<std::string> warnings;
};

// Runs `plan` on the calling thread until the recording ends (the program
// exits, the trigger fires, --duration, or `control` asks it to stop).
// `control` is closed at the end, whatever happened.
Result<Outcome> RunRecording(Plan plan, record::Control& control, const record::EventFn& events,
                             const PlanEnv& env = {});

// The trace directory a recording with these options writes: --trace-dir,
// else beside -o (record::DefaultTraceDir), else "trace.ptsnap".
std::filesystem::path TraceDirFor(const record::RecordOptions& opts);

}  // namespace ptsnap::session
