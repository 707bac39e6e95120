#include "api/option_table.h"

#include <signal.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "base/string_util.h"
#include "record/options.h"
#include "sys/cpus.h"

namespace ptsnap::api {
namespace {

constexpr std::string_view kBools = "1, 0, true, false, yes, no";

Error BadValue(std::string_view value, std::string_view accepted) {
  return Error("bad value \"" + std::string(value) + "\" (accepted: " + std::string(accepted) +
               ")");
}

std::optional<bool> ParseBool(std::string_view v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

// A non-negative decimal (base::ParseUint), within int64_t.
std::optional<int64_t> ParseInt(std::string_view v) {
  auto n = base::ParseUint(v);
  if (!n || *n > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(*n);
}

std::optional<int> ParseSignal(std::string_view v) {
  if (v == "none") return 0;
  if (auto n = ParseInt(v); n && *n < 65) return static_cast<int>(*n);
  if (v.substr(0, 3) == "SIG") v.remove_prefix(3);
  static constexpr std::pair<std::string_view, int> kNames[] = {
      {"INT", SIGINT},   {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"HUP", SIGHUP},
      {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
  };
  for (const auto& [name, sig] : kNames)
    if (v == name) return sig;
  return std::nullopt;
}

template <bool RecordingOptions::*kField>
Result<void> SetBool(RecordingOptions& o, std::string_view v) {
  auto b = ParseBool(v);
  if (!b) return BadValue(v, kBools);
  o.*kField = *b;
  return Ok();
}

// Checked when the recording is created (Recording::Create), not here.
template <std::string RecordingOptions::*kField>
Result<void> SetText(RecordingOptions& o, std::string_view v) {
  o.*kField = std::string(v);
  return Ok();
}

// "emulate" and "sampling" each choose the collection; one set while the
// other is on is refused rather than silently replacing it.
template <Collection kMine, Collection kOther>
Result<void> SetCollection(RecordingOptions& o, std::string_view v) {
  auto on = ParseBool(v);
  if (!on) return BadValue(v, kBools);
  if (*on && o.collection == kOther)
    return Error(std::string("\"") + (kOther == Collection::kSampled ? "sampling" : "emulate") +
                 "\" is set: sampling and emulate are two collection modes; choose one");
  if (*on) {
    o.collection = kMine;
  } else if (o.collection == kMine) {
    o.collection = Collection::kHardware;
  }
  return Ok();
}

Result<void> SetTraceDir(RecordingOptions& o, std::string_view v) {
  o.trace_dir = std::string(v);
  return Ok();
}

Result<void> SetSlowerThan(RecordingOptions& o, std::string_view v) {
  auto ns = record::ParseDuration(v);
  if (!ns) return ns.error();
  o.slower_than_ns = *ns;
  return Ok();
}

Result<void> SetSnapshotSize(RecordingOptions& o, std::string_view v) {
  auto size = record::ParseSize(v);
  if (!size) return size.error();
  o.snapshot_size = *size;
  return Ok();
}

Result<void> SetTimerResolution(RecordingOptions& o, std::string_view v) {
  // Checked against the PMU when the recording is created.
  if (v.empty()) return BadValue(v, "low, normal, high, custom:KEY=VAL,...");
  o.timer_resolution = std::string(v);
  return Ok();
}

Result<void> SetScope(RecordingOptions& o, std::string_view v) {
  if (v == "user") {
    o.scope = Scope::kUser;
  } else if (v == "kernel") {
    o.scope = Scope::kKernel;
  } else if (v == "both") {
    o.scope = Scope::kUserAndKernel;
  } else {
    return BadValue(v, "user, kernel, both");
  }
  return Ok();
}

Result<void> SetDurationMs(RecordingOptions& o, std::string_view v) {
  auto n = ParseInt(v);
  if (!n) return BadValue(v, "a number of milliseconds, 0 for no limit");
  o.duration = std::chrono::milliseconds(*n);
  return Ok();
}

Result<void> SetAfter(RecordingOptions& o, std::string_view v) {
  if (v == "kill") {
    o.after = AfterRecording::kKill;
  } else if (v == "wait") {
    o.after = AfterRecording::kWait;
  } else if (v == "detach") {
    o.after = AfterRecording::kDetach;
  } else {
    return BadValue(v, "kill, wait, detach");
  }
  return Ok();
}

Result<void> SetPid(RecordingOptions& o, std::string_view v) {
  auto n = ParseInt(v);
  if (!n || *n <= 0 || *n > INT32_MAX) return BadValue(v, "a process id");
  o.pids.push_back(static_cast<int>(*n));
  return Ok();
}

// -C's CPU list; like -C, it implies all-cpus.
Result<void> SetCpus(RecordingOptions& o, std::string_view v) {
  auto cpus = sys::ParseCpuList(v);
  if (!cpus || cpus->empty()) return BadValue(v, "a CPU list such as 0-3,7");
  o.cpus = *cpus;
  o.all_cpus = true;
  return Ok();
}

Result<void> SetStopSignal(RecordingOptions& o, std::string_view v) {
  auto sig = ParseSignal(v);
  if (!sig) return BadValue(v, "a signal number or name (SIGINT, TERM, ...), 0 or none");
  o.stop_signal = *sig;
  return Ok();
}

using B = OptionValue;
using C = CliForm;
using R = RecordingOptions;

// The order is `ptsnap run --help`'s. A kOwn row stands where the CLI
// registers its own flags for it (cli/cmd_record.cpp).
constexpr OptionSpec kTable[] = {
    {.key = "trace-dir",
     .value = B::kText,
     .set = SetTraceDir,
     .cli = C::kFlag,
     .help = "Where the raw recording is kept; must not exist. Default: beside the output "
             "(trace.ptsnap/ for trace.fxt.gz), an earlier one moved to trace.ptsnap.old/",
     .magic_trace = {"-trace-dir", "-working-directory"},
     .example = "/tmp/x"},
    {.key = "trigger",
     .value = B::kText,
     .set = SetText<&R::trigger>,
     .cli = C::kFlag,
     .help = "Snapshot when this runs: a function of the program or, when it has none of "
             "that name, of the first shared library it links that has (malloc, "
             "libc.so.6:malloc; one it only dlopens by path: /path/lib.so:NAME; a native `run` "
             "arms it as an entry uprobe, which "
             "needs root), named as `ptsnap report` shows it ('risky(int)'), without "
             "parameters (risky: every overload), mangled (_Z5riskyi), as FILE:NAME or as a "
             "glob ('*parse*'), at most 4 functions; "
             "addr:HEX; '.' for the stop indicator (ptsnap_take_snapshot / "
             "magic_trace_stop_indicator); '?' to pick from the program's functions (fzf "
             "on a terminal, else a numbered list)",
     .magic_trace = {"-trigger"},
     .example = "main"},
    {.key = "slower-than",
     .value = B::kText,
     .set = SetSlowerThan,
     .cli = C::kFlag,
     .help = "With --trigger FUNC (one function): snapshot when a call of FUNC returns after "
             "running at least this long, e.g. 2ms, 500us, 1.5ms, 800ns (entry and return "
             "probes; under --emulate, virtual time: 1 ns per instruction). With "
             "--multi-snapshot every such call, at most one per thread every max(DURATION, "
             "10ms)",
     .example = "2ms"},
    {.key = "filter",
     .value = B::kText,
     .set = SetText<&R::filter>,  // parsed and resolved when the recording is created
     .cli = C::kFlag,
     .help = "Trace only inside these address ranges (Intel PT address filters, perf's "
             "syntax): a function of the program (--filter work_a), or 'filter FUNC [@ "
             "FILE]', 'tracestop FUNC', 'filter 0xOFFSET/SIZE @ FILE', several separated by "
             "commas; at most nr_addr_filters ranges (2 under --emulate). FUNC as --trigger "
             "takes it (risky(int), risky, _Z5riskyi, a glob); FUNC#N picks one of several",
     .example = "filter main, tracestop f"},
    {.key = "only-in",
     .value = B::kText,
     .set = SetText<&R::only_in>,  // looked up when the recording is created
     .cli = C::kFlag,
     .help = "Trace only while this function runs, everything it calls included: Intel PT is "
             "paused outside it (Linux 6.13+ AUX pause/resume on its entry and return "
             "probes; older kernels: --filter FUNC, its own code only), so the ring holds "
             "many more of its calls. FUNC as --trigger takes it, naming one function",
     .example = "handle_request"},
    {.key = "multi-snapshot",
     .value = B::kBool,
     .set = SetBool<&R::multi_snapshot>,
     .cli = C::kFlag,
     .help = "Snapshot every time the trigger fires (or SIGUSR2 arrives), not only the first",
     .magic_trace = {"-multi-snapshot"}},
    {.key = "multi-thread",
     .value = B::kBool,
     .set = SetBool<&R::multi_thread>,
     .cli = C::kFlag,
     .help = "Trace every thread, including ones created later (default: the main thread; "
             "--emulate always traces every thread)",
     .magic_trace = {"-multi-thread"}},
    {.key = "full-execution",
     .value = B::kBool,
     .set = SetBool<&R::full_execution>,
     .cli = C::kFlag,
     .help = "Record everything instead of a ring buffer, streamed to the trace directory as "
             "it is drained (hundreds of MB/s)",
     .magic_trace = {"-full-execution"}},
    {.key = "snapshot-size",
     .value = B::kText,
     .set = SetSnapshotSize,
     .cli = C::kFlag,
     .help = "PT ring buffer per thread (per CPU with -a), e.g. 4M (on hardware rounded up "
             "to a power of two pages, --emulate keeps it exact; default 4M as root, else "
             "128K within the mlock budget); with "
             "--sampling the samples kept per thread or CPU (default 512K)",
     .magic_trace = {"-snapshot-size"},
     .example = "4M"},
    {.key = "all-cpus",
     .value = B::kBool,
     .set = SetBool<&R::all_cpus>,
     .cli = C::kOwn,
     .help = "-a,--all-cpus"},
    {.key = "cpu",
     .value = B::kText,
     .set = SetCpus,
     .cli = C::kOwn,
     .help = "-C,--cpu",
     .example = "0-3,7"},
    {.key = "scope",
     .value = B::kText,
     .set = SetScope,
     .cli = C::kOwn,
     .help = "--trace-include-kernel, --trace-kernel-only",
     .example = "both"},
    {.key = "timer-resolution",
     .value = B::kText,
     .set = SetTimerResolution,
     .cli = C::kFlag,
     .help = "low | normal | high | custom:KEY=VAL,... (keys cyc, cyc_thresh, mtc, "
             "mtc_period, noretcomp, psb_period); default normal. With --sampling: low 1000, "
             "normal 10000, high the kernel's maximum samples per second, or sample:N",
     .cli_default = "normal",
     .magic_trace = {"-timer-resolution"},
     .example = "high"},
    {.key = "duration-ms",
     .value = B::kText,
     .set = SetDurationMs,
     .cli = C::kOwn,
     .help = "--duration",
     .example = "1500"},
    {.key = "after",
     .value = B::kText,
     .set = SetAfter,
     .cli = C::kFlag,
     .help = "run: what becomes of CMD when recording ends before it exits (--duration, the "
             "trigger's single snapshot): kill (SIGTERM, then SIGKILL 0.5 s later; ptsnap "
             "exits with its status), wait (for its exit; Ctrl-C or SIGTERM ends it as "
             "kill does) or detach (leave it running, untraced; ptsnap exits with 0)",
     .cli_default = "kill",
     .example = "wait"},
    {.key = "copy-binaries",
     .value = B::kBool,
     .set = SetBool<&R::copy_binaries>,
     .cli = C::kFlag,
     .help = "Copy the mapped binaries into the trace dir",
     .magic_trace = {"-copy-binaries"}},
    {.key = "ptw",
     .value = B::kBool,
     .set = SetBool<&R::ptw>,
     .cli = C::kFlag,
     .help = "Record PTWRITE for ptsnap_mark() (<ptsnap/mark.h>): sets the intel_pt event's "
             "ptw and fup_on_ptw terms and, for run, PTSNAP_PTWRITE=1 in CMD's environment. "
             "Needs a CPU with PTWRITE (caps/ptwrite); not with --emulate or --sampling. "
             "Default off: marks then use their emulated encoding, which every PT CPU and "
             "--emulate record"},
    {.key = "pwr-evt",
     .value = B::kBool,
     .set = SetBool<&R::pwr_evt>,
     .cli = C::kFlag,
     .help = "Record power events: sets the intel_pt event's pwr_evt term, so PWRE/PWRX/MWAIT "
             "packets show as '[C-state Cn]' frames on the track of the thread or CPU that "
             "went idle (the '[core clock MHz]' counter from CBR packets is always on). Needs "
             "a CPU with Power Event Trace (caps/power_event_trace); not with --emulate or "
             "--sampling. Default off"},
    {.key = "emulate",
     .value = B::kBool,
     .set = SetCollection<Collection::kEmulated, Collection::kSampled>,
     .cli = C::kFlag,
     .help = "Record under the PT emulator (qemu-user) instead of hardware; user space only",
     .magic_trace = {"-emulate"}},
    {.key = "emulate-waits",
     .value = B::kBool,
     .set = SetBool<&R::emulate_waits>,
     .cli = C::kFlag,
     .help = "With --emulate: add to a thread's virtual clock the wall time each of its "
             "syscalls took (sleep, I/O, futex waits), so waits show on the timeline; "
             "instructions still take 1 ns each, and the trace says which clock it used. "
             "Costs two clock reads per syscall; times then vary from run to run"},
    {.key = "sampling",
     .value = B::kBool,
     .set = SetCollection<Collection::kSampled, Collection::kEmulated>,
     .cli = C::kFlag,
     .help = "Take stack samples (perf_event_open: cycles, or cpu-clock without a hardware "
             "PMU) instead of Intel PT, for hosts without PT; statistical: short calls are "
             "missed. attach picks it by itself where there is no Intel PT",
     .magic_trace = {"-sampling"}},
    {.key = "callgraph-mode",
     .value = B::kText,
     .set = SetText<&R::callgraph_mode>,  // checked against the collection at create
     .cli = C::kFlag,
     .help = "With --sampling, how call stacks are taken: fp (frame pointers), dwarf (a copy "
             "of the user stack, unwound later), lbr (last branch records; hardware only), "
             "lbr-no-stitch (as lbr). Default: lbr where the CPU has it, else dwarf",
     .magic_trace = {"-callgraph-mode"},
     .example = "fp"},
    {.key = "pid",
     .value = B::kText,
     .set = SetPid,
     .cli = C::kOwn,
     .help = "-p,--pid",
     .example = "1"},
    {.key = "stop-signal",
     .value = B::kText,
     .set = SetStopSignal,
     .cli = C::kNone,
     .help = "the CLI sends nothing: Ctrl-C on the terminal reached the program already",
     .example = "SIGTERM"},
};

}  // namespace

std::span<const OptionSpec> RecordingOptionTable() { return kTable; }

const OptionSpec* FindRecordingOption(std::string_view key) {
  for (const OptionSpec& spec : kTable)
    if (spec.key == key) return &spec;
  return nullptr;
}

std::string RecordingOptionKeys() {
  std::string keys;
  for (const OptionSpec& spec : kTable) {
    if (!keys.empty()) keys += ", ";
    keys += spec.key;
  }
  return keys;
}

namespace {

Error Expected(std::string_view value, std::string_view expected) {
  return Error("bad value \"" + std::string(value) + "\" (expected " + std::string(expected) + ")");
}

Result<void> SetDecoder(DecodeOptions& o, std::string_view v) {
  if (v == "ours") {
    o.decoder = PtDecoderKind::kOurs;
  } else if (v == "libipt") {
    o.decoder = PtDecoderKind::kLibipt;
  } else {
    return Expected(v, "ours or libipt");
  }
  return Ok();
}

Result<void> SetMaxDepth(DecodeOptions& o, std::string_view v) {
  auto n = base::ParseUint(v);
  if (!n || *n > 1'000'000) return Expected(v, "a number of frames, 0 to 1000000");
  o.max_depth = static_cast<size_t>(*n);
  return Ok();
}

Result<void> SetMinDuration(DecodeOptions& o, std::string_view v) {
  auto ns = v == "0" ? std::optional<uint64_t>(0) : base::ParseDurationNs(v);
  if (!ns) return Expected(v, "a duration such as 1us or 0.5ms");
  o.min_duration_ns = *ns;
  return Ok();
}

Result<void> SetNoInline(DecodeOptions& o, std::string_view v) {
  if (v != "true" && v != "false") return Expected(v, "true or false");
  o.inline_frames = v == "false";
  return Ok();
}

// Repeatable, as the flag: each call adds a folder.
Result<void> AddDebugDir(DecodeOptions& o, std::string_view v) {
  if (v.empty()) return Expected(v, "a folder of separate debug files");
  o.debug_dirs.emplace_back(v);
  return Ok();
}

constexpr DecodeOptionSpec kDecodeTable[] = {
    {"decoder", SetDecoder, "libipt"},       {"max-depth", SetMaxDepth, "20"},
    {"min-duration", SetMinDuration, "1us"}, {"no-inline", SetNoInline, "true"},
    {"debug-dir", AddDebugDir, "./dbg"},
};

}  // namespace

std::span<const DecodeOptionSpec> DecodeOptionTable() { return kDecodeTable; }

const DecodeOptionSpec* FindDecodeOption(std::string_view key) {
  for (const DecodeOptionSpec& spec : kDecodeTable)
    if (spec.key == key) return &spec;
  return nullptr;
}

std::string DecodeOptionKeys() {
  std::string keys;
  for (const DecodeOptionSpec& spec : kDecodeTable) {
    if (!keys.empty()) keys += ", ";
    keys += spec.key;
  }
  return keys;
}

}  // namespace ptsnap::api
