// Hardware suite: on a machine with an intel_pt PMU the probe must say that
// PT recording works and describe the PMU. Skipped (with the reason) where
// there is no PMU, e.g. on the development VM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "probe/probe.h"

namespace ptsnap::probe {
namespace {

using ::testing::HasSubstr;

TEST(HardwareProbe, ReportsTheIntelPtPmu) {
  if (!std::filesystem::exists("/sys/bus/event_source/devices/intel_pt")) {
    GTEST_SKIP() << "no intel_pt PMU on this machine (/sys/bus/event_source/devices/intel_pt)";
  }
  ProbeReport r = RunProbe(LiveEnv());
  const Check* pmu = r.Find("pmu.intel_pt");
  ASSERT_NE(pmu, nullptr);
  EXPECT_EQ(pmu->status, Status::kOk) << pmu->value;
  EXPECT_THAT(pmu->value, HasSubstr("present, type "));
  const Check* format = r.Find("pmu.format");
  ASSERT_NE(format, nullptr);
  EXPECT_THAT(format->value, HasSubstr("pt=config:0"));
  EXPECT_THAT(format->value, HasSubstr("branch=config:13"));
  if (r.scopes.user) {
    EXPECT_TRUE(r.pt_available) << r.pt_reason;
    EXPECT_THAT(r.modes, ::testing::Contains("intel_pt-user"));
  }
}

}  // namespace
}  // namespace ptsnap::probe
