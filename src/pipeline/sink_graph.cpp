#include "pipeline/sink_graph.h"

#include "base/check.h"
#include "output/fxt_writer.h"
#include "output/text_writers.h"

namespace ptsnap::pipeline {

// The writers and readers this module drives.
using namespace ::ptsnap::output;

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
    const std::string clock = trace::ClockName(source, how);
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

SinkGraph::~SinkGraph() = default;

Result<std::unique_ptr<SinkGraph>> SinkGraph::Open(const DecodeOptions& options,
                                                   const std::string& format,
                                                   const ThreadPlan& plan, const trace::Manifest& m,
                                                   SourceLookup lookup) {
  std::unique_ptr<SinkGraph> g(new SinkGraph());
  g->lookup_ = std::move(lookup);
  if (!format.empty()) PTSNAP_TRY(g->OpenFile(options, format, plan, m));
  if (m.mode == trace::Mode::kFull && !m.command.empty() && !m.pids.empty())
    g->summary_.check().SetFullExecution(m.pids[0]);
  // The file's writer, behind the thinning filter when one is asked for.
  model::SliceSink* file = g->writer_ ? g->writer_->sink() : nullptr;
  if (file != nullptr && options.thin.active()) file = &g->thin_.emplace(file, options.thin);
  if (file != nullptr && plan.writer_thread) {
    file = &g->writer_thread_.emplace(file, g->lookup_, g->writer_->LookupKinds());
    g->writer_->SetSourceLookup(g->writer_thread_->WriterLookup());
  }
  // The slices go to the file's writer and/or the caller's sink, and to the summary.
  model::SliceSink* to = file != nullptr ? file : options.sink;
  if (file != nullptr && options.sink != nullptr)
    to = &g->file_and_caller_.emplace(file, options.sink);
  g->tee_.emplace(to, &g->summary_);
  return g;
}

Result<void> SinkGraph::OpenFile(const DecodeOptions& options, const std::string& format,
                                 const ThreadPlan& plan, const trace::Manifest& m) {
  PTSNAP_ASSIGN_OR_RETURN(out_,
                          OutputFile::Open(options.output, std::nullopt, plan.deflate_threads));
  if (options.on_viewer_size && format != "events") {
    out_->WatchSize(options.viewer_comfort_bytes, [&options, format](uint64_t bytes) {
      options.on_viewer_size(ViewerSizeWarningWhileWriting(options.output, format, bytes,
                                                           options.viewer_comfort_bytes),
                             bytes);
    });
  }
  writer_ = Writer::Make(format, out_.get());
  writer_->SetSourceLookup(lookup_);
  writer_->SetClock(m.source, m.virtual_clock);
  return Ok();
}

void SinkGraph::WriteTriggerTrack(const std::vector<trace::Snapshot>& snapshots) {
  if (writer_thread_) writer_thread_->Stop();
  if (!writer_) return;
  bool have_triggers = false;
  for (const auto& sn : snapshots) {
    const bool slow = sn.reason == trace::SnapshotReason::kSlowCall;
    if (sn.reason != trace::SnapshotReason::kTrigger && !slow) continue;
    if (!have_triggers) {
      writer_->sink()->OnProcess(kTriggerTrackPid, "Snapshot triggers");
      writer_->sink()->OnThread(kTriggerTrackPid, kTriggerTrackTid, "hits");
      have_triggers = true;
    }
    writer_->Instant(
        kTriggerTrackPid, kTriggerTrackTid, sn.time,
        (slow ? "slow call " : "hit ") + (sn.detail.empty() ? std::string("trigger") : sn.detail));
  }
}

uint64_t SinkGraph::output_bytes() const { return out_ ? out_->bytes_written() : 0; }

ThinStats SinkGraph::thin_dropped() const { return thin_ ? thin_->stats() : ThinStats{}; }

}  // namespace ptsnap::pipeline
