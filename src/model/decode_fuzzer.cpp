// libFuzzer target: the whole decode pipeline (libipt block decoder, images
// from sideband, call-stack model) over arbitrary PT bytes, against a fixed
// small image: the decoder test program (tests/programs/decode/calls.S).
// Besides "no crash", it checks the model's output invariants: per thread,
// frames nest (no end without a begin) and end no earlier than they begin.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
    if (s.kind == Slice::kBegin && !s.inferred) depth_++;
    if (s.kind == Slice::kEnd && !s.inferred) {
      if (depth_ == 0) std::abort();  // an end without its begin
      depth_--;
    }
    if (s.kind == Slice::kEnd && s.ts < s.begin_ts) std::abort();
    if (s.kind == Slice::kComplete && s.end_ts < s.ts) std::abort();
  }
  ptsnap::Result<void> Finish() override { return ptsnap::Ok(); }
  void SegmentDone() {
    if (depth_ != 0) std::abort();  // EndSegment closes everything
  }

 private:
  uint64_t depth_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* prog =
      new ptsnap::decode::testing::CallsProgram(ptsnap::decode::testing::LoadCallsProgram());
  static auto* manifest = new ptsnap::trace::Manifest(ptsnap::decode::testing::CallsManifest(1));
  static auto* records =
      new std::vector<ptsnap::trace::Record>(ptsnap::decode::testing::CallsSideband(*prog, 1));
  auto dec = ptsnap::decode::PtDecoder::Create("/nonexistent", *manifest, *records);
  if (!dec) std::abort();
  CheckingSink sink;
  ptsnap::model::CallStackModel model(&(*dec)->symbolizer(), &sink);
  model.BeginSegment(1, 1);
  auto r = (*dec)->DecodeStream(1, std::string_view(reinterpret_cast<const char*>(data), size),
                                [&](const ptsnap::decode::BranchEvent& e) { model.OnEvent(e); });
  (void)r;
  model.EndSegment();
  sink.SegmentDone();
  return 0;
}
