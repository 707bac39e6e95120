// The emulated PT source: runs the command under qemu-user with ptsnap's TCG
// plugin, which encodes a genuine Intel PT stream, and writes a trace
// directory (docs/trace-format.md) the decoder cannot tell from hardware's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "perf/attr.h"
#include "ptsnap/result.h"
#include "record/control.h"
#include "record/options.h"
#include "record/recorder.h"

namespace ptsnap::emulate {

// Everything checked and decided before anything runs: the program (an
// x86-64 ELF), the trigger resolved in it, then QEMU 7.x and the plugin,
// and the plugin's arguments. Errors name the fix.
struct EmulationPlan {
  // The ELF QEMU loads and the guest's argv (argv[0] as the command named
  // it). A `#!` script runs its interpreter, as the kernel would: then
  // `program` is the interpreter, `argv` [interpreter, arg, script, args],
  // and `script` the script (empty for an ELF).
  std::filesystem::path program, script, qemu, plugin;
  std::vector<std::string> argv;
  std::string qemu_version;
  perf::PtAttr attr;  // the event --timer-resolution would open (its warnings included)
  uint64_t snapshot_size = 0;
  std::vector<std::string> plugin_args;
  // --filter in the kernel's syntax, for the manifest's pt.filter ("": none).
  std::string addr_filter;
  // The functions --trigger NAME named ("risky(int) @ 0x401136
  // (link-time)"), shown as the recording starts.
  std::vector<std::string> trigger_functions;
};
Result<EmulationPlan> PlanEmulation(const record::RecordOptions& opts);

// The recording `plan` describes, for record::Record's session loop: the
// virtual CPU and PT configuration the manifest lists (Prepared), and the
// emulator as the loop's PtSource (a self-driven one, record/pt_source.h)
// writing into `trace_dir`.
record::Prepared PrepareEmulated(const EmulationPlan& plan, const record::RecordOptions& opts);
record::SourceFactory EmulatedSourceFactory(const EmulationPlan& plan,
                                            const record::RecordOptions& opts,
                                            const std::filesystem::path& trace_dir);

// Records `opts.command` into `trace_dir` as `plan` says: record::Record
// with the two above, after the plan's warnings. Returns the
// program's exit status (as a shell would report it) once the trace
// directory is complete. Installs no signal handlers: `control`'s snapshot
// requests reach the plugin at once, and each snapshot the plugin takes is
// moved into the trace directory while the program runs (emulate/ingest.h),
// where a Snapshot() request completes with its number; a stop request
// makes the plugin take the last snapshot and pass SIGINT on to the
// program. Events as record::Record's.
Result<int> RecordEmulated(const EmulationPlan& plan, const record::RecordOptions& opts,
                           const std::filesystem::path& trace_dir, record::Control& control,
                           const record::EventFn& events);
// Without a driver (tests, benchmarks): nothing asks it for snapshots.
Result<int> RecordEmulated(const record::RecordOptions& opts,
                           const std::filesystem::path& trace_dir);

// The intel_pt event --timer-resolution would open on the virtual CPU the
// emulator presents (a Kaby Lake: psb_cyc, mtc, mtc_periods 0,3,6,9, every
// cyc_thresh, psb_periods 0-5): the same presets, defaults and errors as on
// hardware (perf::BuildPtAttr). Its timing bits are what the plugin writes.
Result<perf::PtAttr> EmulatedPtAttr(const record::TimerResolution& timer);

// Where the pieces are (exposed for tests and the benchmark).
// qemu-x86_64: $PTSNAP_QEMU, else PATH. Error: one line naming the fix.
Result<std::filesystem::path> FindQemu();
// The plugin: $PTSNAP_QEMU_PLUGIN, else next to the running binary, else the
// build tree's copy (PTSNAP_QEMU_PLUGIN_BUILD_PATH, set by meson).
Result<std::filesystem::path> FindPlugin();
// A function symbol's link-time address (.symtab, then .dynsym); the plugin
// adds the load bias of a PIE at run time.
Result<uint64_t> ResolveSymbol(const std::filesystem::path& elf, const std::string& name);
// As ResolveSymbol, with the function's size (st_size).
struct FunctionSymbol {
  uint64_t addr = 0, size = 0;
};
Result<FunctionSymbol> ResolveFunction(const std::filesystem::path& elf, const std::string& name);

}  // namespace ptsnap::emulate
