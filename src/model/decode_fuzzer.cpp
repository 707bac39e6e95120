// libFuzzer target: the whole decode pipeline (libipt block decoder, images
// from sideband, call-stack model) over arbitrary PT bytes, against a fixed
// small image: the decoder test program (tests/programs/decode/calls.S).
// Besides "no crash", it checks the model's output invariants: per thread,
// frames nest (no end without a begin) and end no earlier than they begin.
// Inputs whose first byte is odd are split in two per-CPU streams, decoded
// merged by time with switch records moving two threads between the CPUs.
// Built a second time as the `decode_marks` target (PTSNAP_DECODE_FUZZ_MARKS)
// against tests/programs/decode/marks.S: emulated PTWRITE and PTW packets,
// decoded with both engines (ours, then libipt's).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string_view>

#include "decode/pt_decoder.h"
#include "decode/test_stream.h"
#include "model/call_stack.h"

namespace {

class CheckingSink : public ptsnap::model::SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const ptsnap::model::Slice& s) override {
    using ptsnap::model::Slice;
    if (s.name == nullptr) std::abort();
    uint64_t& depth = depth_[s.tid];
    if (s.kind == Slice::kBegin && !s.inferred) depth++;
    if (s.kind == Slice::kEnd && !s.inferred) {
      if (depth == 0) std::abort();  // an end without its begin
      depth--;
    }
    if (s.kind == Slice::kEnd && s.ts < s.begin_ts) std::abort();
    if (s.kind == Slice::kComplete && s.end_ts < s.ts) std::abort();
  }
  ptsnap::Result<void> Finish() override { return ptsnap::Ok(); }
  void SegmentDone() {
    for (const auto& [tid, depth] : depth_) {
      if (depth != 0) std::abort();  // EndSegment closes everything
    }
  }

 private:
  std::map<int32_t, uint64_t> depth_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#ifdef PTSNAP_DECODE_FUZZ_MARKS
  static auto* prog =
      new ptsnap::decode::testing::CallsProgram(ptsnap::decode::testing::LoadMarksProgram());
#else
  static auto* prog =
      new ptsnap::decode::testing::CallsProgram(ptsnap::decode::testing::LoadCallsProgram());
#endif
  static auto* manifest = new ptsnap::trace::Manifest(ptsnap::decode::testing::CallsManifest(1));
  namespace t = ptsnap::decode::testing;
  static auto* records = [] {
    auto* v = new std::vector<ptsnap::trace::Record>(t::CallsSideband(*prog, 1));
    for (auto& r : t::ProgramSideband(*prog, 2, "two", 3)) v->push_back(r);
    v->push_back(t::ItraceStartRecord(0, 4, 1, 1));
    v->push_back(t::ItraceStartRecord(1, 4, 2, 2));
    v->push_back(t::SwitchRecord(0, 1030, true, {1, 1}, {2, 2}));
    v->push_back(t::SwitchRecord(1, 1030, true, {2, 2}, {1, 1}));
    return v;
  }();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto decode = [&](ptsnap::decode::PtDecoder::Engine engine) {
    auto dec = ptsnap::decode::PtDecoder::Create("/nonexistent", *manifest, *records);
    if (!dec) std::abort();
    (*dec)->set_engine(engine);
    CheckingSink sink;
    ptsnap::model::CallStackModel model(&(*dec)->symbolizer(), &sink);
    auto on_event = [&](const ptsnap::decode::BranchEvent& e) {
      if (e.tid != model.tid() || e.pid != model.pid()) model.SwitchThread(e.pid, e.tid);
      if (e.space != model.space()) model.SetSpace(e.space, (*dec)->SpaceIsExec(e.space));
      model.OnEvent(e);
    };
    // Bit 1 of the first byte: the (last) stream's file was cut short, so it
    // ends in a decode error (docs/decoding.md, "Damaged streams").
    const uint64_t missing = size > 0 && (data[0] & 2) != 0 ? 100 : 0;
    if (size > 0 && (data[0] & 1) != 0) {
      model.BeginSegment(0, -1);
      auto r = (*dec)->DecodeCpuStreams(
          {{0, bytes.substr(0, size / 2)}, {1, bytes.substr(size / 2), 1, missing}}, on_event);
      (void)r;
    } else {
      model.BeginSegment(1, 1);
      auto sink_of = ptsnap::decode::EventSinkOf(on_event);
      auto r = (*dec)->DecodeStream(1, 1, bytes, sink_of, 0, missing);
      (void)r;
    }
    model.EndSegment();
    sink.SegmentDone();
  };
  decode(ptsnap::decode::PtDecoder::Engine::kOurs);
#ifdef PTSNAP_DECODE_FUZZ_MARKS
  // libipt's engine too: its emulated-PTWRITE marks come from a side
  // instruction decoder (decode/libipt_marks.h).
  decode(ptsnap::decode::PtDecoder::Engine::kLibipt);
#endif
  return 0;
}
