// The sink graph of DecodeTraceDir: where the model's slices go.
//
//   model -> tee -> summary (always: the report's counts and tables)
//                -> [file and caller] -> caller's sink (DecodeOptions::sink)
//                                     -> [WriterThread] -> [ThinSink] -> Writer -> OutputFile
//
// The file's branch exists when a file is written; the thinning filter when
// --max-depth or --min-duration asks for it; the writer thread when -j
// plans one (ThreadPlan). The trigger track goes to the writer itself,
// after every slice. Internal to pipeline/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/slice.h"
#include "output/output_file.h"
#include "output/source_lookup.h"
#include "output/summary.h"
#include "pipeline/parallel.h"
#include "pipeline/pipeline.h"
#include "pipeline/thin_sink.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"

namespace ptsnap::pipeline {

// One of output::kOutputFormats' writers (sink_graph.cpp).
class Writer;

class SinkGraph {
 public:
  // `format`: the file's (ChooseOutputFormat), "" when none is written (a
  // caller's sink only). `lookup` finds the source line of an address for
  // FXT and JSON. `options` (output, sink, thin, on_viewer_size) must
  // outlive the graph. Errors: the output file cannot be opened.
  static Result<std::unique_ptr<SinkGraph>> Open(const DecodeOptions& options,
                                                 const std::string& format, const ThreadPlan& plan,
                                                 const trace::Manifest& m,
                                                 output::SourceLookup lookup);
  ~SinkGraph();
  SinkGraph(const SinkGraph&) = delete;
  SinkGraph& operator=(const SinkGraph&) = delete;

  // Where the model sends every process, thread and slice.
  model::SliceSink& sink() { return *tee_; }
  output::SummarySink& summary() { return summary_; }

  // After the last slice: stops the writer thread, then writes the trigger
  // track ("Snapshot triggers", an instant per trigger hit or slow call)
  // when a file is written and the snapshots have any.
  void WriteTriggerTrack(const std::vector<trace::Snapshot>& snapshots);
  // Finishes every sink (the file is complete after it).
  Result<void> Finish() { return tee_->Finish(); }

  // The file's size before compression (0: none written), and the spans
  // the thinning filter left out.
  [[nodiscard]] uint64_t output_bytes() const;
  [[nodiscard]] ThinStats thin_dropped() const;

 private:
  SinkGraph() = default;
  Result<void> OpenFile(const DecodeOptions& options, const std::string& format,
                        const ThreadPlan& plan, const trace::Manifest& m);

  // Declared in the order the sinks are built; destroyed in reverse.
  output::SourceLookup lookup_;
  std::unique_ptr<output::OutputFile> out_;
  std::unique_ptr<Writer> writer_;
  output::SummarySink summary_;
  std::optional<ThinSink> thin_;
  std::optional<WriterThread> writer_thread_;
  std::optional<model::TeeSink> file_and_caller_;
  std::optional<model::TeeSink> tee_;
};

}  // namespace ptsnap::pipeline
