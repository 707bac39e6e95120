// The whole decode: trace directory -> libipt -> call stacks -> a file.
// Shared by `ptsnap decode`, `run`/`attach` (after recording) and the
// benchmark. Streams through the output: memory does not grow with the
// trace's length.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "decode/pt_decoder.h"
#include "model/call_stack.h"
#include "output/summary.h"
#include "pipeline/thin_sink.h"
#include "ptsnap/result.h"
#include "trace/decode_verdict.h"
#include "trace/manifest.h"

namespace ptsnap::pipeline {

// Above this many bytes (before compression) an FXT or JSON file is past
// what ui.perfetto.dev loads comfortably: magic-trace documents that the
// viewer "may fail to load traces larger than 100M" of the same kind of
// data, and the UI's in-browser (WASM) trace processor needs 2-4x the file
// in memory out of about 2 GB (Perfetto's docs/visualization/
// large-traces.md), with load failures reported from 285 MB up.
inline constexpr uint64_t kViewerComfortBytes = 100'000'000;

struct DecodeOptions {
  std::filesystem::path output;  // the file to write; "" with `sink`: none
  std::string format;            // "fxt", "json", "events"; "" = from output's suffix, else fxt
  // Also receives every process, thread and slice (the public API's
  // DecodeListener), and Finish() after the last.
  model::SliceSink* sink = nullptr;
  uint32_t snapshot = 0;  // only this snapshot's streams; 0: all
  size_t top = 5;         // entries of top_total and top_self
  // Called now and then with (PT bytes decoded, total PT bytes).
  std::function<void(uint64_t, uint64_t)> progress;
  // Thins what goes to the output file (not `sink`, not the summary):
  // --max-depth, --min-duration (thin_sink.h).
  ThinOptions thin;
  // --decoder: ptsnap's own flow decoder or libipt's (the same events;
  // docs/decoding.md, "Decoders").
  decode::PtDecoder::Engine decoder = decode::PtDecoder::Engine::kOurs;
  // Inlined calls as frames where DWARF has them (--no-inline: false;
  // model::CallStackModel::SetInlineFrames).
  bool inline_frames = true;
  // --debug-dir: more folders of separate debug files (DIR/.build-id/xx/
  // yyyy.debug, DIR/<debuglink>), searched before /usr/lib/debug.
  std::vector<std::filesystem::path> debug_dirs;
  // Called once, while the file is being written, when an FXT or JSON
  // output passes `viewer_comfort_bytes` before compression, with the
  // warning line (ViewerSizeWarning's, said of a file still growing) and
  // the bytes written so far, so that a user watching a long decode can
  // stop it. Tests lower the size.
  std::function<void(const std::string& warning, uint64_t bytes)> on_viewer_size;
  uint64_t viewer_comfort_bytes = kViewerComfortBytes;
  // -j: threads. 0: one per core (DefaultJobs()). From 2 on, one more
  // thread, where it was measured to gain (docs/decoding.md, "Parallel
  // decode"): zlib's deflate for a .gz file (OutputFile; from 3 on, in
  // blocks on jobs - 1 threads: other compressed bytes), the file's
  // writer for .json (WriterThread), else reading and decoding the streams
  // ahead of the model (StreamFeed); the output is the same as with 1. 1
  // here (the CLI's decode, run and attach pass 0): a library caller
  // chooses its threads.
  unsigned jobs = 1;
};

struct DecodeReport {
  std::filesystem::path output;
  std::string format;
  trace::Source source = trace::Source::kHardware;  // the manifest's: which clock the times are
  // The manifest's, for source kEmulated: whether syscalls' wall time is in it.
  trace::VirtualClock virtual_clock = trace::VirtualClock::kInstructions;
  // Coverage: whether a decoded stream's ring had wrapped (what ran before
  // its oldest bytes is gone), and the time of the recording's first
  // sideband record, where what was recorded began (UINT64_MAX: none).
  bool wrapped = false;
  uint64_t recorded_from_ns = UINT64_MAX;
  uint64_t first_ns = 0, last_ns = 0;  // time span of the slices
  uint64_t thread_spans_ns = 0;        // each thread's own span, added up
  size_t threads = 0;
  uint64_t slices = 0;
  std::vector<output::FunctionTime> top_total, top_self;
  // Marks on the timeline, and each thread's last ({tid, text}).
  uint64_t marks = 0;
  std::vector<std::pair<int32_t, std::string>> last_marks;
  decode::DecodeStats decode;
  model::ModelStats model;
  uint64_t lost_records = 0;   // sideband PERF_RECORD_LOST
  uint64_t aux_truncated = 0;  // AUX records with TRUNCATED
  uint64_t lost_bytes = 0;     // PT bytes dropped (full mode)
  uint64_t sideband_torn = 0;  // bytes of a torn sideband tail
  uint64_t streams = 0, missing_streams = 0;
  // Snapshot mode: events of a thread at or before the time an earlier
  // snapshot of it already covered (the AUX ring is not cleared between
  // snapshots), skipped so that stretch is not shown twice.
  uint64_t overlap_events_skipped = 0;
  // Snapshot mode: times a thread's snapshot repeated none of its earlier
  // one (the ring wrapped in between): an untraced gap on its timeline.
  uint64_t snapshot_gaps = 0;
  // Sampled traces (manifest source "sampled"): stack samples, not PT
  // (docs/decoding.md, "Sampled traces").
  struct Sampled {
    bool sampled = false;
    std::string callgraph;         // "fp", "dwarf", "lbr"
    std::string event;             // "cpu-clock", ...
    uint64_t period_ns = 0;        // one sample per this: each span edge is known to within it
    bool period_measured = false;  // from the samples' spacing (no clock period in the manifest)
    uint64_t samples = 0;          // samples read
    uint64_t unwound = 0;          // stacks found to their outermost frame
    uint64_t truncated = 0;        // stacks cut short (unwind error, stack copy or depth cap)
    uint64_t bad_records = 0;      // sample records whose fields did not fit (skipped)
    uint64_t torn_bytes = 0;       // partial or corrupt stream tails
    uint64_t gaps = 0;             // a thread not sampled for over 10 periods: its frames ended
    // Callgraph fp (decode/fp_mend.h): whether the samples carry the user
    // registers and stack copy the mend reads (recordings before it do not),
    // the stacks whose missing caller was inserted, and those whose user IP
    // could not be checked (no CFI there, or the return address outside the
    // stack copy). Stacks where %rbp held the sampled frame count in neither.
    bool fp_checked = false;
    uint64_t fp_mended = 0;
    uint64_t fp_unmendable = 0;
    // Of fp_mended, the stacks whose inserted caller keeps no frame pointer
    // either: beyond it the walk is not to be trusted (FpMend::
    // kMendedCallerHasNoFrame).
    uint64_t fp_caller_no_frame = 0;
  } sampled;
  // PT bytes lost or undecodable (docs/errors.md, "decode"), stream by
  // stream in decoding order: the missing tail of a stream file shorter
  // than the manifest lists (`cut`), and each stretch skipped after a
  // decode error in the packets themselves up to the next sync point (PSB),
  // where decoding resumed (decode::SkippedBytes). Not bytes before a
  // stream's first PSB (a snapshot's ring starts anywhere), nor those
  // skipped after unmapped code: those are whole.
  struct Damage {
    uint32_t stream = 0;  // the manifest's id
    std::string file;     // the stream's file, relative to the trace directory
    uint64_t offset = 0;  // of the first byte lost, in the stream
    uint64_t bytes = 0;
    bool cut = false;  // the file ends at `offset`; else skipped after a decode error
    int error = 0;     // !cut: that error's status (decode::StatusMessage)
  };
  std::vector<Damage> damage;
  [[nodiscard]] uint64_t damaged_bytes() const;
  std::vector<std::string> warnings;
  // The output file's size before compression (0: no file written).
  uint64_t output_bytes = 0;
  ThinOptions thin;        // as asked
  ThinStats thin_dropped;  // spans left out of the file by `thin`
  // Results that cannot be true (output/plausibility.h): decode says so
  // and exits 1.
  output::Implausible implausible;
};

// Errors: the directory is not a trace (no or corrupt manifest), the output
// cannot be written. Trouble inside the trace (missing stream files, bad
// sideband, decode errors) is reported in DecodeReport, not as an error.
Result<DecodeReport> DecodeTraceDir(const std::filesystem::path& trace_dir,
                                    const DecodeOptions& options);

// Fails unless `m` lists snapshot `seq` (0, "every snapshot", always passes).
Result<void> CheckSnapshotExists(const trace::Manifest& m, uint32_t seq);

// Human-readable summary (several lines, ends with how to open the file).
// With damage, a "Damaged PT" line and one line per stretch (the first
// kDamageLines of them) before the warnings.
std::string FormatReport(const DecodeReport& r);
inline constexpr size_t kDamageLines = 10;
// The damage, one line per stretch lost (the first `max` of them, then how
// many more), each "  stream N (FILE) at offset O: B bytes ...\n"; "" when
// the trace is whole.
std::string FormatDamage(const DecodeReport& r, size_t max = kDamageLines);
// The error line (without "ptsnap: error: ") for a decode whose trace was
// damaged: how many bytes in how many streams; "" when it was whole. The
// CLI prints it after the summary and exits 1 (the output was written).
std::string DamageError(const std::filesystem::path& trace_dir, const DecodeReport& r);

// What a whole decode found, for `decoded.json` beside the recording
// (trace/decode_verdict.h), which `info` reads back. `by`: "decode" or
// "report"; now and ptsnap's version are filled in.
trace::DecodeVerdict VerdictOf(const DecodeReport& r, const std::string& by);

// One line (no newline) when the output is an FXT or JSON file larger than
// kViewerComfortBytes before compression: its size, the threshold, why,
// and the flags that make it smaller. "" otherwise.
std::string ViewerSizeWarning(const DecodeReport& r);
// The same line for `output` while it is written and has passed `bytes`.
std::string ViewerSizeWarningWhileWriting(const std::filesystem::path& output,
                                          const std::string& format, uint64_t bytes,
                                          uint64_t threshold);

}  // namespace ptsnap::pipeline
