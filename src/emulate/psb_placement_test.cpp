#include "emulate/psb_placement.h"

#include <gtest/gtest.h>

namespace ptsnap::emulate {
namespace {

// A thread tracing along whose PSB period is due, entering a block after
// one that ended with `prev`.
PsbInputs DueInFlow(std::optional<ExitKind> prev) {
  return {.tracing = true, .started = true, .since_psb = 4096, .period = 4096, .prev = prev};
}

// The regression commit e101999 fixed: after a direct call or jump (no
// packet), or a block that just ends, a decoder has not walked up to the
// next block yet, so a due PSB+ there would set its TSC before the call and
// the instruction before it. It waits.
TEST(PsbPlacement, ADuePsbWaitsAfterABranchWithoutAPacket) {
  for (ExitKind k : {ExitKind::kDirectCall, ExitKind::kDirect, ExitKind::kNone, ExitKind::kRep}) {
    SCOPED_TRACE(ToString(k));
    EXPECT_FALSE(DecoderWalkedUpTo(k));
    EXPECT_EQ(PlacePsb(DueInFlow(k)), PsbAt::kNone);
  }
}

// After a branch that has a packet (a TNT bit, a TIP, a far transfer's
// TIP.PGD) the decoder is at the block: the due PSB+ goes there, with a FUP.
TEST(PsbPlacement, ADuePsbIsWrittenAfterABranchWithAPacket) {
  for (ExitKind k : {ExitKind::kCond, ExitKind::kIndirect, ExitKind::kIndirectCall, ExitKind::kRet,
                     ExitKind::kFar}) {
    SCOPED_TRACE(ToString(k));
    EXPECT_TRUE(DecoderWalkedUpTo(k));
    EXPECT_EQ(PlacePsb(DueInFlow(k)), PsbAt::kInFlow);
  }
  EXPECT_EQ(PlacePsb(DueInFlow(std::nullopt)), PsbAt::kInFlow);
}

// A PSB+ that waited goes out at the first block the decoder walks up to:
// a direct call, then the callee's conditional branch.
TEST(PsbPlacement, AWaitingPsbGoesOutAtTheNextWalkedBlock) {
  PsbInputs in = DueInFlow(ExitKind::kDirectCall);
  EXPECT_EQ(PlacePsb(in), PsbAt::kNone);
  in.since_psb += 12;  // the callee's packets so far
  in.prev = ExitKind::kCond;
  EXPECT_EQ(PlacePsb(in), PsbAt::kInFlow);
}

TEST(PsbPlacement, NoPsbBeforeThePeriodIsDue) {
  PsbInputs in = DueInFlow(ExitKind::kRet);
  in.since_psb = 4095;
  EXPECT_EQ(PlacePsb(in), PsbAt::kNone);
}

// Rewritten JIT code gets its PSB+ at once, even after a direct jump: the
// decoder must switch to the new bytes exactly there.
TEST(PsbPlacement, RewrittenCodeGetsAPsbAtOnce) {
  PsbInputs in = DueInFlow(ExitKind::kDirect);
  in.since_psb = 10;
  in.rewritten = true;
  EXPECT_EQ(PlacePsb(in), PsbAt::kInFlow);
}

// Tracing turning on (TIP.PGE): a PSB+ first at the stream's start, when the
// period is due (whatever led here: the PGE carries the IP), or at an
// --only-in resume; otherwise the PGE alone.
TEST(PsbPlacement, TracingTurningOnWritesAPsbWhenTheStreamNeedsOne) {
  PsbInputs in{.tracing = false, .started = false, .since_psb = 0, .period = 4096};
  EXPECT_EQ(PlacePsb(in), PsbAt::kBeforePge);
  in.started = true;
  EXPECT_EQ(PlacePsb(in), PsbAt::kNone);
  in.prev = ExitKind::kDirectCall;
  in.since_psb = 5000;
  EXPECT_EQ(PlacePsb(in), PsbAt::kBeforePge);
  in.since_psb = 0;
  in.resumed = true;
  EXPECT_EQ(PlacePsb(in), PsbAt::kBeforePge);
}

}  // namespace
}  // namespace ptsnap::emulate
