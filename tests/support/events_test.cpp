// The tests' .events reader (events.h): fields come off the end of the
// line, so names with spaces survive.
#include "tests/support/events.h"

#include <gtest/gtest.h>

namespace ptsnap::testing {
namespace {

TEST(EventsReader, ReadsEveryKindOfLine) {
  auto ev = ParseEvents(
      "# ptsnap events v3\nP 7 prog [pid=7]\nT 7 8 prog\n"
      "10 7 8 B operator new(unsigned long) via=call dso=/usr/lib/libstdc++.so.6\n"
      "20 7 8 E operator new(unsigned long) begin=10 via=return dso=/usr/lib/libstdc++.so.6\n"
      "21 7 8 E _start begin=5 inferred via=jump dso=/bin/prog\n"
      "22 7 8 B [syscall] via=untraced\n"
      "5 7 8 X [unknown] end=9 inferred\n"
      "30 7 8 I [decode error: no memory mapped at this address]\n"
      "40 7 8 B [C-state C6] via=idle c_state=C6 sub_state=0 hardware_initiated=false\n"
      "50 7 8 E [C-state C6] begin=40 via=resume last_c_state=C2 deepest_c_state=C6 "
      "wake=interrupt\n");
  ASSERT_EQ(ev.size(), 8u);
  EXPECT_EQ(ev[0].kind, 'B');
  EXPECT_EQ(ev[0].name, "operator new(unsigned long)");
  EXPECT_EQ(ev[0].via, "call");
  EXPECT_EQ(ev[0].dso, "/usr/lib/libstdc++.so.6");
  EXPECT_EQ(ev[1].begin, 10u);
  EXPECT_EQ(ev[1].via, "return");
  EXPECT_EQ(ev[1].name, ev[0].name);
  EXPECT_TRUE(ev[2].inferred);
  EXPECT_EQ(ev[2].name, "_start");
  EXPECT_EQ(ev[2].begin, 5u);
  EXPECT_EQ(ev[3].name, "[syscall]");
  EXPECT_EQ(ev[3].dso, "");
  EXPECT_EQ(ev[4].kind, 'X');
  EXPECT_EQ(ev[4].end, 9u);
  EXPECT_TRUE(ev[4].inferred);
  EXPECT_EQ(ev[5].name, "[decode error: no memory mapped at this address]");
  EXPECT_EQ(ev[5].ts, 30u);
  EXPECT_EQ(ev[5].tid, 8);
  EXPECT_EQ(ev[6].name, "[C-state C6]");
  EXPECT_EQ(ev[6].via, "idle");
  EXPECT_EQ(ev[6].power, "c_state=C6 sub_state=0 hardware_initiated=false");
  EXPECT_EQ(ev[7].name, "[C-state C6]");
  EXPECT_EQ(ev[7].begin, 40u);
  EXPECT_EQ(ev[7].via, "resume");
  EXPECT_EQ(ev[7].power, "last_c_state=C2 deepest_c_state=C6 wake=interrupt");
  EXPECT_EQ(ev[0].power, "");
}

}  // namespace
}  // namespace ptsnap::testing
