#include "sys/kernel_version.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasValue;

TEST(ParseKernelRelease, DistributionStrings) {
  struct Case {
    const char* release;
    int major, minor, patch;
  } cases[] = {
      {"6.1.0-27-amd64", 6, 1, 0},
      {"5.4.0-1103-aws", 5, 4, 0},
      {"5.15.0+", 5, 15, 0},
      {"4.19", 4, 19, 0},
      {"6.8.0rc1\n", 6, 8, 0},
      {"6.18.44-fc-v857", 6, 18, 44},
      {"5.10.209-198.858.amzn2.x86_64", 5, 10, 209},
  };
  for (const Case& c : cases) {
    auto v = ParseKernelRelease(c.release);
    ASSERT_THAT(v, HasValue()) << c.release;
    EXPECT_EQ(v->major, c.major) << c.release;
    EXPECT_EQ(v->minor, c.minor) << c.release;
    EXPECT_EQ(v->patch, c.patch) << c.release;
  }
  EXPECT_EQ(ParseKernelRelease("6.1.0-27-amd64\n")->release, "6.1.0-27-amd64");
}

TEST(ParseKernelRelease, Garbage) {
  EXPECT_THAT(ParseKernelRelease(""), HasError());
  EXPECT_THAT(ParseKernelRelease("linux"), HasError());
  EXPECT_THAT(ParseKernelRelease("6"), HasError());
  EXPECT_THAT(ParseKernelRelease("6."), HasError());
  EXPECT_THAT(ParseKernelRelease("99999999.1"), HasError());
}

TEST(KernelVersion, Gates) {
  auto v54 = *ParseKernelRelease("5.4.0-1103-aws");
  auto v515 = *ParseKernelRelease("5.15.0");
  EXPECT_FALSE(v54.AtLeast(5, 5));
  EXPECT_TRUE(v515.AtLeast(5, 5));
  EXPECT_TRUE(v54.AtLeast(5, 4));
  EXPECT_FALSE(v515.AtLeast(6, 13));
  bool has_kcore = false;
  for (const KernelFeature& f : KernelFeatures()) {
    if (f.id == "kcore") has_kcore = f.major == 5 && f.minor == 5;
  }
  EXPECT_TRUE(has_kcore);
  EXPECT_EQ(KernelFeatures().size(), 6u);
}

TEST(ReadKernelVersion, FromRootAndLive) {
  ptsnap::testing::TempDir dir;
  EXPECT_THAT(ReadKernelVersion(base::RootPath(dir.path())), HasError());
  dir.Write("proc/sys/kernel/osrelease", "5.4.0-1103-aws\n");
  auto v = ReadKernelVersion(base::RootPath(dir.path()));
  ASSERT_THAT(v, HasValue());
  EXPECT_EQ(v->Short(), "5.4.0");
  dir.Write("proc/sys/kernel/osrelease", "garbage\n");
  EXPECT_THAT(ReadKernelVersion(base::RootPath(dir.path())),
              ::ptsnap::testing::HasErrorContaining("/proc/sys/kernel/osrelease"));
  auto live = ReadKernelVersion(base::RootPath());
  ASSERT_THAT(live, HasValue());
  EXPECT_GE(live->major, 3);
}

}  // namespace
}  // namespace ptsnap::sys
