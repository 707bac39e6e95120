// What the user asked `ptsnap run` / `ptsnap attach` to record. Filled by the
// CLI (src/cli/cmd_record.cpp), consumed by the hardware recorder
// (src/record) and the emulated source (src/emulate). Plain data, no I/O.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perf/attr.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"

namespace ptsnap::record {

// --timer-resolution as parsed (perf::ParseTiming): the preset and the
// custom keys; perf::BuildPtAttr resolves it against a PMU.
using TimerResolution = perf::PtTiming;

// What becomes of the program `run` started when recording ends before it
// exits (--duration, the single snapshot of a trigger, a stop request):
// kKill: SIGTERM now (after a stop request: once it had kStopGrace to exit
// by the signal it got), SIGKILL kTermGrace later. kWait: wait for it to
// exit by itself; a stop request (Ctrl-C, SIGTERM) while waiting ends it as
// kKill does. Either way `run` ends within a second of a stop request.
// kDetach: leave it running, untraced (a self-driven source is told to stop
// recording: PtSource::Detach), and return at once; the program is started
// without PR_SET_PDEATHSIG, so it outlives ptsnap. A stop request ends it as
// kKill does.
enum class AfterRecording { kKill, kWait, kDetach };
inline constexpr std::chrono::milliseconds kStopGrace{400};
inline constexpr std::chrono::milliseconds kTermGrace{500};
// "kill", "wait", "detach"; nullopt for anything else.
std::optional<AfterRecording> AfterRecordingFrom(std::string_view s);

struct RecordOptions {
  std::vector<std::string> command;  // run: argv
  std::vector<pid_t> pids;           // attach (with all_cpus: the trigger's process)
  // System-wide per-CPU mode (-a, --cpu): one PT event per CPU for every
  // task on it. `cpus` empty = every online CPU.
  bool all_cpus = false;
  std::vector<int> cpus;
  std::filesystem::path output;     // decoded output; "" = trace.fxt.gz
  std::filesystem::path trace_dir;  // raw recording; "" = beside output
  // An existing trace_dir is moved aside to .old, not refused (the
  // directory the CLI names beside -o's file; ptsnap::RecordingOptions).
  bool move_aside_existing = false;
  std::string trigger;  // "", symbol, "addr:HEX", or "." (stop indicator)
  // --slower-than (with a symbol --trigger): the trigger is a call of that
  // function returning after at least this many ns (perf clock; virtual ns
  // = retired instructions under --emulate). 0: a plain trigger.
  uint64_t slower_than_ns = 0;
  // --filter: address filters in perf's syntax (record/addr_filter.h), ""
  // for none; resolved against the program's files when the recording is
  // planned.
  std::string filter;
  // --only-in FUNC: Intel PT runs only while FUNC runs (everything it
  // calls included) and is paused the rest of the time: Linux 6.13+'s AUX
  // pause/resume (an entry probe resumes, a return probe pauses; the PT
  // event opens paused), or, on older kernels, `--filter FUNC` with a
  // note. Under --emulate the plugin does the same. "" for none.
  std::string only_in;
  bool multi_snapshot = false;
  bool multi_thread = false;
  bool full_execution = false;
  uint64_t snapshot_size = 0;                // bytes; 0 = the probe's default
  trace::Scope scope = trace::Scope::kUser;  // --trace-include-kernel, --trace-kernel-only
  TimerResolution timer;
  std::optional<std::chrono::milliseconds> duration;
  bool copy_binaries = false;
  // --ptw: the intel_pt event records PTWRITE (its `ptw` and `fup_on_ptw`
  // terms; needs caps/ptwrite), and the program `run` starts gets
  // PTSNAP_PTWRITE=1, so ptsnap_mark() (<ptsnap/mark.h>) uses the
  // instruction. Off by default: marks then use their emulated encoding,
  // which every PT CPU and --emulate record. Hardware only.
  bool ptw = false;
  // --pwr-evt: the intel_pt event records power events (its `pwr_evt` term;
  // needs caps/power_event_trace): PWRE/PWRX/MWAIT packets, which the
  // decode shows as "[C-state Cn]" frames. Off by default. Hardware only.
  bool pwr_evt = false;
  bool emulate = false;
  // --emulate-waits (with --emulate): each syscall's wall time is added to
  // its thread's virtual clock, so sleeps, I/O and waits show on the
  // timeline (docs/emulation.md, "Waits"); instructions stay 1 ns each.
  bool emulate_waits = false;
  // --sampling (magic-trace's -sampling): stack samples through
  // perf_event_open instead of PT, for hosts without Intel PT
  // (docs/trace-format.md, source "sampled").
  bool sampling = false;
  // --callgraph-mode: "fp", "dwarf", "lbr"; "" = the default rule (lbr
  // where the PMU has it, else dwarf, as magic-trace chooses).
  std::string callgraph_mode;
  bool no_decode = false;
  // Sent to the program `run` started when a stop request (not its exit)
  // ends the recording; 0 sends nothing and waits for it to exit. The CLI
  // leaves it 0 (Ctrl-C on the terminal reached the program already); the
  // library API sends SIGINT.
  int stop_signal = 0;
  // --after: what becomes of the program `run` started when recording ends
  // before it exits (docs/recording.md, "When recording ends first").
  // Internal default kWait (the recorder's tests and benchmarks let the
  // program finish); the CLI and the public API default to kKill.
  AfterRecording after = AfterRecording::kWait;
};

// "4M", "256K", "1G", "65536", "512KiB" (binary units; B/KB/KiB all mean
// powers of 1024). Errors name the text and the accepted forms.
Result<uint64_t> ParseSize(std::string_view text);

// --slower-than's durations: a decimal number and a unit, "2ms", "500us",
// "1.5ms", "800ns", "2s" (also "µs"), at least 1 ns and at most a day, in ns
// (fractions of a ns round to the nearest). Errors name the text and the
// accepted forms. Pure.
Result<uint64_t> ParseDuration(std::string_view text);

// --duration's (and magic-trace's -duration's) text: a duration as
// ParseDuration takes it, or a bare number of seconds ("10", "2.5"), more
// than 0, rounded up to whole milliseconds ("1ns" is 1 ms). Both parse with
// base::ParseDurationNs, ptsnap's one duration parser; the error names the
// text and examples. Pure.
Result<std::chrono::milliseconds> ParseRecordingDuration(std::string_view text);

// The rate limit of --slower-than with --multi-snapshot: a thread's next
// slow call is snapshotted only when it returns at least this long after the
// thread's previous slow-call snapshot, max(threshold, 10 ms).
inline constexpr uint64_t kSlowCallMinGapNs = 10'000'000;
inline uint64_t SlowCallGapNs(uint64_t threshold_ns) {
  return threshold_ns > kSlowCallMinGapNs ? threshold_ns : kSlowCallMinGapNs;
}

// Rounds `bytes` up to a power-of-two number of 4 KiB pages (minimum one
// page), as the kernel requires for the AUX area. `*rounded` is set when the
// value changed, so the caller can warn.
uint64_t RoundToPowerOfTwoPages(uint64_t bytes, bool* rounded);

// perf's intel_pt_recording_options minimums for the AUX area: 8 KiB with
// --full-execution, 4 KiB (one page) in snapshot mode. The error names the
// size and the minimum. Pure.
Result<void> CheckAuxSize(uint64_t aux_bytes, bool full_execution);

// perf's warning for a snapshot not much larger than one PSB period
// (snapshot_bytes <= psb_period_bytes + 256): decoding starts at a PSB, so
// such a snapshot may hold little or nothing decodable. nullopt when the
// size is fine. Pure.
std::optional<std::string> PsbPeriodWarning(uint64_t snapshot_bytes, uint64_t psb_period_bytes);

// The trace directory used when --trace-dir is not given: beside the output,
// named after it ("trace.fxt.gz" -> "trace.ptsnap", "out/x.json" ->
// "out/x.ptsnap"); "trace.fxt.gz" when `output` is empty.
std::filesystem::path DefaultTraceDir(const std::filesystem::path& output);

}  // namespace ptsnap::record
