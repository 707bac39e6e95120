#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/version.h"
#include "output/output_file.h"
#include "pipeline/parallel.h"
#include "pipeline/pt_streams.h"
#include "pipeline/sampled.h"
#include "pipeline/sink_graph.h"
#include "pipeline/track_names.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

namespace {

// The sideband's records; none, with a warning, where it is unreadable (the
// decode goes on: code addresses will not resolve).
std::vector<trace::Record> ReadRecords(const trace::TraceReader& reader, DecodeReport& report) {
  auto sb = reader.ReadSideband();
  if (!sb) {
    report.warnings.push_back("sideband unreadable, code addresses will not resolve: " +
                              sb.error().ToString());
    return {};
  }
  report.sideband_torn = sb->truncated_tail;
  return std::move(sb->records);
}

// What the sinks and the model counted, into the report.
void CollectCounts(output::SummarySink& summary, const model::CallStackModel& model,
                   const decode::PtDecoder& decoder, size_t top, DecodeReport& report) {
  report.decode = decoder.stats();
  report.model = model.stats();
  for (const auto& w : report.decode.warnings) report.warnings.push_back(w);
  report.first_ns = summary.first_ns() == UINT64_MAX ? 0 : summary.first_ns();
  report.last_ns = summary.last_ns();
  report.thread_spans_ns = summary.thread_spans_ns();
  report.threads = summary.threads();
  report.slices = summary.slices();
  report.top_total = summary.Top(top, false);
  report.top_self = summary.Top(top, true);
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
}

// Names every track the streams show, before any slice: processes
// "cmdline [pid=P]", threads by their last COMM (track_names.h).
void NameTracks(const std::vector<trace::Stream>& streams, const trace::Manifest& m,
                const std::map<int32_t, std::string>& comms, const decode::PtDecoder& decoder,
                model::SliceSink& sink) {
  TrackNamer namer(m, comms, sink);
  for (const auto& s : streams) {
    if (s.tid < 0 && s.cpu >= 0) {
      // Per-CPU: the threads the switch sideband names, and the CPU's own
      // track for stretches with no thread known (or idle).
      namer.NameCpuStream(s.cpu, decoder.CpuThreads(s.cpu));
    } else {
      namer.NameStream(s);
    }
  }
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
    PTSNAP_ASSIGN_OR_RETURN(report.format,
                            output::ChooseOutputFormat(options.format, options.output));
  }
  PTSNAP_TRY(CheckSnapshotExists(m, options.snapshot));
  report.lost_records = m.lost_records;
  report.aux_truncated = m.aux_truncated;
  report.source = m.source;
  report.virtual_clock = m.virtual_clock;

  const std::vector<trace::Record> records = ReadRecords(reader, report);
  PTSNAP_ASSIGN_OR_RETURN(auto decoder,
                          decode::PtDecoder::Create(trace_dir, m, records, options.debug_dirs));
  decoder->set_engine(options.decoder);

  const ThreadPlan plan =
      PlanThreads(options.jobs == 0 ? DefaultJobs() : options.jobs, report.format, options.output);
  decode::Symbolizer* symbolizer = &decoder->symbolizer();
  PTSNAP_ASSIGN_OR_RETURN(
      std::unique_ptr<SinkGraph> sinks,
      SinkGraph::Open(options, report.format, plan, m, [symbolizer](int32_t pid, uint64_t address) {
        return symbolizer->SourceLine(pid, address);
      }));
  model::CallStackModel model(symbolizer, &sinks->sink());
  model.SetKernelOnly(m.scope == trace::Scope::kKernel);
  model.SetInlineFrames(options.inline_frames);
  SidebandThreads threads = ReadSidebandThreads(records);
  model.SetExitTimes(std::move(threads.exits));
  report.recorded_from_ns = threads.earliest_ns;

  if (m.source == trace::Source::kSampled) {
    // Stack samples, not PT: the decoder's address spaces and symbols
    // serve the stacks (docs/decoding.md, "Sampled traces").
    PTSNAP_TRY(
        DecodeSampledStreams(reader, options, *decoder, threads.comms, sinks->sink(), report));
  } else {
    std::vector<trace::Stream> streams = StreamsToDecode(m, options.snapshot);
    NameTracks(streams, m, threads.comms, *decoder, sinks->sink());
    PtStreams pt(reader, *decoder, model, options, report);
    PTSNAP_TRY(pt.Decode(std::move(streams), plan.decode_thread ? plan.jobs : 1));
  }
  sinks->WriteTriggerTrack(m.snapshots);
  PTSNAP_TRY(sinks->Finish());
  report.output_bytes = sinks->output_bytes();
  report.thin = options.thin;
  report.thin_dropped = sinks->thin_dropped();
  CollectCounts(sinks->summary(), model, *decoder, options.top, report);
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

Result<void> CheckSnapshotExists(const trace::Manifest& m, uint32_t seq) {
  if (seq == 0 || std::any_of(m.snapshots.begin(), m.snapshots.end(),
                              [&](const trace::Snapshot& s) { return s.seq == seq; }))
    return Ok();
  std::string seqs;
  for (const trace::Snapshot& s : m.snapshots)
    seqs += (seqs.empty() ? "" : ", ") + std::to_string(s.seq);
  return Error("the trace has no snapshot " + std::to_string(seq) +
               (m.snapshots.empty()
                    ? " (it has none: a full-execution recording; leave --snapshot out)"
                    : " (its snapshots: " + seqs + "; `ptsnap info` lists them)"))
      .WithKind(ErrorKind::kUsage);
}

}  // namespace ptsnap::pipeline
