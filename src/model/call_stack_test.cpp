#include "model/call_stack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "decode/test_stream.h"
#include "elf/symbol_file.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::model {
namespace {

using decode::BranchEvent;
using decode::BranchKind;
using ::testing::ElementsAre;

// Records slices as "ts B name" / "ts E name" / "ts X name end" / "ts I name".
class TextSink : public SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const Slice& s) override {
    std::ostringstream o;
    o << s.ts << ' ';
    switch (s.kind) {
      case Slice::kBegin: o << "B " << *s.name << (s.inferred ? " inferred" : ""); break;
      case Slice::kEnd: o << "E " << *s.name << " from " << s.begin_ts; break;
      case Slice::kComplete: o << "X " << *s.name << " to " << s.end_ts; break;
      case Slice::kInstant: o << "I " << *s.name; break;
      case Slice::kCounter: o << "C " << *s.name << " " << s.value; break;
    }
    lines.push_back(o.str());
    threads.push_back(std::to_string(s.tid) + ": " + o.str());
  }
  Result<void> Finish() override { return Ok(); }
  std::vector<std::string> lines;
  std::vector<std::string> threads;  // "tid: line"
};

// Records how frames begin and end: "B name via" / "E name via".
class ViaSink : public SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const Slice& s) override {
    if (s.kind == Slice::kBegin || s.kind == Slice::kEnd) {
      lines.push_back(std::string(s.kind == Slice::kBegin ? "B " : "E ") + *s.name + " " +
                      ViaName(s.via));
      times.push_back(s.ts);
    }
  }
  Result<void> Finish() override { return Ok(); }
  std::vector<std::string> lines;
  std::vector<uint64_t> times;  // lines[i]'s
};

// fnN lives at 0x1000 * (N + 1), 0x100 bytes, via a JIT map.
uint64_t Fn(int n, uint64_t off = 0) { return 0x1000 * static_cast<uint64_t>(n + 1) + off; }

void Feed(CallStackModel& model, BranchKind k, uint64_t t, uint64_t from, uint64_t to) {
  BranchEvent e;
  e.kind = k;
  e.time = t;
  e.from = from;
  e.to = to;
  model.OnEvent(e);
}

struct Harness {
  Harness() : model(&symbols, &sink) {
    symbols.AddPerfMap(1, decode::ParsePerfMap("1000 100 fn0\n2000 100 fn1\n3000 100 fn2\n"
                                               "4000 100 fn3\n5000 100 fn4\n"));
    model.BeginSegment(1, 1);
  }
  void Ev(BranchKind k, uint64_t t, uint64_t from, uint64_t to) { Feed(model, k, t, from, to); }
  decode::Symbolizer symbols;
  TextSink sink;
  CallStackModel model;
};

TEST(CallStackTest, TimeBatchSpreading) {
  // magic-trace test.ml "time batch spreading": calls sharing a timestamp
  // share the interval up to the next timestamp; returns take no time.
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 1, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kReturn, 1, Fn(1, 1), Fn(0, 2));
  h.Ev(BranchKind::kCall, 1, Fn(0, 3), Fn(2));
  h.Ev(BranchKind::kReturn, 1, Fn(2, 1), Fn(0, 4));
  for (int i = 0; i < 4; ++i) h.Ev(BranchKind::kCall, 100, Fn(i, 5), Fn(i + 1));
  h.Ev(BranchKind::kReturn, 103, Fn(4, 1), Fn(3, 6));
  h.model.EndSegment();
  // Four calls into 3 ns (100, 100, 101, 102 by the interval rule): a
  // begin never shares its time with what follows it, so they become 100,
  // 101, 102, 103 and the returns 104; an end may share (adjacent spans,
  // frames ending together).
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "34 B fn1", "67 E fn1 from 34", "67 B fn2",
                          "100 E fn2 from 67", "100 B fn1", "101 B fn2", "102 B fn3", "103 B fn4",
                          "104 E fn4 from 103", "104 E fn3 from 102", "104 E fn2 from 101",
                          "104 E fn1 from 100", "104 E fn0 from 1"));
}

// Frequency and power (docs/decoding.md, "Frequency and power"): a CBR is a
// counter sample (in MHz, where it changes), a PWRE or MWAIT opens a
// "[C-state Cn]" frame on top of the stack, which a PWRX or the thread's
// next event ends; a mark is a marker. None of them moves a frame.
TEST(CallStackTest, FrequencyPowerAndMarksMoveNoFrame) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCbr, 5, 0, 36);
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kCbr, 12, 0, 36);  // the same ratio (the next PSB+): no sample
  h.Ev(BranchKind::kMark, 15, 0, 0x41);
  h.Ev(BranchKind::kPowerEntry, 20, 0, decode::kPowerPwre | 5);
  h.Ev(BranchKind::kPowerEntry, 21, Fn(1, 2), 0x00);  // the MWAIT of the same entry
  h.Ev(BranchKind::kPowerExit, 30, 0, 5 | 5 << 8);
  h.Ev(BranchKind::kCbr, 31, 0, 20);
  h.Ev(BranchKind::kPowerEntry, 40, Fn(1, 2), 0x20);
  h.Ev(BranchKind::kReturn, 50, Fn(1, 3), Fn(0, 2));  // woke with no PWRX
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "5 C [core clock MHz] 3600", "10 B fn1",
                                        "15 I [mark 0x41 \"A\"]", "20 B [C-state C6]",
                                        "30 E [C-state C6] from 20", "31 C [core clock MHz] 2000",
                                        "40 B [C-state C3]", "50 E [C-state C3] from 40",
                                        "50 E fn1 from 10", "50 E fn0 from 1"));
}

// A "[C-state Cn]" frame carries the kPowerEntry's `to` that opened it
// (Slice::value, begin and end) and, where a PWRX ended it, the
// kPowerExit's (Slice::power_exit | kPowerExitSeen); a frame its thread's
// next event ended has no exit; other frames are not idle.
TEST(CallStackTest, ACStateFrameCarriesItsEntryAndExit) {
  struct PowerSink : SliceSink {
    void OnProcess(int32_t, const std::string&) override {}
    void OnThread(int32_t, int32_t, const std::string&) override {}
    void OnSlice(const Slice& s) override {
      if (s.kind != Slice::kBegin && s.kind != Slice::kEnd) return;
      std::ostringstream o;
      o << (s.kind == Slice::kBegin ? "B " : "E ") << *s.name;
      if (s.idle) o << std::hex << " entry=0x" << s.value << " exit=0x" << s.power_exit;
      lines.push_back(o.str());
    }
    Result<void> Finish() override { return Ok(); }
    std::vector<std::string> lines;
  } sink;
  decode::Symbolizer symbols;
  symbols.AddPerfMap(1, decode::ParsePerfMap("1000 100 fn0\n"));
  CallStackModel model(&symbols, &sink);
  model.BeginSegment(1, 1);
  const uint64_t pwre = decode::kPowerPwre | 5 | 1 << 8 | 1 << 16;  // C6.1, hardware-initiated
  const uint64_t pwrx = 1 | 5 << 8 | 1 << 16;  // last C2, deepest C6, interrupt
  Feed(model, BranchKind::kEnable, 0, 0, Fn(0));
  Feed(model, BranchKind::kPowerEntry, 10, 0, pwre);
  Feed(model, BranchKind::kPowerExit, 20, 0, pwrx);
  Feed(model, BranchKind::kPowerEntry, 30, Fn(0, 2), 0x20);  // MWAIT C3
  Feed(model, BranchKind::kJump, 40, Fn(0, 3), Fn(0, 8));    // woke with no PWRX
  model.EndSegment();
  EXPECT_THAT(sink.lines, ElementsAre("B fn0", "B [C-state C6] entry=0x100010105 exit=0x0",
                                      "E [C-state C6] entry=0x100010105 exit=0x8000000000010501",
                                      "B [C-state C3] entry=0x20 exit=0x0",
                                      "E [C-state C3] entry=0x20 exit=0x0", "E fn0"));
}

// Jumps inside the top frame's code change only the time (QuietJump), but
// that they do: the first with a later time spreads the queued calls up to
// it, and the last is where the thread's frames end.
TEST(CallStackTest, JumpsInsideAFunctionMoveOnlyTheTime) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kCall, 10, Fn(1, 1), Fn(2));
  h.Ev(BranchKind::kJump, 10, Fn(2, 1), Fn(2, 8));  // the calls' time: they stay queued
  h.Ev(BranchKind::kJump, 30, Fn(2, 9), Fn(2, 4));  // spreads them over [10, 30)
  h.Ev(BranchKind::kJump, 40, Fn(2, 5), Fn(2, 12));
  h.Ev(BranchKind::kJump, 50, Fn(2, 13), Fn(2, 2));
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "10 B fn1", "20 B fn2", "50 E fn2 from 20",
                                        "50 E fn1 from 10", "50 E fn0 from 1"));
}

// A thread that exited before a later snapshot's marker: its frames end at
// its exit, the marker stays at the snapshot.
TEST(CallStackTest, FramesOfAnExitedThreadEndAtItsExitNotAtALaterMarker) {
  Harness h;
  h.model.SetExitTimes({{1, 50}});
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 1), 0);  // tracing stops: its exit
  h.model.Marker(100, "[snapshot 1: exit]");
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [untraced]", "50 E [untraced] from 20",
                          "50 E fn1 from 10", "50 E fn0 from 1", "100 I [snapshot 1: exit]"));
}

TEST(CallStackTest, ReturnsPastTheStackInferFramesFromTheStart) {
  // Modelled on magic-trace "enqueuing events at start"; events at the
  // start time move +1 ns so inferred frames enclose them.
  Harness h;
  h.Ev(BranchKind::kReturn, 10, Fn(0, 1), Fn(1, 4));  // fn0 returns into fn1
  h.Ev(BranchKind::kCall, 10, Fn(1, 5), Fn(2));
  h.Ev(BranchKind::kCall, 10, Fn(2, 5), Fn(3));
  h.Ev(BranchKind::kReturn, 11, Fn(3, 1), Fn(2, 6));
  h.Ev(BranchKind::kReturn, 12, Fn(2, 7), Fn(1, 8));
  h.Ev(BranchKind::kReturn, 13, Fn(1, 9), Fn(4, 2));  // past the stack: fn4 inferred
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines,
              ElementsAre("11 E fn0 from 10", "11 B fn2", "12 B fn3", "13 E fn3 from 12",
                          "13 E fn2 from 11", "13 E fn1 from 10", "13 E fn4 from 10",
                          // Deferred, outermost first: fn4 encloses fn1, which
                          // encloses fn0, the frame that returned into it
                          // (named from the return's source; magic-trace
                          // shows "[unknown]" there).
                          "10 B fn4 inferred", "10 B fn1 inferred", "10 B fn0 inferred"));
  EXPECT_EQ(h.model.stats().inferred, 3u);
}

TEST(CallStackTest, AReturnFromAnUnknownSourceIsAnUnknownSpan) {
  // magic-trace's rule where the source is not known (a return whose
  // source address the decoder does not have).
  Harness h;
  h.Ev(BranchKind::kReturn, 10, 0, Fn(1, 4));
  h.Ev(BranchKind::kCall, 12, Fn(1, 5), Fn(2));
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines, ElementsAre("12 B fn2", "13 E fn2 from 12", "13 E fn1 from 10",
                                        "10 B fn1 inferred", "10 X [unknown] to 11"));
}

TEST(CallStackTest, TailCallIsAdjacentSpans) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kJump, 20, Fn(1, 4), Fn(2));     // jmp fn2: tail call
  h.Ev(BranchKind::kJump, 25, Fn(2, 4), Fn(2, 8));  // jump inside fn2: nothing
  h.Ev(BranchKind::kReturn, 30, Fn(2, 9), Fn(0, 5));
  h.model.EndSegment();
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "10 B fn1", "20 E fn1 from 10", "20 B fn2",
                                        "30 E fn2 from 20", "30 E fn0 from 1"));
}

TEST(CallStackTest, JumpsInsideUnknownCodeStayInOneFrame) {
  Harness h;
  h.symbols.AddMapping(1, 0x10000, 0x1000, 0, "", "libx.so");  // no symbols
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), 0x10100);
  h.Ev(BranchKind::kJump, 20, 0x10104, 0x10200);
  h.Ev(BranchKind::kJump, 25, 0x10204, 0x10300);
  h.Ev(BranchKind::kCall, 26, 0x10304, Fn(1));
  h.Ev(BranchKind::kReturn, 27, Fn(1, 1), 0x10309);  // back into the unknown caller
  h.Ev(BranchKind::kReturn, 30, 0x10404, Fn(0, 5));
  h.model.EndSegment();
  EXPECT_THAT(
      h.sink.lines,
      ElementsAre("1 B fn0", "10 B [unknown @ 0x10100 (libx.so)]", "26 B fn1", "27 E fn1 from 26",
                  "30 E [unknown @ 0x10100 (libx.so)] from 10", "30 E fn0 from 1"));
}

TEST(CallStackTest, LongjmpUnwindsToTheLandingFrame) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kCall, 20, Fn(1, 1), Fn(2));
  h.Ev(BranchKind::kCall, 30, Fn(2, 1), Fn(3));
  h.Ev(BranchKind::kJump, 40, Fn(3, 1), Fn(0, 0x20));  // longjmp into fn0
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B fn2", "30 B fn3", "40 E fn3 from 30",
                          "40 E fn2 from 20", "40 E fn1 from 10", "50 E fn0 from 1"));
  EXPECT_EQ(h.model.stats().unwinds, 1u);
}

TEST(CallStackTest, ExceptionReturnUnwindsThreeFrames) {
  // _Unwind_RaiseException "returns" into the landing pad of fn0.
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kCall, 20, Fn(1, 1), Fn(2));
  h.Ev(BranchKind::kCall, 30, Fn(2, 1), Fn(3));
  h.Ev(BranchKind::kCall, 35, Fn(3, 1), Fn(4));  // the unwinder
  h.Ev(BranchKind::kReturn, 40, Fn(4, 1), Fn(0, 0x40));
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "10 B fn1", "20 B fn2", "30 B fn3", "35 B fn4",
                                        "40 E fn4 from 35", "40 E fn3 from 30", "40 E fn2 from 20",
                                        "40 E fn1 from 10", "50 E fn0 from 1"));
}

TEST(CallStackTest, SyscallAndUntracedPseudoFrames) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  BranchEvent d;
  d.kind = BranchKind::kDisable;
  d.time = 10;
  d.from = Fn(0, 2);
  d.syscall = true;
  h.model.OnEvent(d);
  h.Ev(BranchKind::kEnable, 20, 0, Fn(0, 4));
  h.Ev(BranchKind::kDisable, 30, Fn(0, 5), 0);
  h.Ev(BranchKind::kEnable, 40, 0, Fn(0, 6));
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B [syscall]", "20 E [syscall] from 10", "30 B [untraced]",
                          "40 E [untraced] from 30", "50 E fn0 from 1"));
}

// GCC's hot/cold partitioning: fn1 jumps into its split-off part
// fn1.cold and back. The part is fn1's own code: one fn1 frame, not a tail
// call into the part and another back (what magic-trace's rule gives).
TEST(CallStackTest, AJumpIntoASplitPartEndsNoFrame) {
  Harness h;
  h.symbols.AddPerfMap(1, decode::ParsePerfMap("6000 40 fn1.cold\n"));
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kJump, 20, Fn(1, 4), 0x6004);     // into the cold part (not its start)
  h.Ev(BranchKind::kJump, 25, 0x6008, 0x6000);       // inside it
  h.Ev(BranchKind::kJump, 30, 0x600c, Fn(1, 0x20));  // back
  h.Ev(BranchKind::kJump, 35, Fn(1, 0x24), 0x6000);  // and in again, at the part's start
  h.Ev(BranchKind::kReturn, 40, 0x6010, Fn(0, 6));   // the part returns for fn1
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "40 E fn1 from 10", "50 E fn0 from 1"));
}

// The cascade seen on CPython: in recursion, the inner frame's jump back
// from its cold part lands in the middle of the function that the outer
// frame runs too. Taking it for a longjmp to the outer frame (or the
// jump into the part for a tail call) shifted every return after it; the
// frames must nest exactly as the calls did.
TEST(CallStackTest, RecursionThroughAColdPartNestsExactly) {
  Harness h;
  h.symbols.AddPerfMap(1, decode::ParsePerfMap("6000 40 fn1.cold\n"));
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));             // outer fn1
  h.Ev(BranchKind::kCall, 20, Fn(1, 0x10), Fn(1));          // inner fn1
  h.Ev(BranchKind::kJump, 30, Fn(1, 4), 0x6004);            // inner: into the cold part
  h.Ev(BranchKind::kJump, 40, 0x6008, Fn(1, 0x30));         // and back into fn1's middle
  h.Ev(BranchKind::kReturn, 50, Fn(1, 0x34), Fn(1, 0x15));  // inner returns to outer
  h.Ev(BranchKind::kReturn, 60, Fn(1, 0x34), Fn(0, 6));     // outer returns to fn0
  h.Ev(BranchKind::kCall, 70, Fn(0, 8), Fn(2));
  h.Ev(BranchKind::kReturn, 80, Fn(2, 1), Fn(0, 13));
  h.model.EndSegment(90);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B fn1", "50 E fn1 from 20", "60 E fn1 from 10",
                          "70 B fn2", "80 E fn2 from 70", "90 E fn0 from 1"));
}

// A tail-called frame returns for the call that reached it: a jump to an
// entry replaces the frame and inherits its call site; a jump into the
// middle of another named function (shared code, glibc's mempcpy into
// memmove) is a tail call too, as perf names that code.
TEST(CallStackTest, ATailCalledFrameReturnsForTheCallThatReachedIt) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kJump, 20, Fn(1, 4), Fn(3, 0x40));  // mid-fn3: shared code
  h.Ev(BranchKind::kJump, 25, Fn(3, 0x44), Fn(2));     // fn2's entry: a tail call
  h.Ev(BranchKind::kReturn, 30, Fn(2, 8), Fn(0, 6));   // fn2 returns for fn1's call
  h.Ev(BranchKind::kCall, 35, Fn(0, 8), Fn(4));
  h.model.EndSegment(40);
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "10 B fn1", "20 E fn1 from 10", "20 B fn3",
                                        "25 E fn3 from 20", "25 B fn2", "30 E fn2 from 25",
                                        "35 B fn4", "40 E fn4 from 35", "40 E fn0 from 1"));
}

// A return to just past a call on the stack returns from that call's frame,
// as perf's thread stack pops to the matching return address: frames above
// it (whose returns the trace did not show) end with it.
TEST(CallStackTest, AReturnPopsToTheFrameWhoseCallItReturnsTo) {
  Harness h;
  ViaSink via;
  CallStackModel model(&h.symbols, &via);
  model.BeginSegment(1, 1);
  auto ev = [&](BranchKind k, uint64_t t, uint64_t from, uint64_t to) {
    Feed(model, k, t, from, to);
  };
  ev(BranchKind::kEnable, 0, 0, Fn(0));
  ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));       // fn0 -> fn1
  ev(BranchKind::kCall, 20, Fn(1, 0x10), Fn(1));    // fn1 -> fn1
  ev(BranchKind::kCall, 30, Fn(1, 0x10), Fn(2));    // fn1 -> fn2
  ev(BranchKind::kReturn, 40, Fn(2, 1), Fn(0, 6));  // to fn0's call: fn2 and both fn1 end
  ev(BranchKind::kCall, 50, Fn(0, 8), Fn(3));
  model.EndSegment(60);
  EXPECT_THAT(via.lines, ElementsAre("B fn0 start", "B fn1 call", "B fn1 call", "B fn2 call",
                                     "E fn2 unwind", "E fn1 unwind", "E fn1 return", "B fn3 call",
                                     "E fn3 close", "E fn0 close"));
}

TEST(CallStackTest, DecodeErrorClosesFramesAndRestartsInference) {
  // magic-trace memmove_decode_error: frames after the error are inferred
  // from the error time, not from the trace start.
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  BranchEvent err;
  err.kind = BranchKind::kError;
  err.time = 21;
  err.error = -pte_overflow;  // libipt's text: "overflow"
  h.model.OnEvent(err);
  h.Ev(BranchKind::kJump, 67, 0, Fn(1, 0x10));  // resumes inside fn1
  h.Ev(BranchKind::kReturn, 100, Fn(1, 0x11), Fn(0, 0x20));
  h.model.EndSegment(141);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "21 I [decode error: overflow]",
                          "21 E fn1 from 10", "21 E fn0 from 1", "100 E fn1 from 21",
                          "141 E fn0 from 21", "21 B fn0 inferred", "21 B fn1 inferred"));
  EXPECT_EQ(h.model.stats().decode_errors, 1u);
}

// An unmapped-code error at a branch into KSYMBOL-named code (a BPF
// program whose bytes the trace has not): after the marker, a frame with
// the program's name runs until the first event after the resync, and the
// frames inferred then begin there. The same error before the program's
// load, or at an address no KSYMBOL names, is the marker alone.
TEST(CallStackTest, UnreadableKsymbolCodeIsANamedGapUntilDecodingResumes) {
  constexpr uint64_t kProg = 0xffffffffa0001000;
  for (const uint64_t load : {5, 30}) {
    for (const uint64_t target : {kProg + 0x10, kProg + 0x100}) {
      SCOPED_TRACE(::testing::Message() << "load " << load << " target " << target);
      Harness h;
      h.symbols.AddKernelSymbol(load, kProg, 0x100, "bpf_prog_abcd_x", "[bpf]");
      h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
      h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
      BranchEvent err;
      err.kind = BranchKind::kError;
      err.time = 21;
      err.error = -pte_nomap;
      err.from = Fn(1, 1);
      err.error_at_from = true;
      err.to = target;
      h.model.OnEvent(err);
      h.Ev(BranchKind::kJump, 67, 0, Fn(1, 0x10));  // resumes inside fn1
      h.Ev(BranchKind::kReturn, 100, Fn(1, 0x11), Fn(0, 0x20));
      h.model.EndSegment(141);
      if (load == 5 && target == kProg + 0x10) {
        EXPECT_THAT(h.sink.lines,
                    ElementsAre("1 B fn0", "10 B fn1",
                                "21 I [decode error: no memory mapped at this address at 0x2001]",
                                "21 E fn1 from 10", "21 E fn0 from 1", "21 B bpf_prog_abcd_x",
                                "67 E bpf_prog_abcd_x from 21", "100 E fn1 from 67",
                                "141 E fn0 from 67", "67 B fn0 inferred", "67 B fn1 inferred"));
      } else {
        EXPECT_THAT(h.sink.lines,
                    ElementsAre("1 B fn0", "10 B fn1",
                                "21 I [decode error: no memory mapped at this address at 0x2001]",
                                "21 E fn1 from 10", "21 E fn0 from 1", "100 E fn1 from 21",
                                "141 E fn0 from 21", "21 B fn0 inferred", "21 B fn1 inferred"));
      }
      EXPECT_EQ(h.model.stats().decode_errors, 1u);
    }
  }
}

TEST(CallStackTest, KernelNestsAboveTheUserStack) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kFarCall, 10, Fn(0, 2), Fn(3));  // syscall into "kernel" fn3
  h.Ev(BranchKind::kCall, 20, Fn(3, 1), Fn(4));
  h.Ev(BranchKind::kReturn, 30, Fn(4, 1), Fn(3, 2));
  h.Ev(BranchKind::kFarReturn, 40, Fn(3, 3), Fn(0, 3));
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines, ElementsAre("1 B fn0", "10 B fn3", "20 B fn4", "30 E fn4 from 20",
                                        "40 E fn3 from 10", "50 E fn0 from 1"));
}

// Per-CPU segments: two threads take turns; each keeps its stack, its
// open [untraced] frame and its pending timestamps across the switch, and
// the segment's end closes both.
TEST(CallStackTest, ThreadsKeepTheirStacksAcrossSwitches) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 2), 0);  // thread 1 blocks
  h.model.SwitchThread(1, 2);
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2));
  h.Ev(BranchKind::kCall, 40, Fn(2, 1), Fn(3));
  h.model.SwitchThread(1, 1);
  h.Ev(BranchKind::kEnable, 50, 0, Fn(1, 3));  // thread 1 resumes where it was
  h.Ev(BranchKind::kReturn, 60, Fn(1, 4), Fn(0, 2));
  h.model.SwitchThread(1, 2);
  h.Ev(BranchKind::kReturn, 70, Fn(3, 1), Fn(2, 2));
  h.model.MarkerOnEveryThread(80, "[snap]");
  h.model.EndSegment(90);
  EXPECT_THAT(
      h.sink.threads,
      ElementsAre("1: 1 B fn0", "1: 10 B fn1", "1: 20 B [untraced]", "2: 31 B fn2", "2: 40 B fn3",
                  "1: 50 E [untraced] from 20", "1: 60 E fn1 from 10", "2: 70 E fn3 from 40",
                  "2: 80 I [snap]", "1: 80 I [snap]", "2: 90 E fn2 from 31", "1: 90 E fn0 from 1"));
}

// --filter: fn0 is traced, fn1 (its callee) is not. The call into fn1 and
// the return from fn0 are branches out of the ranges (the decoder emits them
// before the disable); tracing resumes in fn0 after fn1 returned, and at
// fn0's entry for its next call. fn0's calls stay two calls.
TEST(CallStackTest, FilterGapsEndTheUntracedCalleesAndKeepCallsApart) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));        // TIP.PGE at fn0
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));  // leaves the range
  h.Ev(BranchKind::kDisable, 10, Fn(0, 1), 0);
  h.Ev(BranchKind::kEnable, 20, 0, Fn(0, 6));         // back in fn0
  h.Ev(BranchKind::kReturn, 30, Fn(0, 8), Fn(2, 4));  // fn0 returns to fn2
  h.Ev(BranchKind::kDisable, 30, Fn(0, 8), 0);
  h.Ev(BranchKind::kEnable, 40, 0, Fn(0));  // fn0 called again
  h.Ev(BranchKind::kReturn, 50, Fn(0, 8), Fn(2, 8));
  h.Ev(BranchKind::kDisable, 50, Fn(0, 8), 0);
  h.model.EndSegment(60);
  // The calls sharing time 10 share it (the [untraced] span begins at 11);
  // fn2, known only from the return into it, is written at the end.
  EXPECT_THAT(
      h.sink.lines,
      ElementsAre("1 B fn0", "10 B fn1", "11 B [untraced]", "20 E [untraced] from 11",
                  "20 E fn1 from 10", "30 E fn0 from 1", "30 B [untraced]",
                  "40 E [untraced] from 30", "40 B fn0", "50 E fn0 from 40", "50 B [untraced]",
                  "60 E [untraced] from 50", "60 E fn2 from 0", "0 B fn2 inferred"));
}

// An exec ends every frame of the old program when the new program starts
// (the execve's [untraced] span lasts until then).
TEST(CallStackTest, ExecSpaceEndsTheOldProgramsFrames) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 2), 0);
  h.model.SetSpace(1, /*exec=*/true);
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2));
  h.model.EndSegment(40);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [untraced]", "30 E [untraced] from 20",
                          "30 E fn1 from 10", "30 E fn0 from 1", "30 B fn2", "40 E fn2 from 30"));
}

// A signal in a user-only trace: tracing stops in the interrupted function
// (fn1), resumes at the handler's entry (fn2), whose return lands in the
// sigreturn trampoline (fn4, __restore_rt); its rt_sigreturn syscall
// resumes tracing at the interrupted IP. The handler and the trampoline
// nest above fn1, which keeps its frame.
TEST(CallStackTest, AsyncSignalHandlerNestsAboveTheInterruptedFrame) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 2), 0);   // timer: tracing stops in fn1
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2));       // the handler's entry
  h.Ev(BranchKind::kCall, 32, Fn(2, 1), Fn(3));  // the handler calls fn3
  h.Ev(BranchKind::kReturn, 34, Fn(3, 1), Fn(2, 2));
  h.Ev(BranchKind::kReturn, 36, Fn(2, 3), Fn(4));  // into __restore_rt
  BranchEvent sigreturn;
  sigreturn.kind = BranchKind::kDisable;
  sigreturn.time = 38;
  sigreturn.from = Fn(4, 2);
  sigreturn.syscall = true;
  h.model.OnEvent(sigreturn);
  h.Ev(BranchKind::kEnable, 40, 0, Fn(1, 2));  // back at the interrupted IP
  h.Ev(BranchKind::kJump, 45, Fn(1, 3), Fn(1, 8));
  h.Ev(BranchKind::kReturn, 50, Fn(1, 9), Fn(0, 4));
  h.model.EndSegment(60);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [untraced]", "30 E [untraced] from 20",
                          "30 B fn2", "32 B fn3", "34 E fn3 from 32", "36 E fn2 from 30",
                          "36 B fn4", "38 B [syscall]", "40 E [syscall] from 38",
                          "40 E fn4 from 36", "50 E fn1 from 10", "60 E fn0 from 1"));
  EXPECT_EQ(h.model.stats().inferred, 0u);
}

// raise()/kill() of the thread itself: the signal is delivered on the way
// out of the syscall, so the handler runs between the [syscall] span and
// the syscall's return, nested above the function that made it.
TEST(CallStackTest, SignalDuringASyscallNestsAboveTheCaller) {
  Harness h;
  auto syscall_at = [&](uint64_t t, uint64_t from) {
    BranchEvent d;
    d.kind = BranchKind::kDisable;
    d.time = t;
    d.from = from;
    d.syscall = true;
    h.model.OnEvent(d);
  };
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));       // raise
  syscall_at(20, Fn(1, 2));                           // tgkill
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2));            // the handler
  h.Ev(BranchKind::kJump, 32, Fn(2, 1), Fn(3));       // tail call: still the handler's
  h.Ev(BranchKind::kReturn, 36, Fn(3, 3), Fn(4));     // into __restore_rt
  syscall_at(38, Fn(4, 2));                           // rt_sigreturn
  h.Ev(BranchKind::kEnable, 40, 0, Fn(1, 4));         // after tgkill's syscall
  h.Ev(BranchKind::kReturn, 50, Fn(1, 5), Fn(0, 2));  // raise returns to fn0
  h.model.EndSegment(60);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [syscall]", "30 E [syscall] from 20",
                          "30 B fn2", "32 E fn2 from 30", "32 B fn3", "36 E fn3 from 32",
                          "36 B fn4", "38 B [syscall]", "40 E [syscall] from 38",
                          "40 E fn4 from 36", "50 E fn1 from 10", "60 E fn0 from 1"));
  EXPECT_EQ(h.model.stats().inferred, 0u);
}

// Tracing resuming in the middle of another function is no handler entry:
// as before, the frame switches at the next block boundary.
TEST(CallStackTest, ResumeInsideAnotherFunctionIsNoHandler) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 2), 0);
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2, 4));
  h.Ev(BranchKind::kJump, 35, Fn(2, 5), Fn(2, 8));
  h.model.EndSegment(40);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [untraced]", "30 E [untraced] from 20",
                          "35 E fn1 from 10", "35 B fn2", "40 E fn2 from 35", "40 E fn0 from 1"));
}

// A handler whose return lands inside a frame below the interrupted one
// (an unwinder leaving it) unwinds to that frame, as any return does.
TEST(CallStackTest, HandlerReturningIntoACallerUnwinds) {
  Harness h;
  h.Ev(BranchKind::kEnable, 0, 0, Fn(0));
  h.Ev(BranchKind::kCall, 10, Fn(0, 1), Fn(1));
  h.Ev(BranchKind::kDisable, 20, Fn(1, 2), 0);
  h.Ev(BranchKind::kEnable, 30, 0, Fn(2));
  h.Ev(BranchKind::kReturn, 40, Fn(2, 3), Fn(0, 0x20));
  h.model.EndSegment(50);
  EXPECT_THAT(h.sink.lines,
              ElementsAre("1 B fn0", "10 B fn1", "20 B [untraced]", "30 E [untraced] from 20",
                          "30 B fn2", "40 E fn2 from 30", "40 E fn1 from 10", "50 E fn0 from 1"));
  EXPECT_EQ(h.model.stats().unwinds, 1u);
}

// Each begin and end says how it came about (Slice::via), which is what
// tools/perf-agree matches against perf's call/return stack.
TEST(CallStackTest, FramesSayHowTheyBeganAndEnded) {
  decode::Symbolizer symbols;
  symbols.AddPerfMap(1, decode::ParsePerfMap("1000 100 fn0\n2000 100 fn1\n3000 100 fn2\n"
                                             "4000 100 fn3\n"));
  ViaSink sink;
  CallStackModel model(&symbols, &sink);
  model.BeginSegment(1, 1);
  auto ev = [&](BranchKind k, uint64_t t, uint64_t from, uint64_t to, bool syscall = false) {
    BranchEvent e;
    e.kind = k;
    e.time = t;
    e.from = from;
    e.to = to;
    e.syscall = syscall;
    model.OnEvent(e);
  };
  ev(BranchKind::kEnable, 1, 0, Fn(0));
  ev(BranchKind::kCall, 2, Fn(0, 1), Fn(1));            // fn0 calls fn1
  ev(BranchKind::kJump, 3, Fn(1, 1), Fn(2));            // which tail-calls fn2
  ev(BranchKind::kReturn, 4, Fn(2, 1), Fn(0, 6));       // fn2 returns to fn0
  ev(BranchKind::kCall, 5, Fn(0, 7), Fn(1));            // fn0 calls fn1
  ev(BranchKind::kCall, 6, Fn(1, 2), Fn(2));            // fn1 calls fn2
  ev(BranchKind::kJump, 7, Fn(2, 2), Fn(0, 9));         // longjmp back into fn0
  ev(BranchKind::kDisable, 8, Fn(0, 10), 0, true);      // a syscall, untraced
  ev(BranchKind::kEnable, 9, 0, Fn(0, 12));             // back
  ev(BranchKind::kFarCall, 10, Fn(0, 13), Fn(3));       // an interrupt into fn3
  ev(BranchKind::kCall, 11, Fn(3, 1), Fn(1));           // fn3 calls fn1
  ev(BranchKind::kFarReturn, 12, Fn(1, 3), Fn(0, 13));  // iret from fn1
  model.EndSegment(20);
  EXPECT_THAT(sink.lines,
              ElementsAre("B fn0 start", "B fn1 call", "E fn1 jump", "B fn2 jump", "E fn2 return",
                          "B fn1 call", "B fn2 call", "E fn2 unwind", "E fn1 unwind",
                          "B [syscall] untraced", "E [syscall] resume", "B fn3 kernel",
                          "B fn1 call", "E fn1 return", "E fn3 close", "E fn0 close"));
}

// tests/programs/decode/inline.c (-O2, DWARF) mapped at kBase in process 1.
struct InlineHarness {
  static constexpr uint64_t kBase = 0x555500000000;
  explicit InlineHarness(bool inline_frames) : model(&symbols, &sink) {
    symbols.AddMapping(1, kBase, 0x10000, 0, PTSNAP_DECODE_INLINE, "inline");
    model.SetInlineFrames(inline_frames);
    model.BeginSegment(1, 1);
    auto elf = elf::SymbolFile::Open(PTSNAP_DECODE_INLINE);
    for (const auto& sym : elf->symbols().symbols()) {
      if (sym.name == "main") main = kBase + sym.start;
      if (sym.name == "loop_caller") caller = symbols.Resolve(1, kBase + sym.start);
    }
  }
  void Ev(BranchKind k, uint64_t t, uint64_t from, uint64_t to) { Feed(model, k, t, from, to); }
  decode::Symbolizer symbols;
  ViaSink sink;
  CallStackModel model;
  uint64_t main = 0;
  decode::Resolved caller;
};

TEST(CallStackTest, InlinedCodeIsANestedFrameWhileTheCodeIsInIt) {
  InlineHarness h(true);
  ASSERT_TRUE(h.caller.known);
  // main calls loop_caller, whose whole body then runs as one straight
  // block up to its last byte, which returns: the block crosses the code
  // of inl_step, inlined into it.
  h.Ev(BranchKind::kCall, 100, h.main + 4, h.caller.start);
  h.Ev(BranchKind::kReturn, 200, h.caller.end - 1, h.main + 9);
  h.model.EndSegment(300);
  EXPECT_THAT(h.sink.lines, ElementsAre("B loop_caller call", "B inl_step (inlined) inline",
                                        "E inl_step (inlined) inline", "E loop_caller return",
                                        "E main close", "B main inferred"));
}

// Under the emulator every instruction takes 1 ns: an inlined frame
// begins and ends after as many ns as the block ran instructions before
// it, counted in the code.
TEST(CallStackTest, InlinedFramesAreTimedByTheBlocksInstructions) {
  InlineHarness h(true);
  const decode::InlineRuns* runs =
      h.symbols.Inlines(1, h.caller.start, h.caller.start, h.caller.end - 1);
  ASSERT_NE(runs, nullptr);
  ASSERT_EQ(runs->runs.size(), 3u);  // loop_caller's code, inl_step's, loop_caller's
  ASSERT_GT(runs->insns, 0u);
  const uint64_t t0 = 100;
  h.Ev(BranchKind::kCall, t0, h.main + 4, h.caller.start);
  h.Ev(BranchKind::kReturn, t0 + runs->insns, h.caller.end - 1, h.main + 9);
  h.model.EndSegment(1000);
  ASSERT_THAT(h.sink.lines, ElementsAre("B loop_caller call", "B inl_step (inlined) inline",
                                        "E inl_step (inlined) inline", "E loop_caller return",
                                        "E main close", "B main inferred"));
  EXPECT_EQ(h.sink.times[1], t0 + runs->runs[1].insn);
  EXPECT_EQ(h.sink.times[2], t0 + runs->runs[2].insn);
  EXPECT_GT(runs->runs[1].insn, 0u);
  EXPECT_GT(runs->runs[2].insn, runs->runs[1].insn);
}

TEST(CallStackTest, InlinedFramesEndWithTheirRealFrame) {
  InlineHarness h(true);
  const decode::InlineRuns* runs =
      h.symbols.Inlines(1, h.caller.start, h.caller.start, h.caller.end - 1);
  ASSERT_NE(runs, nullptr);
  ASSERT_GE(runs->runs.size(), 2u);
  const uint64_t inside = runs->runs[1].addr;  // the first byte of inl_step's code
  // loop_caller runs into inl_step's code and returns from there (an
  // exception, a longjmp or a truncated trace end it the same way).
  h.Ev(BranchKind::kCall, 100, h.main + 4, h.caller.start);
  h.Ev(BranchKind::kReturn, 200, inside, h.main + 9);
  h.model.EndSegment(300);
  EXPECT_THAT(h.sink.lines, ElementsAre("B loop_caller call", "B inl_step (inlined) inline",
                                        "E inl_step (inlined) return", "E loop_caller return",
                                        "E main close", "B main inferred"));
}

TEST(CallStackTest, NoInlineFramesWhenTurnedOff) {
  InlineHarness h(false);
  h.Ev(BranchKind::kCall, 100, h.main + 4, h.caller.start);
  h.Ev(BranchKind::kReturn, 200, h.caller.end - 1, h.main + 9);
  h.model.EndSegment(300);
  EXPECT_THAT(h.sink.lines, ElementsAre("B loop_caller call", "E loop_caller return",
                                        "E main close", "B main inferred"));
}

}  // namespace
}  // namespace ptsnap::model
