// record::Control: the requests a session loop gets from other threads and
// signal handlers, and the wake-up on trigger fds.
#include "record/control.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/unique_fd.h"

namespace ptsnap::record {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A readable fd ends the wait at once, not at the timeout: what makes a
// breakpoint hit reach the PT disable without the loop's sleep in between.
TEST(Control, WaitReturnsWhenAWakeFdBecomesReadable) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  base::UniqueFd r(p[0]), w(p[1]);
  Control c;
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    (void)!::write(w.get(), "x", 1);
  });
  const auto start = std::chrono::steady_clock::now();
  auto ready = c.Wait(seconds(30), {-1, r.get()});
  writer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0], 1u);
}

TEST(Control, SignalSafeRequestsWakeTheLoopAndAreCounted) {
  Control c;
  std::thread asker([&] {
    std::this_thread::sleep_for(milliseconds(20));
    c.RequestSnapshot();
    c.RequestSnapshot();
  });
  const auto start = std::chrono::steady_clock::now();
  (void)c.Wait(seconds(30));
  asker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
  auto reqs = c.TakeSnapshotRequests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].ticket, 0u);
  EXPECT_EQ(reqs[0].reason, "signal");
  EXPECT_TRUE(c.TakeSnapshotRequests().empty());
  EXPECT_FALSE(c.stop_requested());
  c.RequestStop();
  EXPECT_TRUE(c.stop_requested());
}

TEST(Control, SnapshotWaitsForTheLoopAndGetsItsNumber) {
  Control c;
  Result<uint32_t> got = Error("not yet");
  std::thread caller([&] { got = c.Snapshot("slow request"); });
  std::vector<Control::Pending> reqs;
  while (reqs.empty()) {
    (void)c.Wait(milliseconds(100));
    reqs = c.TakeSnapshotRequests();
  }
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_NE(reqs[0].ticket, 0u);
  EXPECT_EQ(reqs[0].reason, "slow request");
  c.Complete(reqs[0].ticket, 7u);
  caller.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 7u);
}

TEST(Control, CloseFailsWaitingAndLaterSnapshots) {
  Control c;
  Result<uint32_t> got = 1u;
  std::thread caller([&] { got = c.Snapshot("never taken"); });
  // The request is queued (or not yet made) when the loop ends: either way
  // the caller hears why, and does not wait forever.
  std::this_thread::sleep_for(milliseconds(5));
  c.Close("the program exited");
  caller.join();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().ToString().find("the program exited"), std::string::npos);
  auto later = c.Snapshot("late");
  ASSERT_FALSE(later);
  EXPECT_NE(later.error().ToString().find("has ended"), std::string::npos);
}

}  // namespace
}  // namespace ptsnap::record
