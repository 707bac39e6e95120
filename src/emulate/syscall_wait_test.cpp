#include "emulate/syscall_wait.h"

#include <gtest/gtest.h>

namespace ptsnap::emulate {
namespace {

// A syscall's wall time is what --emulate-waits adds to its thread's clock:
// the ns from entry to return, one tick each.
TEST(SyscallWall, AReturnAddsTheWallTimeSinceTheEntry) {
  SyscallWall w;
  w.Enter(1'000'000);
  EXPECT_TRUE(w.in_flight());
  EXPECT_EQ(w.Return(21'000'500), 20'000'500u);  // a 20 ms sleep
  EXPECT_FALSE(w.in_flight());
}

// Each entry counts once: a second return (none is pending) adds nothing,
// and neither does a return seen without an entry (a thread the plugin met
// inside a syscall).
TEST(SyscallWall, OnlyAPendingEntryCounts) {
  SyscallWall w;
  EXPECT_EQ(w.Return(5'000), 0u);
  w.Enter(100);
  EXPECT_EQ(w.Return(350), 250u);
  EXPECT_EQ(w.Return(900), 0u);
  w.Enter(1'000);
  w.Enter(1'200);  // an entry with no return (exit, a successful execve) is replaced
  EXPECT_EQ(w.Return(1'300), 100u);
}

// A clock that did not move forward adds nothing (the virtual clock never
// goes back).
TEST(SyscallWall, AClockThatDidNotAdvanceAddsNothing) {
  SyscallWall w;
  w.Enter(7'000);
  EXPECT_EQ(w.Return(7'000), 0u);
  w.Enter(7'000);
  EXPECT_EQ(w.Return(6'999), 0u);
}

}  // namespace
}  // namespace ptsnap::emulate
