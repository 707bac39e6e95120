#include "sys/cpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::testing::ElementsAre;

TEST(ParseCpuList, RangesAndSingles) {
  EXPECT_THAT(ParseCpuList("0-1\n").value_or(std::vector<int>{}), ElementsAre(0, 1));
  EXPECT_THAT(ParseCpuList("0-2,5,7-8").value_or(std::vector<int>{}),
              ElementsAre(0, 1, 2, 5, 7, 8));
  EXPECT_THAT(ParseCpuList("3,1,1").value_or(std::vector<int>{}), ElementsAre(1, 3));
  EXPECT_THAT(ParseCpuList(""), HasErrorContaining("empty"));
  EXPECT_THAT(ParseCpuList("2-1"), HasErrorContaining("bad CPU list entry '2-1'"));
  EXPECT_THAT(ParseCpuList("0-99999999"), HasErrorContaining("bad"));
  EXPECT_THAT(ParseCpuList("a"), HasErrorContaining("bad"));
}

// Regression (cpu_list fuzzer): repeated huge ranges ran at ~500 inputs/s
// when every range appended to a vector that was then sorted; a bitmap keeps
// the work and memory bounded by the highest CPU number.
TEST(ParseCpuList, RepeatedLargeRangesStayBounded) {
  std::string list;
  for (int i = 0; i < 400; ++i) list += "0-65535,";
  list += "7";
  auto cpus = ParseCpuList(list);
  ASSERT_TRUE(cpus.has_value());
  EXPECT_EQ(cpus->size(), 65536u);
  EXPECT_EQ(cpus->back(), 65535);
  EXPECT_THAT(ParseCpuList("65536"), HasErrorContaining("bad CPU list entry"));
}

TEST(ReadOnlineCpus, LiveAndFake) {
  ptsnap::testing::TempDir dir;
  dir.Write("sys/devices/system/cpu/online", "0-3\n");
  EXPECT_EQ(ReadOnlineCpus(base::RootPath(dir.path())).value_or(std::vector<int>{}).size(), 4u);
  dir.Write("sys/devices/system/cpu/online", "x\n");
  EXPECT_THAT(ReadOnlineCpus(base::RootPath(dir.path())),
              HasErrorContaining("/sys/devices/system/cpu/online"));
  EXPECT_GE(ReadOnlineCpus(base::RootPath()).value_or(std::vector<int>{}).size(), 1u);
}

TEST(ParseFlagOnEveryCpu, EveryProcessorMustListIt) {
  const std::string both =
      "processor\t: 0\nflags\t\t: fpu pdcm sse\n\nprocessor\t: 1\nflags\t\t: fpu sse pdcm\n";
  EXPECT_TRUE(ParseFlagOnEveryCpu(both, "pdcm"));
  EXPECT_FALSE(ParseFlagOnEveryCpu(both, "pdcm2"));  // whole words only
  const std::string one =
      "processor\t: 0\nflags\t\t: fpu pdcm\n\nprocessor\t: 1\nflags\t\t: fpu sse\n";
  EXPECT_FALSE(ParseFlagOnEveryCpu(one, "pdcm"));
  EXPECT_FALSE(ParseFlagOnEveryCpu("processor\t: 0\n", "pdcm"));  // no flags line at all
  EXPECT_FALSE(ParseFlagOnEveryCpu("", "pdcm"));
  // vmx flags (" vmx flags\t: ...") are another line, not "flags".
  EXPECT_TRUE(ParseFlagOnEveryCpu("flags\t: pdcm\nvmx flags\t: ept\n", "pdcm"));
}

TEST(FlagOnEveryCpu, ReadsProcCpuinfoUnderTheRoot) {
  ::ptsnap::testing::TempDir d;
  EXPECT_FALSE(FlagOnEveryCpu(base::RootPath(d.path()), "pdcm"));
  d.Write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu pdcm\n");
  EXPECT_TRUE(FlagOnEveryCpu(base::RootPath(d.path()), "pdcm"));
}

}  // namespace
}  // namespace ptsnap::sys
