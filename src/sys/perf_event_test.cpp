// Integration: real perf_event_open calls (software events need no PMU).
#include "sys/perf_event.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "tests/support/result_matchers.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasValue;

TEST(PerfEventOpen, DummySoftwareEventOnSelf) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  auto fd = PerfEventOpen(attr, 0, -1, -1);
  ASSERT_THAT(fd, HasValue());
  EXPECT_TRUE(fd->valid());
}

TEST(PerfEventOpen, ErrorKeepsErrno) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = 0x7ffffff0;  // no such PMU
  auto fd = PerfEventOpen(attr, 0, -1, -1);
  ASSERT_FALSE(fd.has_value());
  EXPECT_NE(fd.error().errnum(), 0);
  EXPECT_THAT(fd.error().ToString(), ::testing::HasSubstr("perf_event_open(type 2147483632"));
  EXPECT_STRNE(ExplainPerfEventErrno(fd.error().errnum()), "");
}

}  // namespace
}  // namespace ptsnap::sys
