// ptsnap::Decoder over the decode pipeline (pipeline/pipeline.h): the
// listener form is one more sink next to the summary.
#include "ptsnap/decoder.h"

#include <nlohmann/json.hpp>

#include "pipeline/pipeline.h"
#include "trace/trace_dir.h"

namespace ptsnap {

namespace {

// The model's slice stream as the public listener sees it: whole calls at
// their end, markers, names.
class ListenerSink final : public model::SliceSink {
 public:
  explicit ListenerSink(DecodeListener* l) : l_(l) {}
  void OnProcess(int32_t pid, const std::string& name) override { l_->OnProcess(pid, name); }
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override {
    l_->OnThread(pid, tid, name);
  }
  void OnSlice(const model::Slice& s) override {
    switch (s.kind) {
      // A frame is reported whole at its end; the core clock (a counter)
      // is not in the API yet.
      case model::Slice::kBegin:
      case model::Slice::kCounter: return;
      case model::Slice::kEnd:
      case model::Slice::kComplete: {
        DecodedSlice d;
        d.pid = s.pid;
        d.tid = s.tid;
        d.begin_ns = s.kind == model::Slice::kEnd ? s.begin_ts : s.ts;
        d.end_ns = s.kind == model::Slice::kEnd ? s.ts : s.end_ts;
        d.name = *s.name;
        if (s.dso != nullptr) d.dso = *s.dso;
        d.address = s.address;
        d.inferred = s.inferred;
        l_->OnSlice(d);
        return;
      }
      case model::Slice::kInstant:
        l_->OnMarker({s.pid, s.tid, s.ts, *s.name});
        if (s.name->starts_with("[mark ")) l_->OnMark({s.pid, s.tid, s.ts, s.value});
        return;
    }
  }
  Result<void> Finish() override { return Ok(); }

 private:
  DecodeListener* l_;
};

std::vector<FunctionTime> Convert(const std::vector<output::FunctionTime>& v) {
  std::vector<FunctionTime> out;
  out.reserve(v.size());
  for (const auto& f : v) out.push_back({f.name, f.total_ns, f.self_ns, f.calls});
  return out;
}

DecodeSummary Convert(const pipeline::DecodeReport& r) {
  DecodeSummary s;
  s.first_ns = r.first_ns;
  s.last_ns = r.last_ns;
  s.threads = r.threads;
  s.slices = r.slices;
  s.streams = r.streams;
  s.missing_streams = r.missing_streams;
  s.pt_bytes = r.decode.pt_bytes;
  s.instructions = r.decode.instructions;
  s.decode_errors = r.decode.errors;
  s.overflows = r.decode.overflows;
  s.undecoded_bytes = r.decode.undecoded_bytes;
  s.lost_records = r.lost_records;
  s.aux_truncated = r.aux_truncated;
  s.lost_bytes = r.lost_bytes;
  s.top_total = Convert(r.top_total);
  s.top_self = Convert(r.top_self);
  if (r.sampled.sampled) {
    const auto& sp = r.sampled;
    s.sampled = DecodeSummary::Sampled{
        sp.event,     sp.callgraph,     sp.period_ns,         sp.samples, sp.unwound,
        sp.truncated, sp.bad_records,   sp.torn_bytes,        sp.gaps,    sp.fp_checked,
        sp.fp_mended, sp.fp_unmendable, sp.fp_caller_no_frame};
  }
  s.warnings = r.warnings;
  s.output = r.output;
  s.format = r.format;
  s.output_bytes = r.output_bytes;
  s.dropped_too_deep = r.thin_dropped.too_deep;
  s.dropped_too_short = r.thin_dropped.too_short;
  return s;
}

}  // namespace

struct Decoder::Impl {
  std::filesystem::path trace_dir;
  DecodeOptions options;

  Result<DecodeSummary> Run(const std::filesystem::path& output, std::string_view format,
                            model::SliceSink* sink) const {
    pipeline::DecodeOptions o;
    o.output = output;
    o.format = std::string(format);
    o.sink = sink;
    o.snapshot = options.snapshot;
    o.decoder = options.decoder == PtDecoderKind::kLibipt ? decode::PtDecoder::Engine::kLibipt
                                                          : decode::PtDecoder::Engine::kOurs;
    o.top = options.top;
    o.progress = options.progress;
    o.thin.max_depth = options.max_depth;
    o.thin.min_duration_ns = options.min_duration_ns;
    o.inline_frames = options.inline_frames;
    o.debug_dirs.assign(options.debug_dirs.begin(), options.debug_dirs.end());
    PTSNAP_ASSIGN_OR_RETURN(pipeline::DecodeReport r, pipeline::DecodeTraceDir(trace_dir, o));
    DecodeSummary s = Convert(r);
    s.text = pipeline::FormatReport(r);
    return s;
  }
};

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;
Decoder::~Decoder() = default;

Result<Decoder> Decoder::Open(const std::filesystem::path& trace_dir, DecodeOptions options) {
  PTSNAP_ASSIGN_OR_RETURN(trace::TraceReader reader, trace::TraceReader::Open(trace_dir));
  PTSNAP_TRY_CTX(pipeline::CheckSnapshotExists(reader.manifest(), options.snapshot),
                 trace_dir.string());
  auto impl = std::make_unique<Impl>();
  impl->trace_dir = trace_dir;
  impl->options = std::move(options);
  return Decoder(std::move(impl));
}

Result<DecodeSummary> Decoder::WriteFile(const std::filesystem::path& output,
                                         std::string_view format) {
  if (output.empty()) return Error("no output file named");
  return impl_->Run(output, format, nullptr);
}

Result<DecodeSummary> Decoder::Decode(DecodeListener& listener) {
  ListenerSink sink(&listener);
  return impl_->Run({}, "", &sink);
}

const std::filesystem::path& Decoder::trace_dir() const { return impl_->trace_dir; }
const DecodeOptions& Decoder::options() const { return impl_->options; }
void Decoder::set_options(DecodeOptions options) { impl_->options = std::move(options); }

std::string DecodeSummary::ToJson() const {
  auto fns = [](const std::vector<FunctionTime>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : v)
      a.push_back(
          {{"name", f.name}, {"total_ns", f.total_ns}, {"self_ns", f.self_ns}, {"calls", f.calls}});
    return a;
  };
  nlohmann::json j = {
      {"first_ns", first_ns},
      {"last_ns", last_ns},
      {"threads", threads},
      {"slices", slices},
      {"streams", streams},
      {"missing_streams", missing_streams},
      {"pt_bytes", pt_bytes},
      {"instructions", instructions},
      {"decode_errors", decode_errors},
      {"overflows", overflows},
      {"undecoded_bytes", undecoded_bytes},
      {"lost_records", lost_records},
      {"aux_truncated", aux_truncated},
      {"lost_bytes", lost_bytes},
      {"top_total", fns(top_total)},
      {"top_self", fns(top_self)},
      {"sampled", nullptr},
      {"warnings", warnings},
      {"output", output.string()},
      {"format", format},
      {"output_bytes", output_bytes},
      {"dropped_too_deep", dropped_too_deep},
      {"dropped_too_short", dropped_too_short},
  };
  if (sampled) {
    j["sampled"] = {{"event", sampled->event},
                    {"callgraph", sampled->callgraph},
                    {"period_ns", sampled->period_ns},
                    {"samples", sampled->samples},
                    {"unwound", sampled->unwound},
                    {"truncated", sampled->truncated},
                    {"bad_records", sampled->bad_records},
                    {"torn_bytes", sampled->torn_bytes},
                    {"gaps", sampled->gaps},
                    {"fp_checked", sampled->fp_checked},
                    {"fp_mended", sampled->fp_mended},
                    {"fp_unmendable", sampled->fp_unmendable},
                    {"fp_caller_no_frame", sampled->fp_caller_no_frame}};
  }
  return j.dump(2) + "\n";
}

}  // namespace ptsnap
