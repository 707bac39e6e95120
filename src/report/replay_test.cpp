#include "report/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

namespace ptsnap::report {
namespace {

// Slices as the model emits them, into a ReplaySink whose lines are kept.
class Replay {
 public:
  explicit Replay(ReplayOptions o = {})
      : sink_(std::move(o), [this](std::string_view l) { text_ += l; }) {}
  Replay& Begin(int32_t tid, const std::string& name, uint64_t ts) {
    model::Slice s;
    s.kind = model::Slice::kBegin;
    s.tid = tid;
    s.ts = ts;
    s.name = Name(name);
    sink_.OnSlice(s);
    return *this;
  }
  Replay& End(int32_t tid, const std::string& name, uint64_t begin, uint64_t ts,
              bool inferred = false) {
    model::Slice s;
    s.kind = model::Slice::kEnd;
    s.tid = tid;
    s.ts = ts;
    s.begin_ts = begin;
    s.inferred = inferred;
    s.name = Name(name);
    sink_.OnSlice(s);
    return *this;
  }
  Replay& Call(int32_t tid, const std::string& name, uint64_t begin, uint64_t end) {
    return Begin(tid, name, begin).End(tid, name, begin, end);
  }
  Replay& Instant(int32_t tid, const std::string& name, uint64_t ts) {
    model::Slice s;
    s.kind = model::Slice::kInstant;
    s.tid = tid;
    s.ts = ts;
    s.name = Name(name);
    sink_.OnSlice(s);
    return *this;
  }
  std::string Text() {
    EXPECT_TRUE(sink_.Finish());
    return text_;
  }
  const ReplaySink& sink() const { return sink_; }

 private:
  const std::string* Name(const std::string& n) {
    for (const std::string& s : names_)
      if (s == n) return &s;
    return &names_.emplace_back(n);
  }
  std::deque<std::string> names_;
  std::string text_;
  ReplaySink sink_;
};

// main [0, 5000] { fib [1000, 1012]; work [2000, 4500] { leaf [2100, 2300] } }
void MainFibWork(Replay& r) {
  r.Begin(7, "main", 0)
      .Call(7, "fib", 1000, 1012)
      .Begin(7, "work", 2000)
      .Call(7, "leaf", 2100, 2300)
      .End(7, "work", 2000, 4500)
      .End(7, "main", 0, 5000);
}

TEST(Replay, PrintsTheIndentedCallsAsUftraceReplayDoes) {
  Replay r;
  MainFibWork(r);
  EXPECT_EQ(ReplayHeader() + r.Text(),
            "# DURATION     TID     FUNCTION\n"
            "           [     7] | main() {\n"
            "  0.012 us [     7] |   fib();\n"
            "           [     7] |   work() {\n"
            "  0.200 us [     7] |     leaf();\n"
            "  2.500 us [     7] |   } /* work */\n"
            "  5.000 us [     7] | } /* main */\n");
  EXPECT_EQ(r.sink().lines(), 6u);
}

TEST(Replay, DepthMakesACallWhoseCalleesAreHiddenOneLine) {
  ReplayOptions o;
  o.depth = 2;
  Replay r(o);
  MainFibWork(r);
  EXPECT_EQ(r.Text(),
            "           [     7] | main() {\n"
            "  0.012 us [     7] |   fib();\n"
            "  2.500 us [     7] |   work();\n"
            "  5.000 us [     7] | } /* main */\n");
}

// The window [1500, 3000] ns: work begins in it and ends after it, leaf
// lies inside it, main is open throughout.
TEST(Replay, FramesOpenAtTheWindowsEdgesAreShownAsSuch) {
  ReplayOptions o;
  o.since_ns = 1500;
  o.until_ns = 3000;
  Replay r(o);
  MainFibWork(r);
  EXPECT_EQ(r.Text(),
            "           [     7] | main() { /* entered before the window */\n"
            "           [     7] |   work() {\n"
            "  0.200 us [     7] |     leaf();\n"
            "           [     7] |   } /* work: still running at the window's end */\n"
            "           [     7] | } /* main: still running at the window's end */\n");
  // Entered before the window, ending inside it.
  ReplayOptions from;
  from.since_ns = 2050;
  Replay late(from);
  MainFibWork(late);
  EXPECT_EQ(late.Text(),
            "           [     7] | main() { /* entered before the window */\n"
            "           [     7] |   work() { /* entered before the window */\n"
            "  0.200 us [     7] |     leaf();\n"
            "  2.500 us [     7] |   } /* work */\n"
            "  5.000 us [     7] | } /* main */\n");
}

// A snapshot begun inside `loop`: its end comes with no begin.
TEST(Replay, AFrameOpenWhenTheTraceBeganSaysSo) {
  Replay r;
  r.Call(3, "step", 10, 20).End(3, "loop", 0, 50, /*inferred=*/true);
  EXPECT_EQ(r.Text(),
            "  0.010 us [     3] | step();\n"
            "  0.050 us [     3] | } /* loop (entered before the trace) */\n");
}

TEST(Replay, TidPicksAThreadAndMarkersAreComments) {
  ReplayOptions o;
  o.tid = 9;
  Replay r(o);
  r.Call(8, "other", 0, 10).Begin(9, "f", 5).Instant(9, "[mark 0x2a]", 6).End(9, "f", 5, 9);
  EXPECT_EQ(r.Text(),
            "           [     9] | f() {\n"
            "           [     9] |   /* [mark 0x2a] */\n"
            "  0.004 us [     9] | } /* f */\n");
  EXPECT_TRUE(r.sink().saw_thread());
  ReplayOptions none;
  none.tid = 10;
  Replay n(none);
  n.Call(8, "other", 0, 10);
  EXPECT_EQ(n.Text(), "");
  EXPECT_FALSE(n.sink().saw_thread());
}

TEST(Replay, TheLimitStopsPrintingButCountsEveryLine) {
  ReplayOptions o;
  o.limit = 2;
  Replay r(o);
  MainFibWork(r);
  EXPECT_EQ(r.Text(),
            "           [     7] | main() {\n"
            "  0.012 us [     7] |   fib();\n");
  EXPECT_EQ(r.sink().printed(), 2u);
  EXPECT_EQ(r.sink().lines(), 6u);
}

// A frame the trace ends inside (a thinned file's) is closed without a
// duration; names keep their own parentheses.
TEST(Replay, FramesOpenAtTheTracesEndAndNamesWithParameters) {
  Replay r;
  r.Begin(1, "f(int)", 0).Call(1, "[syscall]", 1, 1001000);
  EXPECT_EQ(r.Text(),
            "           [     1] | f(int) {\n"
            "  1.001 ms [     1] |   [syscall];\n"
            "           [     1] | } /* f(int): still running at the trace's end */\n");
}

}  // namespace
}  // namespace ptsnap::report
