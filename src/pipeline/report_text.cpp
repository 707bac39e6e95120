// The decode summary's text (FormatReport and the lines around it: the
// damage list, the viewer-size warnings). Declared in pipeline.h.

#include <algorithm>
#include <cstdio>
#include <set>

#include "output/summary.h"
#include "pipeline/pipeline.h"

namespace ptsnap::pipeline {

using output::FormatDuration;
using output::FunctionTime;

namespace {

// "1us", "250ns", "2ms": as --min-duration takes it.
std::string FlagDuration(uint64_t ns) {
  if (ns != 0 && ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns != 0 && ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns != 0 && ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

// The first lines of a sampled trace's summary: what was decoded, how
// exact the spans are and, for frame-pointer stacks, what was mended.
std::string SampledHeader(const DecodeReport& r, uint64_t span) {
  std::string s;
  auto line = [&s](const std::string& l) { s += l + "\n"; };
  const DecodeReport::Sampled& sp = r.sampled;
  line("Decoded " + std::to_string(r.streams) + " sampled stream(s), " +
       std::to_string(sp.samples) + " stack samples (" + sp.event + ", callgraph " + sp.callgraph +
       "): " + std::to_string(r.slices) + " slices on " + std::to_string(r.threads) +
       " thread(s) over " + FormatDuration(span) + ".");
  if (sp.samples == 0 || sp.period_ns == 0) {
    // An idle or sleeping process: cpu-clock samples only what runs.
    line(
        "Sampled: no stack samples: the traced threads did not run on a CPU while they were "
        "sampled (a sleeping or blocked program gives none); sample it while it is busy.");
    return s;
  }
  line("Sampled: one sample every " + FormatDuration(sp.period_ns) +
       (sp.period_measured ? " (measured)" : "") +
       ", so each span's start and end are known to within that; stacks: " +
       std::to_string(sp.unwound) + " complete, " + std::to_string(sp.truncated) +
       " truncated; unreadable sample records: " + std::to_string(sp.bad_records) +
       ", torn bytes: " + std::to_string(sp.torn_bytes) +
       "; gaps (no sample for over 10 periods, frames ended): " + std::to_string(sp.gaps) + ".");
  if (sp.callgraph == "fp") {
    line(sp.fp_checked
             ? "Frame-pointer stacks mended (the sampled code had no frame of its own, so the "
               "kernel's walk skipped its caller; read back from the stack copy): " +
                   std::to_string(sp.fp_mended) +
                   "; not checkable (no CFI at the IP, or the "
                   "return address outside the stack copy): " +
                   std::to_string(sp.fp_unmendable) + "."
             : "Frame-pointer stacks: not checked for a skipped caller (recorded without user "
               "registers and a stack copy).");
    if (sp.fp_caller_no_frame != 0) {
      line("Of the stacks mended, " + std::to_string(sp.fp_caller_no_frame) +
           " have a caller that keeps no frame pointer either: above that caller, the "
           "kernel's walk followed a %rbp that was not a frame, and those frames are not to be "
           "trusted. Code built without frame pointers (most distributions' binaries) does "
           "this; record it with --callgraph-mode dwarf.");
    }
  }
  return s;
}

// The first lines of a PT trace's summary: what was decoded, what the trace
// kept of what ran, and what the times are.
std::string PtHeader(const DecodeReport& r, uint64_t span) {
  std::string s;
  auto line = [&s](const std::string& l) { s += l + "\n"; };
  line("Decoded " + std::to_string(r.streams) + " stream(s), " + std::to_string(r.decode.pt_bytes) +
       " bytes of PT, " + std::to_string(r.decode.instructions) +
       " instructions: " + std::to_string(r.slices) + " slices on " + std::to_string(r.threads) +
       " thread(s) over " + FormatDuration(span) + ".");
  // What the trace kept of what ran (#41: a snapshot that kept 17.45 ms
  // of a 74.9 ms run said nothing).
  if (r.wrapped && r.recorded_from_ns < r.first_ns && r.last_ns > r.recorded_from_ns) {
    // Several threads: each keeps its own ring, so the span across them can
    // hold far less of each (#41's session: "the last 11.222 ms" of a trace
    // whose two threads kept 9.5 us between them).
    const std::string held = r.threads > 1 && r.thread_spans_ns < span
                                 ? " between its first and last events, but its " +
                                       std::to_string(r.threads) +
                                       " threads' rings (one per thread) hold only " +
                                       FormatDuration(r.thread_spans_ns) + " of their time added up"
                                 : "";
    line("Coverage: the snapshot ring wrapped, so the trace holds the last " +
         FormatDuration(span) + " of the " + FormatDuration(r.last_ns - r.recorded_from_ns) +
         " recorded" + held +
         "; what ran before is gone (a bigger --snapshot-size, or --full-execution, "
         "keeps more).");
  }
  // What the times are (#41: emulated times read as real ones).
  line(r.source == trace::Source::kEmulated &&
               r.virtual_clock == trace::VirtualClock::kInstructionsAndWaits
           ? "Clock: virtual (--emulate --emulate-waits): 1 ns per instruction a thread "
             "retired plus the wall time each of its syscalls took, so sleeping, I/O and "
             "waiting show; between syscalls every time is an exact instruction count "
             "(docs/emulation.md, \"Waits\")."
       : r.source == trace::Source::kEmulated
           ? "Clock: virtual (--emulate): 1 ns per instruction a thread retired, so every time "
             "is an exact instruction count; sleeping, I/O and waiting take none, unless a "
             "thread waited for another (docs/emulation.md, \"Threads\")."
           : "Clock: the CPU's timestamp counter as the trace's timing packets give it, in "
             "perf-clock ns; between timing packets, events are placed by the instructions "
             "retired (docs/decoding.md, \"Timestamps\").");
  return s;
}

// The hottest functions by total or self time; "" when there are none.
// A sampled trace's frames are spans of samples (`unit` "spans"), not calls.
std::string HotTable(const char* title, const std::vector<FunctionTime>& v, bool self,
                     const char* unit) {
  std::string s;
  auto line = [&s](const std::string& l) { s += l + "\n"; };
  if (v.empty()) return s;
  line(title);
  for (const auto& f : v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %12s  %8llu %s  ",
                  FormatDuration(self ? f.self_ns : f.total_ns).c_str(),
                  static_cast<unsigned long long>(f.calls), unit);
    line(buf + f.name +
         (f.cut != 0 ? " (" + std::to_string(f.cut) + " cut by decode errors)" : ""));
  }
  return s;
}

// Marks, what was lost or skipped, and the thinning: one line each where
// there is something to say.
std::string CountLines(const DecodeReport& r) {
  std::string s;
  auto line = [&s](const std::string& l) { s += l + "\n"; };
  const DecodeReport::Sampled& sp = r.sampled;
  if (r.marks != 0) {
    // Which request the trace ends in (a --slower-than snapshot ends after
    // the slow call: its thread's last mark names it).
    std::string last;
    size_t shown = 0;
    for (const auto& [tid, text] : r.last_marks) {
      if (++shown > 4) {
        last += ", ...";
        break;
      }
      last += (last.empty() ? "" : ", ") + text + " (thread " + std::to_string(tid) + ")";
    }
    line("Marks: " + std::to_string(r.marks) +
         " (docs/decoding.md, \"Marks\"); each thread's last: " + last + ".");
  }
  if (sp.sampled) {
    // The kernel's PERF_RECORD_LOST counts what a full ring dropped: in a
    // sampled trace mostly samples (each copies its stack), not sideband.
    line("Lost records: " + std::to_string(r.lost_records) +
         (r.lost_records == 0
              ? "."
              : " (the kernel dropped them while a ring was full: samples, and the mmap and "
                "comm records that name code; a lost sample leaves a gap on its thread's "
                "timeline). Fewer samples per second (--timer-resolution low or sample:N) or "
                "--callgraph-mode fp (no stack copy per sample) keeps up."));
  } else {
    line("Decode errors: " + std::to_string(r.decode.errors) +
         " (unmapped code: " + std::to_string(r.decode.nomap_errors) +
         "), overflows: " + std::to_string(r.decode.overflows) + ", lost sideband records: " +
         std::to_string(r.lost_records) + ", truncated AUX: " + std::to_string(r.aux_truncated) +
         ", lost PT bytes: " + std::to_string(r.lost_bytes) +
         (r.decode.undecoded_bytes != 0 ? ", undecoded PT bytes (before a stream's first sync "
                                          "point; a snapshot's ring starts mid-packet): " +
                                              std::to_string(r.decode.undecoded_bytes)
                                        : std::string()) +
         (r.decode.tsx_aborts != 0
              ? ", aborted TSX transactions (dropped): " + std::to_string(r.decode.tsx_aborts)
              : std::string()) +
         ".");
    if (r.lost_records != 0)
      line(
          "The lost sideband records were dropped by the kernel while the data ring was full: "
          "mmap, comm or fork records may be missing, so code mapped then decodes as unmapped "
          "and a thread may go unnamed.");
  }
  if (r.decode.flow_fallbacks != 0) {
    line("Decoded with libipt: " + std::to_string(r.decode.flow_fallbacks) +
         " stream(s) with a packet or case ptsnap's own decoder does not decode "
         "(docs/decoding.md, \"Decoders\").");
  }
  if (r.overlap_events_skipped != 0) {
    line("Snapshot overlap: " + std::to_string(r.overlap_events_skipped) +
         (sp.sampled ? " samples" : " events") +
         " already shown by an earlier snapshot of the same thread were skipped" +
         (sp.sampled ? std::string(".")
                     : std::string("; the instructions counted above include them once per "
                                   "snapshot, so they exceed what the program ran.")));
  }
  if (r.snapshot_gaps != 0) {
    line("Snapshot gaps: " + std::to_string(r.snapshot_gaps) +
         " time(s) a thread's snapshot began after its previous one ended (the ring wrapped "
         "between them): not traced, marked on the timeline; a bigger --snapshot-size keeps more.");
  }
  if (r.thin.active()) {
    std::string what;
    if (r.thin.max_depth != 0)
      what += std::to_string(r.thin_dropped.too_deep) + " deeper than --max-depth " +
              std::to_string(r.thin.max_depth);
    if (r.thin.min_duration_ns != 0)
      what += (what.empty() ? "" : ", ") + std::to_string(r.thin_dropped.too_short) +
              " shorter than --min-duration " + FlagDuration(r.thin.min_duration_ns);
    line("Thinned the timeline: dropped " + what +
         " (the summary above counts every span; the file holds " +
         std::to_string(r.slices -
                        std::min(r.slices, r.thin_dropped.too_deep + r.thin_dropped.too_short)) +
         " of " + std::to_string(r.slices) + ").");
  }
  return s;
}

// The damage, the warnings, the impossible results and where the file is.
std::string TailLines(const DecodeReport& r) {
  std::string s;
  auto line = [&s](const std::string& l) { s += l + "\n"; };
  if (!r.damage.empty()) {
    std::set<uint32_t> damaged;
    for (const auto& d : r.damage) damaged.insert(d.stream);
    line("Damaged PT: " + std::to_string(r.damaged_bytes()) + " bytes lost or undecodable in " +
         std::to_string(damaged.size()) +
         " stream(s); decoding resumed at the next sync point (PSB) after each stretch, and the "
         "calls a stretch cut are marked cut (docs/decoding.md, \"Damaged streams\"):");
    s += FormatDamage(r);
  }
  size_t shown = 0;
  for (const auto& w : r.warnings) {
    if (++shown > 10) {
      line("warning: ... and " + std::to_string(r.warnings.size() - 10) + " more");
      break;
    }
    line("warning: " + w);
  }
  s += output::FormatImplausible(r.implausible);
  if (r.format == "fxt") {
    line("Wrote " + r.output.string() + ": open it at https://ui.perfetto.dev");
  } else if (r.format == "json") {
    line("Wrote " + r.output.string() +
         ": open it at https://ui.perfetto.dev (or chrome://tracing)");
  } else {
    line("Wrote " + r.output.string() + " (.events text, see docs/decoding.md).");
  }
  return s;
}

}  // namespace

std::string FormatDamage(const DecodeReport& r, size_t max) {
  std::string s;
  size_t shown = 0;
  for (const DecodeReport::Damage& d : r.damage) {
    if (shown++ == max) {
      uint64_t rest = 0;
      for (size_t i = max; i < r.damage.size(); ++i) rest += r.damage[i].bytes;
      s += "  ... and " + std::to_string(r.damage.size() - max) + " more stretches, " +
           std::to_string(rest) + " bytes\n";
      break;
    }
    s += "  stream " + std::to_string(d.stream) + " (" + d.file + ") at offset " +
         std::to_string(d.offset) + ": " + std::to_string(d.bytes) + " bytes ";
    if (d.cut) {
      s += "missing (the file ends there, " + std::to_string(d.offset + d.bytes) +
           " bytes are listed: it was cut or truncated)\n";
    } else {
      s += "undecodable (decode error: " + decode::StatusMessage(d.error) +
           "), skipped to the next sync point\n";
    }
  }
  return s;
}

std::string DamageError(const std::filesystem::path& trace_dir, const DecodeReport& r) {
  if (r.damage.empty()) return "";
  std::set<uint32_t> damaged;
  for (const auto& d : r.damage) damaged.insert(d.stream);
  return trace_dir.string() + " is damaged: " + std::to_string(r.damaged_bytes()) +
         " bytes of PT in " + std::to_string(damaged.size()) +
         " stream(s) were lost or undecodable (listed above, by stream and offset); the rest "
         "was decoded";
}

std::string FormatReport(const DecodeReport& r) {
  const uint64_t span = r.last_ns >= r.first_ns ? r.last_ns - r.first_ns : 0;
  std::string s = r.sampled.sampled ? SampledHeader(r, span) : PtHeader(r, span);
  const char* unit = r.sampled.sampled ? "spans" : "calls";
  s += HotTable("Hottest functions by total time:", r.top_total, false, unit);
  s += HotTable("Hottest functions by self time:", r.top_self, true, unit);
  s += CountLines(r);
  s += TailLines(r);
  return s;
}

namespace {

// Why a big file is a problem, and what makes it smaller.
constexpr const char* kViewerSizeWhy =
    " ui.perfetto.dev loads comfortably (its in-browser trace processor needs 2-4x the file in "
    "memory, about 2 GB at most; larger traces load slowly or fail)";
constexpr const char* kViewerSizeFix =
    "thin it with --min-duration (e.g. 1us) or --max-depth (e.g. 20), decode one --snapshot N "
    "or --split-snapshots, or open it with a native trace_processor --httpd";

std::string Megabytes(uint64_t bytes) {
  char size[64];
  std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return size;
}

std::string Megabytes0(uint64_t bytes) { return std::to_string(bytes / 1'000'000) + " MB"; }

}  // namespace

std::string ViewerSizeWarning(const DecodeReport& r) {
  if ((r.format != "fxt" && r.format != "json") || r.output_bytes <= kViewerComfortBytes) return "";
  const std::string kind = r.format == "fxt" ? "FXT" : "JSON";
  return "warning: " + r.output.string() + " holds " + Megabytes(r.output_bytes) + " of " + kind +
         " (before compression), more than the " + Megabytes0(kViewerComfortBytes) +
         kViewerSizeWhy + ": " + kViewerSizeFix;
}

std::string ViewerSizeWarningWhileWriting(const std::filesystem::path& output,
                                          const std::string& format, uint64_t bytes,
                                          uint64_t threshold) {
  const std::string kind = format == "fxt" ? "FXT" : "JSON";
  return "warning: " + output.string() + " has passed " + Megabytes(bytes) + " of " + kind +
         " (before compression) and is still growing, more than the " + Megabytes0(threshold) +
         kViewerSizeWhy +
         ": you can stop the decode (Ctrl-C; the trace directory keeps "
         "everything) and " +
         kViewerSizeFix;
}
}  // namespace ptsnap::pipeline
