// The manifest of a trace directory (manifest.json): everything a decoder
// needs besides the raw bytes. Format and versioning: docs/trace-format.md.
//
// SerializeManifest/ParseManifest are pure; ParseManifest rejects unknown
// major versions and wrong types with an error naming the field, and never
// crashes on arbitrary bytes (fuzzed in manifest_fuzzer). The same holds for
// the journal (manifest.journal: SerializeManifestChange, ApplyJournal),
// which lists what changed since manifest.json was last written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::trace {

// The version a trace is written with, and the one a trace whose streams
// use `follows` (Stream below) is written with: a reader of version 1 would
// take such a stream's file for the whole ring. Readers take both.
inline constexpr int kManifestVersion = 1;
inline constexpr int kManifestVersionFollows = 2;

// kSampled: no PT; streams hold PERF_RECORD_SAMPLE records (`Sampling`).
enum class Source { kHardware, kEmulated, kSampled };
enum class Scope { kUser, kKernel, kUserKernel };
enum class Mode { kSnapshot, kFull };
// How an emulated trace's virtual clock runs (docs/emulation.md, "Time"):
// "instructions", one ns per instruction a thread retired; or
// "instructions+waits" (run --emulate-waits), that plus the wall time each
// syscall took on its thread.
enum class VirtualClock { kInstructions, kInstructionsAndWaits };
// What a trace's times are, in a few words: the FXT/JSON metadata's and the
// report's clock ("virtual clock: 1 ns per instruction, no sleep or I/O
// time"). The run summary's Clock line says more.
std::string ClockName(Source source, VirtualClock how);
// kRecording: written at start and after each snapshot; a directory left in
// this state was cut short (crash, kill) but what it lists is complete.
enum class State { kRecording, kComplete, kInterrupted };
// Whether the kernel's text was copied for decoding: "copied", "disabled"
// (by the environment), "unavailable" (the kcore gate failed), "not-needed"
// (user scope).
enum class KcoreStatus { kNotNeeded, kCopied, kDisabled, kUnavailable };
// Why a snapshot was taken: "exit", "trigger", "stop-indicator", "signal",
// "ctrl-c", "duration", "full" (the end of a full-execution recording),
// "slow-call", "fatal-signal" (the program was killed by a signal; the
// detail names it, e.g. "SIGSEGV").
enum class SnapshotReason {
  kExit,
  kTrigger,
  kStopIndicator,
  kSignal,
  kCtrlC,
  kDuration,
  kFull,
  kSlowCall,
  kFatalSignal
};

std::string_view ToString(Source v);
std::string_view ToString(Scope v);
std::string_view ToString(Mode v);
std::string_view ToString(VirtualClock v);
std::string_view ToString(State v);
std::string_view ToString(KcoreStatus v);
std::string_view ToString(SnapshotReason v);
enum class StreamKind { kPt, kSamples };
std::string_view ToString(StreamKind v);
// The reason a manifest or the emulator's plugin spells `s`, if any.
std::optional<SnapshotReason> SnapshotReasonFrom(std::string_view s);

struct CpuId {
  std::string vendor;  // "GenuineIntel"
  uint32_t family = 0, model = 0, stepping = 0;
  uint32_t cpuid_15_eax = 0, cpuid_15_ebx = 0;  // TSC:CTC ratio; 0 when unknown
  friend bool operator==(const CpuId&, const CpuId&) = default;
};

struct PtConfig {
  uint32_t pmu_type = 0;
  uint64_t config = 0;      // attr.config as opened
  uint32_t mtc_freq = 0;    // raw mtc_period field
  uint32_t nom_freq = 0;    // max_nonturbo_ratio
  uint32_t psb_period = 0;  // raw psb_period field
  bool tsc = false, mtc = false, cyc = false, noretcomp = false;
  std::string filter;                 // address filter string, "" when none
  uint64_t addr0_a = 0, addr0_b = 0;  // ADDR0 range for libipt's SKL014 workaround; 0 when none
  friend bool operator==(const PtConfig&, const PtConfig&) = default;
};

// Perf clock <-> TSC, from perf_event_mmap_page (time_zero/mult/shift).
// ns = time_zero + quot * time_mult + ((rem * time_mult) >> time_shift),
// where quot = tsc >> time_shift, rem = tsc & ((1 << time_shift) - 1).
struct TimeConv {
  uint64_t time_zero = 0;
  uint32_t time_mult = 0;
  uint16_t time_shift = 0;
  bool cap_user_time_zero = false;
  friend bool operator==(const TimeConv&, const TimeConv&) = default;
};
uint64_t TscToPerfTime(const TimeConv& tc, uint64_t tsc);
uint64_t PerfTimeToTsc(const TimeConv& tc, uint64_t ns);

struct Snapshot {
  uint32_t seq = 0;
  SnapshotReason reason = SnapshotReason::kExit;
  std::string detail;  // e.g. the trigger symbol, the signal name
  uint64_t time = 0;   // perf clock ns when taken
  uint32_t tid = 0;    // thread that caused it, 0 when none
  // Reason kSlowCall (--slower-than): when the slow call began (perf clock
  // ns) and how long it ran; `time` is when it returned, `tid` its thread.
  // Both 0 otherwise.
  uint64_t call_begin = 0;
  uint64_t call_ns = 0;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

struct Stream {
  uint32_t id = 0;
  // kPt: raw PT bytes. kSamples: PERF_RECORD_SAMPLE records as the kernel
  // wrote them, laid out by the manifest's `sampling.sample_type`.
  StreamKind kind = StreamKind::kPt;
  std::string file;  // relative to the trace directory: "pt/<id>.pt", "samples/<id>.data"
  int32_t pid = -1, tid = -1, cpu = -1;  // tid for per-thread, cpu for per-CPU
  uint32_t snapshot = 0;                 // Snapshot::seq; full-execution streams use 0
  uint64_t size = 0;                     // bytes in file
  bool wrapped = false;  // the ring had wrapped: the start is torn, sync at the first PSB
  // Full mode: AUX bytes known to be lost (skipped by the kernel between AUX
  // records, or overwritten before ptsnap read them).
  uint64_t lost_bytes = 0;
  // Full mode: times the AUX area filled up (AUX records with TRUNCATED);
  // PT was stopped from then until ptsnap drained and re-enabled it, so the
  // trace has a gap there of unknown size.
  uint32_t truncated = 0;
  // Snapshot mode, a ring stored incrementally (the emulator's
  // --multi-snapshot): the id of the earlier stream of the same ring (same
  // pid, tid, cpu and kind) whose file's bytes this file's directly
  // continue. The snapshot's bytes are then the last `ring_bytes` bytes of
  // the chain's files concatenated (..., follows's, this one's): what a
  // stream without `follows` holds in its one file. nullopt: the file is
  // the whole ring (ring_bytes 0).
  std::optional<uint32_t> follows;
  uint64_t ring_bytes = 0;
  friend bool operator==(const Stream&, const Stream&) = default;
};

// The bytes a decoder reads for `s` (TraceReader::ReadStream): ring_bytes
// for a stream that follows another, its file's size otherwise.
inline uint64_t ViewedBytes(const Stream& s) { return s.follows ? s.ring_bytes : s.size; }

struct Binary {
  std::string path;      // as mapped
  std::string build_id;  // hex, "" when unknown
  std::string copy;      // relative path of the copy in the directory, "" when not copied
  friend bool operator==(const Binary&, const Binary&) = default;
};

struct Kcore {
  KcoreStatus status = KcoreStatus::kNotNeeded;
  std::string reason;  // why not copied
  std::string dir;     // "kcore" when copied: kallsyms, modules, kcore inside
  friend bool operator==(const Kcore&, const Kcore&) = default;
};

// A sampled recording's event (source "sampled"): what was opened, so a
// decoder can parse the samples and say what they can tell.
struct Sampling {
  std::string event;         // "cpu-clock", "task-clock", "cycles"
  uint32_t type = 0;         // perf_event_attr.type
  uint64_t config = 0;       // perf_event_attr.config
  uint64_t sample_type = 0;  // perf_event_attr.sample_type: the records' layout
  uint64_t frequency = 0;    // Hz asked for (attr.freq); 0 when `period` is used
  uint64_t period = 0;       // fixed sample period (ns for clocks), 0 with a frequency
  std::string callgraph;     // "fp", "dwarf", "lbr"
  uint64_t regs_user = 0;    // sample_regs_user (dwarf)
  uint32_t stack_user = 0;   // sample_stack_user bytes (dwarf)
  uint32_t max_stack = 0;    // sample_max_stack (fp, lbr); 0 = the kernel's default
  friend bool operator==(const Sampling&, const Sampling&) = default;
};

struct Manifest {
  int version = kManifestVersion;
  Source source = Source::kHardware;
  State state = State::kRecording;
  // Why an interrupted recording stopped when ptsnap failed (a write error,
  // a disk full): "writing a PT stream failed: No space left on device".
  // Empty otherwise.
  std::string stop_error;
  std::string ptsnap_version;
  uint64_t created_unix_ns = 0;
  std::vector<std::string> command;  // run: argv; attach: empty
  std::vector<int32_t> pids;         // traced processes
  std::string kernel_release;
  std::optional<uint64_t> kernel_start;  // lowest kernel text address
  CpuId cpu;
  PtConfig pt;
  Scope scope = Scope::kUser;
  Mode mode = Mode::kSnapshot;
  uint64_t snapshot_size = 0;  // AUX bytes per stream
  TimeConv time_conv;
  std::string sideband = "sideband.data";
  std::vector<Snapshot> snapshots;
  std::vector<Stream> streams;
  uint64_t lost_records = 0;   // PERF_RECORD_LOST total
  uint64_t aux_truncated = 0;  // AUX TRUNCATED records
  Kcore kcore;
  std::vector<Binary> binaries;
  std::string emulator;  // emulated source: "qemu-x86_64 7.2 + ptsnap plugin", else ""
  // Source "emulated" only (`virtual_clock`; absent in older traces, whose
  // clock is kInstructions).
  VirtualClock virtual_clock = VirtualClock::kInstructions;
  std::optional<Sampling> sampling;  // source "sampled" only
  // The last journal line this manifest holds: manifest.journal lines with
  // a seq up to this one are already in it (docs/trace-format.md, "The
  // journal"). 0 when none.
  uint64_t journal_seq = 0;
  friend bool operator==(const Manifest&, const Manifest&) = default;
};

std::string SerializeManifest(const Manifest& m);  // pretty JSON
Result<Manifest> ParseManifest(std::string_view json);

// SerializeManifest's text in pieces, for a writer that produces the lists
// element by element without holding them (TraceWriter's compaction):
//   head + snapshot elements + ListEnd + middle + stream elements + ListEnd
//   + tail
// is SerializeManifest(m) for m with those lists. m's own lists are ignored.
struct ManifestFrame {
  std::string head;    // up to and including `"snapshots": [`
  std::string middle;  // after the snapshots list, up to and including `"streams": [`
  std::string tail;    // after the streams list, to the end
};
ManifestFrame SerializeManifestFrame(const Manifest& m);
// One list element as SerializeManifest writes it: the separator (none for
// the `first`) and the element's indented JSON object ("{" ... "}", as it
// stands in the file). ManifestElementSeparator is the separator alone.
std::string SerializeManifestElement(const Snapshot& s, bool first);
std::string SerializeManifestElement(const Stream& s, bool first);
std::string ManifestElementSeparator(bool first);
// How a list of SerializeManifest ends: "]" when it is empty, "\n  ]" otherwise.
std::string_view ManifestListEnd(bool empty);
// One element of `streams` (its JSON object text), with ParseManifest's checks.
Result<Stream> ParseManifestStream(std::string_view json);

// ---- the journal: manifest.journal -----------------------------------------

// The manifest's top-level fields other than `streams`, `snapshots` and
// `journal_seq`, each as its key and its compact JSON value, in the order
// SerializeManifest writes them. A writer compares two of these to find the
// fields that changed (lost counts, kcore, binaries, state, ...).
using ManifestFields = std::vector<std::pair<std::string, std::string>>;
ManifestFields SerializeManifestFields(const Manifest& m);

// The growing figures of a stream listed earlier (full-execution mode).
struct StreamSize {
  uint32_t id = 0;
  uint64_t size = 0;
  uint64_t lost_bytes = 0;
  uint32_t truncated = 0;
  friend bool operator==(const StreamSize&, const StreamSize&) = default;
};

// One journal line: what changed since the previous line (or manifest.json).
struct ManifestChange {
  uint64_t seq = 0;                 // one more than the previous line's
  std::vector<Snapshot> snapshots;  // taken since
  std::vector<Stream> streams;      // listed since
  std::vector<StreamSize> sizes;    // of streams listed before
  // Top-level fields that changed: key and JSON value, as
  // SerializeManifestFields gives them ("null": back to the default).
  ManifestFields set;
  [[nodiscard]] bool empty() const {
    return snapshots.empty() && streams.empty() && sizes.empty() && set.empty();
  }
};

// One compact JSON object ending in '\n'.
std::string SerializeManifestChange(const ManifestChange& c);

// One journal line (without its newline) as written: seq, snapshots,
// streams and sizes with ParseManifest's checks on each element; `set` as
// its keys and compact JSON values, unchecked (ApplyJournal checks them
// against a manifest). Lines that are not one JSON object are an error.
Result<ManifestChange> ParseManifestChange(std::string_view line);

// Replays the journal `text` onto `m` (parsed from manifest.json): each line
// whose seq is above m.journal_seq, which must then count up by one; lines at
// or below it are already in the manifest and skipped. Sets m.journal_seq to
// the last line applied. The last line is ignored when it is torn (no
// trailing newline, or not JSON): what a crash mid-append leaves. Any other
// bad line is an error "line N: ..." with the same checks as ParseManifest
// (paths inside the directory, no duplicate stream ids or files, types and
// ranges); on error `m` may hold part of the journal.
Result<void> ApplyJournal(Manifest& m, std::string_view text);

}  // namespace ptsnap::trace
