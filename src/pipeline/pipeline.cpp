#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/check.h"
#include "base/string_util.h"
#include "base/version.h"
#include "output/fxt_writer.h"
#include "output/output_file.h"
#include "output/text_writers.h"
#include "pipeline/parallel.h"
#include "pipeline/sampled.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// The writers and readers this module drives.
using namespace ::ptsnap::output;

namespace {

// Writes one of output::kOutputFormats (ChooseOutputFormat picked it); trigger
// hits go to their own track.
class Writer {
 public:
  static std::unique_ptr<Writer> Make(const std::string& format, OutputFile* out) {
    auto w = std::make_unique<Writer>();
    if (format == "json") {
      w->json_ = std::make_unique<JsonWriter>(out);
      w->sink_ = w->json_.get();
    } else if (format == "events") {
      w->events_ = std::make_unique<EventsWriter>(out);
      w->sink_ = w->events_.get();
    } else {
      PTSNAP_CHECK(format == "fxt") << "no writer for format " << format;
      w->fxt_ = std::make_unique<FxtWriter>(out);
      w->sink_ = w->fxt_.get();
    }
    return w;
  }
  model::SliceSink* sink() { return sink_; }
  // .events stays as it is (golden files); FXT and JSON get file/line args.
  void SetSourceLookup(const SourceLookup& lookup) {
    if (fxt_) fxt_->SetSourceLookup(lookup);
    if (json_) json_->SetSourceLookup(lookup);
  }
  // What the times are (the summary's Clock line, shorter), in the file's
  // metadata and, for a virtual clock, its process names (#41).
  void SetClock(trace::Source source, trace::VirtualClock how) {
    const bool virtual_clock = source == trace::Source::kEmulated;
    const bool waits = how == trace::VirtualClock::kInstructionsAndWaits;
    const std::string clock =
        virtual_clock && waits ? "virtual clock: 1 ns per instruction plus wall time blocked in "
                                 "syscalls"
        : virtual_clock        ? "virtual clock: 1 ns per instruction, no sleep or I/O time"
        : source == trace::Source::kSampled
            ? "sampled: perf-clock ns, each edge within one sampling period"
            : "perf-clock ns from the CPU's timestamp counter";
    if (fxt_ && virtual_clock) fxt_->SetClockInNames(clock);
    if (json_) json_->SetClock(clock, virtual_clock);
  }
  // The slice kinds whose source line the writer looks up (bit 1 << kind):
  // FXT puts it on a frame's begin, JSON on its complete event (at the end).
  [[nodiscard]] unsigned LookupKinds() const {
    const unsigned complete = 1u << model::Slice::kComplete;
    if (fxt_) return complete | 1u << model::Slice::kBegin;
    if (json_) return complete | 1u << model::Slice::kEnd;
    return 0;
  }
  void Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name) {
    if (fxt_) fxt_->Instant(pid, tid, ts, name);
    if (json_) json_->Instant(pid, tid, ts, name);
    if (events_) events_->Instant(pid, tid, ts, name);
  }

 private:
  std::unique_ptr<FxtWriter> fxt_;
  std::unique_ptr<JsonWriter> json_;
  std::unique_ptr<EventsWriter> events_;
  model::SliceSink* sink_ = nullptr;
};

// Koids for the trigger track (output/fxt_writer.h).
constexpr int32_t kTriggerPid = kTriggerTrackPid;
constexpr int32_t kTriggerTid = kTriggerTrackTid;

using base::Join;

// "1us", "250ns", "2ms": as --min-duration takes it.
std::string FlagDuration(uint64_t ns) {
  if (ns != 0 && ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns != 0 && ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns != 0 && ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

// A perf-clock time as seconds with nanoseconds: "4711.000123456 s".
std::string PerfClockTime(uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu.%09llu s",
                static_cast<unsigned long long>(ns / 1'000'000'000),
                static_cast<unsigned long long>(ns % 1'000'000'000));
  return buf;
}

}  // namespace

Result<DecodeReport> DecodeTraceDir(const std::filesystem::path& trace_dir,
                                    const DecodeOptions& options) {
  PTSNAP_ASSIGN_OR_RETURN(trace::TraceReader reader, trace::TraceReader::Open(trace_dir));
  const trace::Manifest& m = reader.manifest();
  DecodeReport report;
  report.output = options.output;
  const bool write_file = !options.output.empty() || options.sink == nullptr;
  if (write_file) {
    PTSNAP_ASSIGN_OR_RETURN(report.format, ChooseOutputFormat(options.format, options.output));
  }
  PTSNAP_TRY(CheckSnapshotExists(m, options.snapshot));
  report.lost_records = m.lost_records;
  report.aux_truncated = m.aux_truncated;

  std::vector<trace::Record> records;
  if (auto sb = reader.ReadSideband(); sb) {
    records = std::move(sb->records);
    report.sideband_torn = sb->truncated_tail;
  } else {
    report.warnings.push_back("sideband unreadable, code addresses will not resolve: " +
                              sb.error().ToString());
  }
  PTSNAP_ASSIGN_OR_RETURN(auto decoder,
                          decode::PtDecoder::Create(trace_dir, m, records, options.debug_dirs));
  decoder->set_engine(options.decoder);

  // -j: from 2 on, one more thread, where it was measured to gain most
  // (docs/decoding.md, "Parallel decode"): zlib's deflate for a .gz file
  // (from 3 on, jobs - 1 of them), the writer for .json, else decoding
  // (parallel.h).
  const unsigned jobs = options.jobs == 0 ? DefaultJobs() : options.jobs;
  const bool gzip = write_file && options.output.extension() == ".gz";
  // -j 2: one thread, the same bytes as -j 1; from 3 on, jobs - 1 threads in blocks (pigz).
  const unsigned deflate_threads = !gzip || jobs < 2 ? 0 : (jobs == 2 ? 1 : jobs - 1);
  const bool writer_thread_on = jobs >= 2 && !gzip && report.format == "json";
  const bool decode_thread = jobs >= 2 && !gzip && !writer_thread_on;
  std::unique_ptr<OutputFile> out;
  std::unique_ptr<Writer> writer;
  decode::Symbolizer* symbolizer = &decoder->symbolizer();
  const SourceLookup source_lookup = [symbolizer](int32_t pid, uint64_t address) {
    return symbolizer->SourceLine(pid, address);
  };
  if (write_file) {
    PTSNAP_ASSIGN_OR_RETURN(out, OutputFile::Open(options.output, std::nullopt, deflate_threads));
    if (options.on_viewer_size && report.format != "events") {
      out->WatchSize(options.viewer_comfort_bytes, [&options, &report](uint64_t bytes) {
        options.on_viewer_size(ViewerSizeWarningWhileWriting(options.output, report.format, bytes,
                                                             options.viewer_comfort_bytes),
                               bytes);
      });
    }
    writer = Writer::Make(report.format, out.get());
    writer->SetSourceLookup(source_lookup);
    writer->SetClock(m.source, m.virtual_clock);
  }
  // The slices go to the file's writer and/or the caller's sink, and to the summary.
  SummarySink summary;
  if (m.mode == trace::Mode::kFull && !m.command.empty() && !m.pids.empty())
    summary.check().SetFullExecution(m.pids[0]);
  // The file's writer, behind the thinning filter when one is asked for.
  std::optional<ThinSink> thin;
  model::SliceSink* file = writer ? writer->sink() : nullptr;
  if (file != nullptr && options.thin.active()) file = &thin.emplace(file, options.thin);
  std::optional<WriterThread> writer_thread;
  if (file != nullptr && writer_thread_on) {
    file = &writer_thread.emplace(file, source_lookup, writer->LookupKinds());
    writer->SetSourceLookup(writer_thread->WriterLookup());
  }
  model::SliceSink* to = file != nullptr ? file : options.sink;
  std::optional<model::TeeSink> file_and_caller;
  if (file != nullptr && options.sink != nullptr) to = &file_and_caller.emplace(file, options.sink);
  model::TeeSink tee(to, &summary);
  model::CallStackModel model(&decoder->symbolizer(), &tee);
  model.SetKernelOnly(m.scope == trace::Scope::kKernel);
  model.SetInlineFrames(options.inline_frames);

  // Names: the last COMM of each thread; processes "cmdline [pid=P]".
  std::map<int32_t, std::string> comms;
  // When each thread exited (PERF_RECORD_EXIT): its frames end there, not
  // at a later snapshot of the other threads (CallStackModel::Marker).
  std::map<int32_t, uint64_t> exits;
  for (const auto& r : records) {
    if (const auto* c = std::get_if<trace::Comm>(&r.body)) {
      comms[static_cast<int32_t>(c->tid)] = c->comm;
    } else if (const auto* t = std::get_if<trace::Task>(&r.body); t != nullptr && t->exit) {
      exits[static_cast<int32_t>(t->tid)] = r.sample_id.time;
    }
  }
  model.SetExitTimes(std::move(exits));
  report.source = m.source;
  report.virtual_clock = m.virtual_clock;
  for (const auto& r : records)
    report.recorded_from_ns = std::min(report.recorded_from_ns, r.sample_id.time);
  if (m.source == trace::Source::kSampled) {
    // Stack samples, not PT: the decoder's address spaces and symbols
    // serve the stacks (docs/decoding.md, "Sampled traces").
    PTSNAP_TRY(DecodeSampledStreams(reader, options, *decoder, comms, tee, report));
  } else {
    std::vector<trace::Stream> streams = m.streams;
    if (options.snapshot != 0)
      std::erase_if(streams,
                    [&](const trace::Stream& s) { return s.snapshot != options.snapshot; });
    std::stable_sort(streams.begin(), streams.end(), [](const auto& a, const auto& b) {
      return std::tie(a.snapshot, a.pid, a.tid, a.cpu) < std::tie(b.snapshot, b.pid, b.tid, b.cpu);
    });
    std::set<int32_t> pids_named;
    std::set<int32_t> tids_named;
    auto name_process = [&](int32_t pid) {
      if (!pids_named.insert(pid).second) return;
      std::string cmd = !m.command.empty() && !m.pids.empty() && m.pids[0] == pid
                            ? Join(m.command)
                            : (comms.count(pid) ? comms[pid]
                               : pid == 0       ? "cpus"
                                                : "process");
      tee.OnProcess(pid, cmd + " [pid=" + std::to_string(pid) + "]");
    };
    auto name_thread = [&](int32_t pid, int32_t tid, const std::string& name) {
      if (tids_named.insert(tid).second) tee.OnThread(pid, tid, name);
    };
    for (const auto& s : streams) {
      if (s.tid < 0 && s.cpu >= 0) {
        // Per-CPU: the threads the switch sideband names, and the CPU's own
        // track for stretches with no thread known (or idle).
        for (const auto& t : decoder->CpuThreads(s.cpu)) {
          name_process(t.pid);
          name_thread(t.pid, t.tid,
                      t.tid < 0 ? "cpu " + std::to_string(s.cpu)
                                : (comms.count(t.tid) ? comms[t.tid] : "thread"));
        }
        continue;
      }
      int32_t pid = s.pid >= 0 ? s.pid : 0;
      int32_t tid = s.tid >= 0 ? s.tid : pid;
      name_process(pid);
      name_thread(pid, tid, comms.count(tid) ? comms[tid] : "thread");
    }

    uint64_t total_bytes = 0, done_bytes = 0;
    for (const auto& s : streams) total_bytes += trace::ViewedBytes(s);
    for (const auto& s : streams) report.wrapped = report.wrapped || s.wrapped;
    std::map<uint32_t, const trace::Snapshot*> snaps;
    for (const auto& sn : m.snapshots) snaps[sn.seq] = &sn;
    uint64_t last_progress = 0, events = 0;
    // Snapshot mode keeps the AUX ring between snapshots, so a thread's later
    // snapshot can repeat the end of its earlier one: per thread, the last
    // time decoded in earlier snapshots (`covered`) and in this one (`seen`),
    // with the number of events at that time. Events before `covered`, and
    // at it as many as were decoded there, are that repeat and are skipped
    // (a snapshot can end between two events of one timestamp: a trigger's
    // disable and the resume after it).
    struct Cover {
      uint64_t time = 0, at_time = 0;
      uint64_t tie_skipped = 0;  // `seen` only: repeated events at covered's time
    };
    std::map<std::pair<int32_t, int32_t>, Cover> covered, seen;
    const bool skip_overlap = m.mode == trace::Mode::kSnapshot;
    // Snapshot mode stitches a thread's snapshots (per-thread streams): its
    // stack goes on from one snapshot to the next, so a frame that runs
    // through both is one slice. Where the next snapshot repeats none of
    // the last one (its ring wrapped in between), the gap is not traced:
    // the frames end at its start (CallStackModel::Gap). docs/decoding.md,
    // "Overlapping snapshots".
    bool stitching = false;  // one model segment holds every per-thread stream so far
    // This stream: whether it repeated any event of the thread's earlier
    // snapshots, and whether its first new event was looked at.
    bool stream_repeats = false, stream_checked = false;
    // The thread of the previous event and its entries: events come in runs
    // of one thread, so the maps are looked up once per run, not per event.
    struct {
      std::pair<int32_t, int32_t> thread{INT32_MIN, INT32_MIN};
      const Cover* covered = nullptr;  // null: no earlier snapshot of it
      Cover* seen = nullptr;
    } run;
    auto end_snapshot_segment = [&] {
      for (const auto& [thread, t] : seen) {
        Cover& c = covered[thread];
        if (t.time > c.time) {
          c = {t.time, t.at_time, 0};
        } else if (t.time == c.time) {
          c.at_time += t.at_time;
        }
      }
      seen.clear();
      run = {};
    };
    // --slower-than: the first time the slow call's thread shows in its
    // snapshot, to tell whether the ring reached back to the call's start.
    std::map<uint32_t, uint64_t> slow_thread_start;  // snapshot -> time
    int32_t slow_tid = -1;                           // the thread being watched, -1: none
    uint64_t* slow_start = nullptr;
    auto watch_slow_call = [&](uint32_t snapshot) {
      slow_tid = -1;
      slow_start = nullptr;
      auto it = snaps.find(snapshot);
      if (it == snaps.end() || it->second->call_ns == 0) return;
      slow_tid = static_cast<int32_t>(it->second->tid);
      slow_start = &slow_thread_start.emplace(snapshot, UINT64_MAX).first->second;
    };
    auto on_event = decode::EventSinkOf([&](const decode::BranchEvent& e) {
      if (slow_start != nullptr && e.tid == slow_tid && e.time != 0 && e.time < *slow_start)
        *slow_start = e.time;
      // (An event before this stream's first timing packet has time 0: for
      // a thread an earlier snapshot covered, it is part of the repeat.)
      if (skip_overlap && (e.time != 0 || stitching)) {
        if (const auto thread = std::make_pair(e.pid, e.tid); thread != run.thread) {
          auto c = covered.find(thread);
          run.thread = thread;
          run.covered = c == covered.end() ? nullptr : &c->second;
          run.seen = &seen[thread];
        }
        if (run.covered != nullptr &&
            (e.time < run.covered->time ||
             (e.time == run.covered->time && run.seen->tie_skipped < run.covered->at_time))) {
          if (e.time == run.covered->time) run.seen->tie_skipped++;
          report.overlap_events_skipped++;
          stream_repeats = stream_repeats || e.time != 0;
          return;
        }
        if (e.time != 0) {  // (time 0: the thread's first snapshot, nothing to skip)
          if (e.time > run.seen->time) {
            run.seen->time = e.time;
            run.seen->at_time = 1;
          } else if (e.time == run.seen->time) {
            run.seen->at_time++;
          }
          if (stitching && run.covered != nullptr && !stream_checked) {
            stream_checked = true;
            if (!stream_repeats) {
              if (e.tid != model.tid() || e.pid != model.pid()) model.SwitchThread(e.pid, e.tid);
              model.Gap(run.covered->time, "[not traced until " +
                                               FormatDuration(e.time - run.covered->time) +
                                               " later: the ring wrapped between two snapshots]");
              report.snapshot_gaps++;
            }
          }
        }
      }
      if (e.tid != model.tid() || e.pid != model.pid()) model.SwitchThread(e.pid, e.tid);
      if (e.space != model.space()) model.SetSpace(e.space, decoder->SpaceIsExec(e.space));
      model.OnEvent(e);
      if (options.progress && ++events - last_progress >= (1u << 20)) {
        last_progress = events;
        options.progress(done_bytes, total_bytes);
      }
    });
    // Each snapshot ends with a marker naming it; the next starts clean.
    auto end_marker = [&](uint32_t snapshot) -> std::string {
      auto it = snaps.find(snapshot);
      if (it == snaps.end() || m.mode != trace::Mode::kSnapshot) return "";
      const trace::Snapshot& sn = *it->second;
      std::string cut;
      if (auto t = slow_thread_start.find(snapshot);
          t != slow_thread_start.end() && t->second != UINT64_MAX && t->second > sn.call_begin)
        cut = "; it began " + FormatDuration(t->second - sn.call_begin) +
              " before the snapshot starts: use a bigger --snapshot-size";
      // A slow call's snapshot names the request it served, where the
      // program marks them (docs/decoding.md, "Marks").
      std::string mark;
      if (sn.reason == trace::SnapshotReason::kSlowCall) {
        const std::string_view last =
            model.LastMark(sn.tid != 0 ? static_cast<int32_t>(sn.tid) : model.tid());
        if (!last.empty()) mark = "; mark in force " + std::string(last);
      }
      return "[snapshot " + std::to_string(sn.seq) + ": " +
             std::string(trace::ToString(sn.reason)) + (sn.detail.empty() ? "" : " " + sn.detail) +
             mark + cut + "]";
    };
    // The program died of a signal: "[signal SIGSEGV]" ends the thread it
    // killed (the snapshot's tid; its main thread when unknown).
    auto signal_marker = [&](uint32_t snapshot, int32_t pid, int32_t tid) -> std::string {
      auto it = snaps.find(snapshot);
      if (it == snaps.end() || it->second->reason != trace::SnapshotReason::kFatalSignal) return "";
      const trace::Snapshot& sn = *it->second;
      const bool killed = sn.tid != 0 ? static_cast<int32_t>(sn.tid) == tid : tid == pid;
      return killed ? "[signal " + sn.detail + "]" : "";
    };
    // A stream file shorter than listed decodes up to its end; the rest is lost.
    std::vector<DecodeReport::Damage> cuts;
    auto note_cut = [&](const trace::Stream& st, const trace::StreamBytes& b) {
      if (b.missing() == 0) return;
      cuts.push_back({.stream = st.id,
                      .file = st.file,
                      .offset = trace::ViewedBytes(st) - b.missing(),
                      .bytes = b.missing(),
                      .cut = true});
    };
    // -j: reading and decoding on a thread of their own, ahead of the model (parallel.h).
    StreamFeed feed(decode_thread ? jobs : 1, reader, *decoder, streams);
    for (size_t i = 0; i < streams.size();) {
      const trace::Stream& s = streams[i];
      if (s.tid < 0 && s.cpu >= 0) {
        // One recording's per-CPU streams decode together, merged by time,
        // each thread's stack continuing across CPUs (docs/decoding.md).
        std::vector<trace::StreamBytes> held;
        std::vector<decode::PtDecoder::CpuStream> group;
        size_t j = i;
        for (; j < streams.size() && InCpuGroup(s, streams[j]); ++j) {
          report.streams++;
          report.lost_bytes += streams[j].lost_bytes;
          auto bytes = feed.Read(streams[j]);
          if (!bytes) {
            report.missing_streams++;
            report.warnings.push_back(bytes.error().ToString());
            continue;
          }
          note_cut(streams[j], *bytes);
          held.push_back(std::move(*bytes));
          group.push_back({streams[j].cpu, {}, streams[j].id, held.back().missing()});
        }
        for (size_t k = 0; k < group.size(); ++k) group[k].bytes = held[k].view();
        if (stitching) model.EndSegment();  // per-thread streams before: not stitched to these
        stitching = false;
        model.BeginSegment(0, -1 - s.cpu);
        watch_slow_call(s.snapshot);
        PTSNAP_TRY(feed.DecodeCpuStreams(group, on_event));
        for (size_t k = i; k < j; ++k) done_bytes += trace::ViewedBytes(streams[k]);
        if (auto name = end_marker(s.snapshot); !name.empty()) {
          model.MarkerOnEveryThread(snaps[s.snapshot]->time, name);
        }
        model.EndSegment();
        end_snapshot_segment();
        if (options.progress) options.progress(done_bytes, total_bytes);
        i = j;
        continue;
      }
      ++i;
      report.streams++;
      report.lost_bytes += s.lost_bytes;
      int32_t pid = s.pid >= 0 ? s.pid : 0;
      int32_t tid = s.tid >= 0 ? s.tid : pid;
      auto bytes = feed.Read(s);
      if (stitching) {
        model.SwitchThread(pid, tid);
      } else {
        model.BeginSegment(pid, tid);
        stitching = skip_overlap;
      }
      stream_repeats = stream_checked = false;
      if (!bytes) {
        report.missing_streams++;
        report.warnings.push_back(bytes.error().ToString());
        continue;
      }
      note_cut(s, *bytes);
      watch_slow_call(s.snapshot);
      PTSNAP_TRY(feed.DecodeStream(pid, tid, bytes->view(), on_event, s.id, bytes->missing()));
      done_bytes += trace::ViewedBytes(s);
      if (auto name = signal_marker(s.snapshot, pid, tid); !name.empty()) {
        model.Marker(snaps[s.snapshot]->time, name);
      }
      if (auto name = end_marker(s.snapshot); !name.empty()) {
        model.Marker(snaps[s.snapshot]->time, name);
      }
      if (!stitching) model.EndSegment();
      end_snapshot_segment();
      if (options.progress) options.progress(done_bytes, total_bytes);
    }
    if (stitching) model.EndSegment();
    feed.Finish();
    // Each stream's damage in stream order: skipped stretches, then its cut.
    std::map<uint32_t, std::string> files;
    for (const trace::Stream& st : streams) files[st.id] = st.file;
    for (const decode::SkippedBytes& k : decoder->stats().skipped)
      report.damage.push_back({.stream = k.stream,
                               .file = files[k.stream],
                               .offset = k.offset,
                               .bytes = k.size,
                               .error = k.error});
    report.damage.insert(report.damage.end(), cuts.begin(), cuts.end());
    std::stable_sort(report.damage.begin(), report.damage.end(),
                     [](const DecodeReport::Damage& a, const DecodeReport::Damage& b) {
                       return a.stream != b.stream ? a.stream < b.stream : a.offset < b.offset;
                     });
    // The ring could not hold the whole slow call: say so with the fix.
    for (const auto& [seq, first] : slow_thread_start) {
      const trace::Snapshot& sn = *snaps[seq];
      if (first == UINT64_MAX || first <= sn.call_begin) continue;
      report.warnings.push_back(
          "snapshot " + std::to_string(seq) + ": the slow call began at " +
          PerfClockTime(sn.call_begin) + ", the snapshot starts at " + PerfClockTime(first) + " (" +
          FormatDuration(first - sn.call_begin) +
          " later): the call's start is not in the trace; use a bigger --snapshot-size (this "
          "recording's: " +
          base::ExactSize(m.snapshot_size) + " per thread)");
    }
  }
  // The trigger track goes to the writer itself, after every slice.
  if (writer_thread) writer_thread->Stop();
  bool have_triggers = false;
  for (const auto& sn : m.snapshots) {
    const bool slow = sn.reason == trace::SnapshotReason::kSlowCall;
    if ((sn.reason != trace::SnapshotReason::kTrigger && !slow) || !writer) continue;
    if (!have_triggers) {
      writer->sink()->OnProcess(kTriggerPid, "Snapshot triggers");
      writer->sink()->OnThread(kTriggerPid, kTriggerTid, "hits");
      have_triggers = true;
    }
    writer->Instant(
        kTriggerPid, kTriggerTid, sn.time,
        (slow ? "slow call " : "hit ") + (sn.detail.empty() ? std::string("trigger") : sn.detail));
  }
  PTSNAP_TRY(tee.Finish());
  if (out) report.output_bytes = out->bytes_written();
  report.thin = options.thin;
  if (thin) report.thin_dropped = thin->stats();

  report.decode = decoder->stats();
  report.model = model.stats();
  for (const auto& w : report.decode.warnings) report.warnings.push_back(w);
  report.first_ns = summary.first_ns() == UINT64_MAX ? 0 : summary.first_ns();
  report.last_ns = summary.last_ns();
  report.threads = summary.threads();
  report.slices = summary.slices();
  report.top_total = summary.Top(options.top, false);
  report.top_self = summary.Top(options.top, true);
  report.marks = summary.marks();
  report.last_marks = summary.LastMarks();
  report.implausible = summary.check().Result();
  // Frames begun before a full-execution trace are impossible only where
  // the trace is whole: PT lost or undecodable explains them (and is
  // reported on its own lines).
  if (report.lost_bytes != 0 || report.aux_truncated != 0 || report.missing_streams != 0 ||
      report.decode.errors != 0 || report.decode.overflows != 0 ||
      report.decode.undecoded_bytes != 0) {
    report.implausible.inferred = 0;
    report.implausible.first_inferred.clear();
  }
  return report;
}

trace::DecodeVerdict VerdictOf(const DecodeReport& r, const std::string& by) {
  trace::DecodeVerdict v;
  v.by = by;
  v.ptsnap_version = base::kVersion;
  v.decoded_unix_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  v.output = r.output.string();
  v.slices = r.slices;
  v.damaged_bytes = r.damaged_bytes();
  v.impossible = r.implausible.count();
  v.first_impossible = !r.implausible.first_over_span.empty() ? r.implausible.first_over_span
                                                              : r.implausible.first_inferred;
  return v;
}

uint64_t DecodeReport::damaged_bytes() const {
  uint64_t n = 0;
  for (const Damage& d : damage) n += d.bytes;
  return n;
}

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

Result<void> CheckSnapshotExists(const trace::Manifest& m, uint32_t seq) {
  if (seq == 0 || std::any_of(m.snapshots.begin(), m.snapshots.end(),
                              [&](const trace::Snapshot& s) { return s.seq == seq; }))
    return Ok();
  return Error("the trace has no snapshot " + std::to_string(seq) + " (it has " +
               std::to_string(m.snapshots.size()) + ")");
}

std::string FormatReport(const DecodeReport& r) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  uint64_t span = r.last_ns >= r.first_ns ? r.last_ns - r.first_ns : 0;
  const DecodeReport::Sampled& sp = r.sampled;
  if (sp.sampled) {
    line("Decoded " + std::to_string(r.streams) + " sampled stream(s), " +
         std::to_string(sp.samples) + " stack samples (" + sp.event + ", callgraph " +
         sp.callgraph + "): " + std::to_string(r.slices) + " slices on " +
         std::to_string(r.threads) + " thread(s) over " + FormatDuration(span) + ".");
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
  } else {
    line("Decoded " + std::to_string(r.streams) + " stream(s), " +
         std::to_string(r.decode.pt_bytes) + " bytes of PT, " +
         std::to_string(r.decode.instructions) + " instructions: " + std::to_string(r.slices) +
         " slices on " + std::to_string(r.threads) + " thread(s) over " + FormatDuration(span) +
         ".");
    // What the trace kept of what ran (#41: a snapshot that kept 17.45 ms
    // of a 74.9 ms run said nothing).
    if (r.wrapped && r.recorded_from_ns < r.first_ns && r.last_ns > r.recorded_from_ns) {
      line("Coverage: the snapshot ring wrapped, so the trace holds the last " +
           FormatDuration(span) + " of the " + FormatDuration(r.last_ns - r.recorded_from_ns) +
           " recorded; what ran before is gone (a bigger --snapshot-size, or --full-execution, "
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
  }
  auto table = [&](const char* title, const std::vector<FunctionTime>& v, bool self) {
    if (v.empty()) return;
    line(title);
    for (const auto& f : v) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "  %12s  %8llu calls  ",
                    FormatDuration(self ? f.self_ns : f.total_ns).c_str(),
                    static_cast<unsigned long long>(f.calls));
      line(buf + f.name +
           (f.cut != 0 ? " (" + std::to_string(f.cut) + " cut by decode errors)" : ""));
    }
  };
  table("Hottest functions by total time:", r.top_total, false);
  table("Hottest functions by self time:", r.top_self, true);
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
    line("Lost sideband records: " + std::to_string(r.lost_records) + ".");
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
  }
  if (r.decode.flow_fallbacks != 0) {
    line("Decoded with libipt: " + std::to_string(r.decode.flow_fallbacks) +
         " stream(s) with a packet or case ptsnap's own decoder does not decode "
         "(docs/decoding.md, \"Decoders\").");
  }
  if (r.overlap_events_skipped != 0) {
    line("Snapshot overlap: " + std::to_string(r.overlap_events_skipped) +
         (sp.sampled ? " samples" : " events") +
         " already shown by an earlier snapshot of the same thread were skipped.");
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
