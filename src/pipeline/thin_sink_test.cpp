#include "pipeline/thin_sink.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

namespace ptsnap::pipeline {
namespace {

using ::testing::ElementsAre;

// What reaches the writer, one "B name ts" / "E name ts" / ... per slice.
class Recorder : public model::SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const model::Slice& s) override {
    static const char* kinds[] = {"B", "E", "X", "I"};
    lines.push_back(std::string(kinds[s.kind]) + (s.inferred ? "i " : " ") + *s.name + " " +
                    std::to_string(s.ts));
  }
  Result<void> Finish() override {
    finished = true;
    return Ok();
  }
  std::vector<std::string> lines;
  bool finished = false;
};

class Feed {
 public:
  explicit Feed(model::SliceSink& sink) : sink_(sink) {}
  void Slice(model::Slice::Kind k, const std::string& name, uint64_t ts, uint64_t other = 0,
             bool inferred = false, int32_t tid = 1) {
    model::Slice s;
    s.kind = k;
    s.pid = 1;
    s.tid = tid;
    s.ts = ts;
    s.inferred = inferred;
    if (k == model::Slice::kEnd) s.begin_ts = other;
    if (k == model::Slice::kComplete) s.end_ts = other;
    s.name = Name(name);
    sink_.OnSlice(s);
  }
  void Begin(const std::string& n, uint64_t ts, int32_t tid = 1) {
    Slice(model::Slice::kBegin, n, ts, 0, false, tid);
  }
  void End(const std::string& n, uint64_t begin, uint64_t ts, int32_t tid = 1) {
    Slice(model::Slice::kEnd, n, ts, begin, false, tid);
  }

 private:
  // Interned, as the Symbolizer's names are (the sink matches by pointer).
  const std::string* Name(const std::string& n) {
    for (const std::string& s : names_)
      if (s == n) return &s;
    return &names_.emplace_back(n);
  }
  model::SliceSink& sink_;
  std::deque<std::string> names_;
};

// main(0..100) { a(10..60) { b(20..50) { c(30..40) } } ; d(70..72) }
void Tree(Feed& f) {
  f.Begin("main", 0);
  f.Begin("a", 10);
  f.Begin("b", 20);
  f.Begin("c", 30);
  f.End("c", 30, 40);
  f.End("b", 20, 50);
  f.End("a", 10, 60);
  f.Begin("d", 70);
  f.End("d", 70, 72);
  f.End("main", 0, 100);
}

TEST(ThinSink, MaxDepthDropsFramesBelowTheLimitAndCountsThem) {
  Recorder rec;
  ThinSink thin(&rec, {.max_depth = 2});
  Feed f(thin);
  Tree(f);
  ASSERT_TRUE(thin.Finish());
  EXPECT_TRUE(rec.finished);
  EXPECT_THAT(rec.lines,
              ElementsAre("B main 0", "B a 10", "E a 60", "B d 70", "E d 72", "E main 100"));
  EXPECT_EQ(thin.stats().too_deep, 2u);  // b, c
  EXPECT_EQ(thin.stats().too_short, 0u);
}

TEST(ThinSink, MinDurationDropsShortFramesAndHoldsBeginsUntilTheyQualify) {
  Recorder rec;
  ThinSink thin(&rec, {.min_duration_ns = 30});
  Feed f(thin);
  Tree(f);
  ASSERT_TRUE(thin.Finish());
  // b lasts exactly 30: kept. c (10) and d (2) are dropped.
  EXPECT_THAT(rec.lines,
              ElementsAre("B main 0", "B a 10", "B b 20", "E b 50", "E a 60", "E main 100"));
  EXPECT_EQ(thin.stats().too_short, 2u);
  EXPECT_EQ(thin.stats().too_deep, 0u);
}

TEST(ThinSink, BothLimitsCountEachFrameOnce) {
  Recorder rec;
  ThinSink thin(&rec, {.max_depth = 1, .min_duration_ns = 45});
  Feed f(thin);
  Tree(f);
  ASSERT_TRUE(thin.Finish());
  EXPECT_THAT(rec.lines, ElementsAre("B main 0", "E main 100"));
  // a (50 long) is too deep; b, c under it too deep as well; d is too deep
  // before it is too short.
  EXPECT_EQ(thin.stats().too_deep, 4u);
  EXPECT_EQ(thin.stats().too_short, 0u);
}

TEST(ThinSink, MarkersPassAndReleaseHeldBegins) {
  Recorder rec;
  ThinSink thin(&rec, {.min_duration_ns = 10});
  Feed f(thin);
  f.Begin("long", 0);
  f.Slice(model::Slice::kInstant, "[marker]", 5);    // long not yet 10 long
  f.Slice(model::Slice::kInstant, "[marker2]", 12);  // now it is
  f.End("long", 0, 20);
  ASSERT_TRUE(thin.Finish());
  EXPECT_THAT(rec.lines, ElementsAre("I [marker] 5", "B long 0", "I [marker2] 12", "E long 20"));
}

TEST(ThinSink, InferredFramesAreKeptByDepthAndTheirLateBeginsFollowTheirEnds) {
  Recorder rec;
  ThinSink thin(&rec, {.max_depth = 1, .min_duration_ns = 10});
  Feed f(thin);
  f.Begin("work", 10);
  f.Begin("deep", 11);
  f.End("deep", 11, 30);
  f.End("work", 10, 40);
  f.Slice(model::Slice::kEnd, "tiny", 45, 42, /*inferred=*/true);  // 3 long: dropped
  f.Slice(model::Slice::kEnd, "main", 50, 0, /*inferred=*/true);
  f.Slice(model::Slice::kBegin, "main", 0, 0, /*inferred=*/true);
  f.Slice(model::Slice::kBegin, "tiny", 42, 0, /*inferred=*/true);
  f.Slice(model::Slice::kComplete, "[unknown]", 0, 5);   // 5 long: dropped
  f.Slice(model::Slice::kComplete, "[unknown]", 0, 15);  // kept
  ASSERT_TRUE(thin.Finish());
  EXPECT_THAT(rec.lines,
              ElementsAre("B work 10", "E work 40", "Ei main 50", "Bi main 0", "X [unknown] 0"));
  EXPECT_EQ(thin.stats().too_deep, 1u);
  EXPECT_EQ(thin.stats().too_short, 2u);
}

TEST(ThinSink, ThreadsAreThinnedApart) {
  Recorder rec;
  ThinSink thin(&rec, {.min_duration_ns = 10});
  Feed f(thin);
  f.Begin("x", 0, 1);
  f.Begin("y", 1, 2);
  f.End("y", 1, 50, 2);  // thread 2's time does not release thread 1's x
  EXPECT_THAT(rec.lines, ElementsAre("B y 1", "E y 50"));
  f.End("x", 0, 5, 1);
  ASSERT_TRUE(thin.Finish());
  EXPECT_THAT(rec.lines, ElementsAre("B y 1", "E y 50"));
  EXPECT_EQ(thin.stats().too_short, 1u);
}

TEST(ThinSink, AFrameThatNeverEndsIsSentAtFinish) {
  Recorder rec;
  ThinSink thin(&rec, {.min_duration_ns = 100});
  Feed f(thin);
  f.Begin("open", 0);
  ASSERT_TRUE(thin.Finish());
  EXPECT_THAT(rec.lines, ElementsAre("B open 0"));
}

}  // namespace
}  // namespace ptsnap::pipeline
