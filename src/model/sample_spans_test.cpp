#include "model/sample_spans.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ptsnap::model {
namespace {

using decode::StackFrame;
using ::testing::ElementsAre;

// "B name ts", "E name begin..end", "I name ts" per slice.
class TextSink : public SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const Slice& s) override {
    std::string t = std::to_string(s.tid) + " ";
    switch (s.kind) {
      case Slice::kBegin: lines.push_back(t + "B " + *s.name + " " + std::to_string(s.ts)); break;
      case Slice::kEnd:
        lines.push_back(t + "E " + *s.name + " " + std::to_string(s.begin_ts) + ".." +
                        std::to_string(s.ts));
        break;
      case Slice::kInstant: lines.push_back(t + "I " + *s.name + " " + std::to_string(s.ts)); break;
      case Slice::kComplete: lines.push_back(t + "C " + *s.name); break;
      case Slice::kCounter: lines.push_back(t + "counter " + *s.name); break;
    }
  }
  Result<void> Finish() override { return Ok(); }
  std::vector<std::string> lines;
};

constexpr int32_t kPid = 100;
constexpr uint64_t kPeriod = 1000;

// main [0x1000, 0x1100), outer [0x2000, 0x2100), hot [0x3000, 0x3100),
// other [0x4000, 0x4100); frames given outermost first.
struct Harness {
  Harness() {
    symbols.AddPerfMap(kPid, decode::ParsePerfMap("1000 100 main\n2000 100 outer\n"
                                                  "3000 100 hot\n4000 100 other\n"));
  }
  void Sample(uint64_t t, std::vector<StackFrame> frames, int32_t tid = kPid) {
    model.OnSample(kPid, tid, kPid, t, frames);
  }
  decode::Symbolizer symbols;
  TextSink sink;
  SampleSpanModel model{&symbols, &sink, kPeriod};
};

// A return address inside `fn_base`'s function (non-leaf), or a leaf IP.
StackFrame Ret(uint64_t a) { return {a, true}; }
StackFrame Leaf(uint64_t a) { return {a, false}; }

TEST(SampleSpans, ConsecutiveSamplesSharingAPrefixContinueIt) {
  Harness h;
  h.Sample(1000, {Ret(0x1010), Ret(0x2010), Leaf(0x3001)});
  h.Sample(2000, {Ret(0x1010), Ret(0x2010), Leaf(0x3050)});  // same stack, IP moved
  h.Sample(3000, {Leaf(0x1020)});                            // back in main
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines, ElementsAre("100 B main 1000", "100 B outer 1000", "100 B hot 1000",
                                        "100 E hot 1000..3000", "100 E outer 1000..3000",
                                        // main ends one period after its last sample
                                        "100 E main 1000..4000"));
  EXPECT_EQ(h.model.stats().samples, 3u);
  EXPECT_EQ(h.model.stats().spans, 3u);
}

TEST(SampleSpans, SplitsAtTheFirstDifferingLevel) {
  Harness h;
  h.Sample(1000, {Ret(0x1010), Ret(0x2010), Leaf(0x3001)});
  h.Sample(2000, {Ret(0x1010), Ret(0x2010), Leaf(0x4001)});  // outer now in other
  h.Sample(3000, {Ret(0x1010), Leaf(0x4002)});               // main -> other: outer ended
  h.model.EndAll();
  EXPECT_THAT(
      h.sink.lines,
      ElementsAre("100 B main 1000", "100 B outer 1000", "100 B hot 1000", "100 E hot 1000..2000",
                  "100 B other 2000", "100 E other 2000..3000", "100 E outer 1000..3000",
                  "100 B other 3000", "100 E other 3000..4000", "100 E main 1000..4000"));
}

TEST(SampleSpans, ANewCallSiteIsANewCall) {
  Harness h;
  // main calls outer from two places (return addresses 0x1010 and 0x1030):
  // the second sample's outer is another call, so it and all below split.
  h.Sample(1000, {Ret(0x1010), Leaf(0x2001)});
  h.Sample(2000, {Ret(0x1030), Leaf(0x2001)});
  // The same site again (0x1030): continues.
  h.Sample(3000, {Ret(0x1030), Leaf(0x2002)});
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines,
              ElementsAre("100 B main 1000", "100 B outer 1000", "100 E outer 1000..2000",
                          "100 B outer 2000", "100 E outer 2000..4000", "100 E main 1000..4000"));
}

TEST(SampleSpans, ALeafThatStartsCallingContinues) {
  Harness h;
  // outer is the leaf (no call site known), then calls hot: the same outer.
  h.Sample(1000, {Ret(0x1010), Leaf(0x2001)});
  h.Sample(2000, {Ret(0x1010), Ret(0x2010), Leaf(0x3001)});
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines, ElementsAre("100 B main 1000", "100 B outer 1000", "100 B hot 2000",
                                        "100 E hot 2000..3000", "100 E outer 1000..3000",
                                        "100 E main 1000..3000"));
}

TEST(SampleSpans, ReturnAddressesNameTheCaller) {
  Harness h;
  // A return address just past the end of main (0x1100, a call as main's
  // last instruction) is main's: looked up at address - 1.
  h.Sample(1000, {Ret(0x1100), Leaf(0x3001)});
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines, ElementsAre("100 B main 1000", "100 B hot 1000", "100 E hot 1000..2000",
                                        "100 E main 1000..2000"));
}

TEST(SampleSpans, AGapEndsEveryOpenFrameOnePeriodAfterTheLastSample) {
  Harness h;
  h.Sample(1000, {Ret(0x1010), Leaf(0x3001)});
  h.Sample(2000, {Ret(0x1010), Leaf(0x3001)});
  // 10 periods later is still continuous; more is a gap.
  h.Sample(12000, {Ret(0x1010), Leaf(0x3001)});
  h.Sample(22001, {Ret(0x1010), Leaf(0x3001)});
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines,
              ElementsAre("100 B main 1000", "100 B hot 1000", "100 E hot 1000..13000",
                          "100 E main 1000..13000", "100 B main 22001", "100 B hot 22001",
                          "100 E hot 22001..23001", "100 E main 22001..23001"));
  EXPECT_EQ(h.model.stats().gaps, 1u);
}

TEST(SampleSpans, ThreadsAreIndependentAndMarkersFollowTheirEnd) {
  Harness h;
  h.Sample(1000, {Ret(0x1010), Leaf(0x3001)}, 101);
  h.Sample(1500, {Ret(0x1010), Leaf(0x4001)}, 102);
  h.Sample(2000, {Ret(0x1010), Leaf(0x3001)}, 101);
  h.Sample(2500, {Ret(0x1010), Leaf(0x3001)}, 102);
  h.model.EndAll("[snapshot 1: exit]", 3200);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("101 B main 1000", "101 B hot 1000", "102 B main 1500",
                          "102 B other 1500", "102 E other 1500..2500", "102 B hot 2500",
                          // ends in first-seen thread order, each at last + period
                          "101 E hot 1000..3000", "101 E main 1000..3000",
                          "101 I [snapshot 1: exit] 3200", "102 E hot 2500..3500",
                          "102 E main 1500..3500", "102 I [snapshot 1: exit] 3500"));
}

TEST(SampleSpans, OlderSamplesAreSkippedAndCounted) {
  Harness h;
  h.Sample(2000, {Leaf(0x1001)});
  h.Sample(1000, {Leaf(0x3001)});
  h.model.EndAll();
  EXPECT_THAT(h.sink.lines, ElementsAre("100 B main 2000", "100 E main 2000..3000"));
  EXPECT_EQ(h.model.stats().out_of_order, 1u);
}

}  // namespace
}  // namespace ptsnap::model
