#include "output/plausibility.h"

#include <gtest/gtest.h>

#include <string>

namespace ptsnap::output {
namespace {

const std::string kMain = "main", kWork = "work";

Call MakeCall(const std::string* name, uint64_t begin, uint64_t end, bool outermost = true,
              bool inferred = false, int32_t tid = 7) {
  Call c;
  c.pid = 7;
  c.tid = tid;
  c.name = name;
  c.begin = begin;
  c.end = end;
  c.outermost = outermost;
  c.total_ns = outermost ? end - begin : 0;
  c.inferred = inferred;
  return c;
}

// Recursion counted once stays within the span: nothing to flag.
TEST(PlausibilityTest, ARealTimelinePasses) {
  PlausibilityCheck check;
  check.SetFullExecution(7);
  check.OnCall(MakeCall(&kWork, 20, 30, false));  // inner work, inside the outer one
  check.OnCall(MakeCall(&kWork, 10, 40));
  check.OnCall(MakeCall(&kWork, 50, 60));
  check.OnCall(MakeCall(&kMain, 1, 100));
  const Implausible r = check.Result();
  EXPECT_EQ(r.count(), 0u);
  EXPECT_EQ(FormatImplausible(r), "");
}

// What the old call-stack rules and accounting gave on Debian's python3:
// frames of one function that overlap each other (an inferred frame from
// the segment's start enclosing frames that already ended, both counted
// whole), adding up past the span.
TEST(PlausibilityTest, OverlappingFramesOfOneFunctionAreFlagged) {
  PlausibilityCheck check;
  check.OnCall(MakeCall(&kWork, 10, 90));
  check.OnCall(MakeCall(&kWork, 1, 100, true, true));  // inferred: from the segment's start
  check.OnCall(MakeCall(&kMain, 1, 100, true, false, 8));
  const Implausible r = check.Result();
  EXPECT_EQ(r.over_span, 1u);
  EXPECT_EQ(r.inferred, 0u);  // not a full-execution recording
  EXPECT_EQ(r.first_over_span, "work on thread 7: 179 ns in a 99 ns span");
  EXPECT_NE(FormatImplausible(r).find("Impossible results: 1."), std::string::npos);
}

// In a full-execution recording a frame begun before the trace cannot be;
// one inferred after a decode error (from the error's time) can.
TEST(PlausibilityTest, FramesBegunBeforeAFullExecutionTraceAreFlagged) {
  for (bool full : {false, true}) {
    PlausibilityCheck check;
    check.SetFullExecution(full ? 7 : 8);  // thread 8: another thread's trace starts at exec
    check.OnCall(MakeCall(&kWork, 5, 20));
    check.OnCall(MakeCall(&kMain, 1, 40, true, true));   // at the thread's first time
    check.OnCall(MakeCall(&kWork, 60, 80, true, true));  // after a reset at 60
    const Implausible r = check.Result();
    EXPECT_EQ(r.inferred, full ? 1u : 0u);
    if (full) {
      EXPECT_EQ(r.first_inferred, "main on thread 7, ending at 40 ns");
    }
  }
}

}  // namespace
}  // namespace ptsnap::output
