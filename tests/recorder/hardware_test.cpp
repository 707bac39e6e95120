// Real Intel PT recordings. Needs an intel_pt PMU and permission to use it
// on own children; skips, saying why, everywhere else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "record/recorder.h"
#include "sys/cpuid.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

// PSB: the packet stream boundary, 02 82 repeated 8 times (SDM 32.4.2.17).
bool HasPsb(const std::string& bytes) {
  static const std::string psb = [] {
    std::string s;
    for (int i = 0; i < 8; ++i) s += "\x02\x82";
    return s;
  }();
  return bytes.find(psb) != std::string::npos;
}

class Hardware : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/sys/bus/event_source/devices/intel_pt"))
      GTEST_SKIP() << "no intel_pt PMU (/sys/bus/event_source/devices/intel_pt is missing): "
                      "this machine cannot record Intel PT (a VM without PT pass-through?)";
    const char* t = std::getenv("PTSNAP_TRIGGER_TARGET");
    if (t == nullptr) GTEST_SKIP() << "PTSNAP_TRIGGER_TARGET is not set: run through meson test";
    target_ = t;
  }
  Result<Outcome> Run(RecordOptions o, const std::filesystem::path& dir) {
    FailureKind kind;
    sys::HostCpuid cpuid;
    auto p = Prepare(o, base::RootPath(), cpuid, &kind);
    if (!p) return std::move(p).error();
    return Record(o, std::move(*p), dir, base::RootPath(), &kind);
  }
  std::string target_;
};

TEST_F(Hardware, SnapshotAtTriggerOnWorkerThreadHoldsDecodablePt) {
  TempDir dir;
  RecordOptions o;
  o.command = {target_, "3", "delay"};
  o.trigger = "ptsnap_test_target";
  o.multi_thread = true;
  o.snapshot_size = 1 << 20;
  auto out = Run(o, dir.path() / "t");
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "t");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, "trigger");
  EXPECT_TRUE(m.time_conv.cap_user_time_zero);
  EXPECT_NE(m.pt.config, 0u);
  ASSERT_FALSE(m.streams.empty());
  bool psb = false;
  for (const auto& s : m.streams) {
    EXPECT_EQ(s.snapshot, 1u);
    auto bytes = reader->ReadStream(s);
    ASSERT_THAT(bytes, HasValue());
    psb |= HasPsb(*bytes);
  }
  EXPECT_TRUE(psb) << "no PSB packet in any stream";
}

TEST_F(Hardware, FullExecutionKeepsEverything) {
  TempDir dir;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.full_execution = true;
  o.timer.preset = "low";
  auto out = Run(o, dir.path() / "f");
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "f");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.mode, trace::Mode::kFull);
  ASSERT_EQ(m.streams.size(), 1u);
  EXPECT_EQ(m.streams[0].snapshot, 0u);
  EXPECT_GT(m.streams[0].size, 0u);
  ASSERT_FALSE(m.snapshots.empty());
  EXPECT_EQ(m.snapshots.back().reason, "full");
}

// System-wide: one stream per CPU (tid -1), CPU-wide switch records, PSBs.
TEST_F(Hardware, SystemWidePerCpuStreamsAndCpuWideSwitches) {
  if (geteuid() != 0) GTEST_SKIP() << "system-wide tracing needs root (or paranoid <= 0)";
  TempDir dir;
  RecordOptions o;
  o.command = {target_, "3", "delay"};  // run -a: the whole system while it runs
  o.all_cpus = true;
  o.snapshot_size = 1 << 20;
  o.timer.preset = "low";
  auto out = Run(o, dir.path() / "sw");
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "sw");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  ASSERT_FALSE(m.streams.empty());
  bool psb = false;
  for (const auto& s : m.streams) {
    EXPECT_GE(s.cpu, 0);
    EXPECT_EQ(s.tid, -1);
    auto bytes = reader->ReadStream(s);
    ASSERT_THAT(bytes, HasValue());
    psb |= HasPsb(*bytes);
  }
  EXPECT_TRUE(psb) << "no PSB packet in any CPU's stream";
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  int cpu_wide = 0, itrace = 0;
  for (const auto& r : sb->records) {
    cpu_wide += r.type == PERF_RECORD_SWITCH_CPU_WIDE;
    itrace += r.type == PERF_RECORD_ITRACE_START;
  }
  EXPECT_GT(cpu_wide, 0);
  EXPECT_GT(itrace, 0);
}

TEST_F(Hardware, SystemWideFullExecutionStreamsEveryCpu) {
  if (geteuid() != 0) GTEST_SKIP() << "system-wide tracing needs root (or paranoid <= 0)";
  TempDir dir;
  RecordOptions o;
  o.all_cpus = true;
  o.cpus = {0};
  o.full_execution = true;
  o.timer.preset = "low";
  o.duration = std::chrono::milliseconds(200);
  auto out = Run(o, dir.path() / "swf");
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "swf");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  ASSERT_EQ(m.streams.size(), 1u);
  EXPECT_EQ(m.streams[0].cpu, 0);
  EXPECT_GT(m.streams[0].size, 0u);
  auto bytes = reader->ReadStream(m.streams[0]);
  ASSERT_THAT(bytes, HasValue());
  EXPECT_TRUE(HasPsb(*bytes));
}

}  // namespace
}  // namespace ptsnap::record
