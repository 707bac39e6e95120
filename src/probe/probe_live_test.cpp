// Integration: the real probe on this machine. The development VM (and CI)
// is a KVM guest without PT pass-through, no /proc/kcore, running as root:
// these expectations describe it. On a machine with an intel_pt PMU the
// PT-specific assertions are skipped with the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "probe/probe.h"
#include "probe/render.h"

namespace ptsnap::probe {
namespace {

using ::testing::HasSubstr;

const Check& Get(const ProbeReport& r, std::string_view id) {
  const Check* c = r.Find(id);
  if (c == nullptr) {
    ADD_FAILURE() << "no check " << id;
    static const Check kNone{};
    return kNone;
  }
  return *c;
}

TEST(LiveProbe, DummyAndBreakpointEventsWork) {
  ProbeReport r = RunProbe(LiveEnv());
  const Check& dummy = Get(r, "live.dummy");
  EXPECT_EQ(dummy.status, Status::kOk) << dummy.value;
  EXPECT_THAT(dummy.value, HasSubstr("opened a software dummy event"));
  const Check& bp = Get(r, "live.breakpoint");
  EXPECT_EQ(bp.status, Status::kOk) << bp.value;
  EXPECT_THAT(bp.value, HasSubstr("opened an execute breakpoint at 0x"));
  // Root here, so the uprobe PMU is allowed too.
  const Check& up = Get(r, "live.uprobe");
  EXPECT_EQ(up.status, Status::kOk) << up.value;
  EXPECT_THAT(up.value, HasSubstr("probe_live_test+0x"));
}

TEST(LiveProbe, NoIntelPtAndNoKcoreHere) {
  if (std::filesystem::exists("/sys/bus/event_source/devices/intel_pt")) {
    GTEST_SKIP() << "this machine has an intel_pt PMU; the test describes the PT-less dev VM";
  }
  ProbeReport r = RunProbe(LiveEnv());
  EXPECT_FALSE(r.pt_available);
  EXPECT_EQ(Get(r, "pmu.intel_pt").status, Status::kFail);
  EXPECT_EQ(Get(r, "verdict.intel_pt").status, Status::kFail);
  EXPECT_THAT(Get(r, "verdict.intel_pt").value, HasSubstr("unavailable: no intel_pt PMU"));
  if (std::filesystem::exists("/proc/kcore")) {
    GTEST_SKIP() << "this machine has /proc/kcore";
  }
  EXPECT_THAT(Get(r, "kcore.file").value, HasSubstr("absent"));
  EXPECT_FALSE(r.kcore_usable);
  auto j = nlohmann::json::parse(RenderJson(r));
  EXPECT_EQ(j["pt_available"], false);
  EXPECT_EQ(j["kcore_usable"], false);
}

}  // namespace
}  // namespace ptsnap::probe
