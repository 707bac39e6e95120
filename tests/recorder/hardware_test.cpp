// Real Intel PT recordings. Needs an intel_pt PMU and permission to use it
// on own children; skips, saying why, everywhere else. Each per-thread
// recording is decoded and must show the trigger target's known calls, so
// the first PT machine gives a verdict on the whole path (the timing
// programs' call structure is checked by timing_hardware). HardwareLbr:
// --sampling --callgraph-mode lbr, which needs a hardware PMU with LBR
// call-stack mode rather than PT; it skips, saying why, without one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "perf/attr.h"
#include "pipeline/pipeline.h"
#include "record/recorder.h"
#include "sys/cpuid.h"
#include "sys/kernel_version.h"
#include "tests/support/events.h"
#include "tests/support/result_matchers.h"
#include "tests/support/shell.h"
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
    target_ = ::ptsnap::testing::RequiredEnv("PTSNAP_TRIGGER_TARGET");
    ASSERT_FALSE(target_.empty());
  }
  Result<Outcome> Run(RecordOptions o, const std::filesystem::path& dir) {
    sys::HostCpuid cpuid;
    auto p = Prepare(o, base::RootPath(), cpuid);
    if (!p) return std::move(p).error();
    Control control;
    return Record(o, std::move(*p), dir, base::RootPath(), control, nullptr);
  }
  // Decodes `dir` to .events: no decode error, and the frames by thread.
  std::vector<::ptsnap::testing::EventLine> Decode(const std::filesystem::path& dir) {
    pipeline::DecodeOptions d;
    d.output = dir / "decoded.events";
    auto r = pipeline::DecodeTraceDir(dir, d);
    EXPECT_THAT(r, HasValue());
    if (!r) return {};
    EXPECT_EQ(r->decode.errors, 0u) << pipeline::FormatReport(*r);
    auto text = base::ReadFile(d.output);
    EXPECT_THAT(text, HasValue());
    return text ? ::ptsnap::testing::ParseEvents(*text)
                : std::vector<::ptsnap::testing::EventLine>{};
  }
  // Calls (frames begun via=call) of `name` per thread, in thread order.
  static std::vector<int> Calls(const std::vector<::ptsnap::testing::EventLine>& ev,
                                const std::string& name) {
    std::map<int32_t, int> by_tid;
    for (const auto& e : ev) {
      if (e.kind == 'B' && e.name == name && e.via == "call") by_tid[e.tid]++;
    }
    std::vector<int> out;
    for (const auto& [tid, n] : by_tid) out.push_back(n);
    return out;
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
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kTrigger);
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
  // The snapshot is taken at the first call of ptsnap_test_target, on the
  // worker thread; 1 MiB holds everything before it: main, and the worker
  // started by start_thread (the call itself may still sit in the CPU's
  // packet buffers when the snapshot is read).
  auto ev = Decode(dir.path() / "t");
  EXPECT_THAT(Calls(ev, "main"), ::testing::ElementsAre(1));
  EXPECT_THAT(Calls(ev, "(anonymous namespace)::Worker(void*)"), ::testing::ElementsAre(1));
}

TEST_F(Hardware, FullExecutionKeepsEverything) {
  TempDir dir;
  RecordOptions o;
  o.command = {target_, "3", "delay"};
  o.multi_thread = true;
  o.full_execution = true;
  o.timer.preset = "low";
  auto out = Run(o, dir.path() / "f");
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "f");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.mode, trace::Mode::kFull);
  ASSERT_EQ(m.streams.size(), 2u);  // the main thread and the worker
  for (const auto& st : m.streams) {
    EXPECT_EQ(st.snapshot, 0u);
    EXPECT_GT(st.size, 0u);
  }
  ASSERT_FALSE(m.snapshots.empty());
  EXPECT_EQ(m.snapshots.back().reason, trace::SnapshotReason::kFull);
  // The whole run: main once, the worker's 3 calls of the target, the main
  // thread's ptsnap_take_snapshot once.
  auto ev = Decode(dir.path() / "f");
  EXPECT_THAT(Calls(ev, "main"), ::testing::ElementsAre(1));
  EXPECT_THAT(Calls(ev, "(anonymous namespace)::Worker(void*)"), ::testing::ElementsAre(1));
  EXPECT_THAT(Calls(ev, "ptsnap_test_target"), ::testing::ElementsAre(3));
  EXPECT_THAT(Calls(ev, "ptsnap_take_snapshot"), ::testing::ElementsAre(1));
}

// --only-in on Linux 6.13+: the intel_pt event opens paused, the entry
// uprobe on ptsnap_test_target resumes it and the return uprobe pauses it
// (members of its group): the whole run holds the worker's 3 calls of it
// and nothing of main or the worker's own loop.
TEST_F(Hardware, OnlyInTracesOnlyWhileTheFunctionRuns) {
  auto kv = sys::ReadKernelVersion(base::RootPath());
  if (!kv || !perf::HasAuxPause(*kv))
    GTEST_SKIP() << "AUX pause/resume needs Linux 6.13+ (this kernel: "
                 << (kv ? std::to_string(kv->major) + "." + std::to_string(kv->minor) : "unknown")
                 << "); the --filter fallback is covered by the unit tests";
  TempDir dir;
  RecordOptions o;
  o.command = {target_, "3", "delay"};
  o.only_in = "ptsnap_test_target";
  o.multi_thread = true;
  o.full_execution = true;
  o.timer.preset = "low";
  auto out = Run(o, dir.path() / "o");
  ASSERT_THAT(out, HasValue());
  auto ev = Decode(dir.path() / "o");
  int target = 0, main = 0;
  for (const auto& e : ev) {
    if (e.kind != 'B') continue;
    target += e.name == "ptsnap_test_target";
    main += e.name == "main";
  }
  EXPECT_EQ(target, 3);  // each call, traced from its entry
  EXPECT_EQ(main, 0);    // paused outside it
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

// LBR call stacks: sampling_spin's spin_outer -> spin_middle -> spin_inner
// sampled on cycles with PERF_SAMPLE_BRANCH_STACK (call-stack mode) and
// decoded from the branch records.
TEST(HardwareLbr, SampledRunUnwindsFromTheLbrCallStack) {
  const std::string spin = ::ptsnap::testing::RequiredEnv("PTSNAP_SAMPLING_SPIN");
  ASSERT_FALSE(spin.empty());
  RecordOptions o;
  o.sampling = true;
  o.callgraph_mode = "lbr";
  o.full_execution = true;
  o.command = {spin, "300"};
  auto timer = perf::ParseTiming("sample:4000");
  ASSERT_THAT(timer, HasValue());
  o.timer = *timer;
  sys::HostCpuid cpuid;
  auto p = Prepare(o, base::RootPath(), cpuid);
  if (!p && p.error().ToString().find("no LBR call-stack support") != std::string::npos)
    GTEST_SKIP() << p.error().ToString();
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->sampling.has_value());
  EXPECT_NE(p->sampling->sampling_attr.sample_type & PERF_SAMPLE_BRANCH_STACK, 0u);
  TempDir dir;
  Control control;
  auto out = Record(o, std::move(*p), dir.path() / "l", base::RootPath(), control, nullptr);
  ASSERT_THAT(out, HasValue());
  pipeline::DecodeOptions d;
  d.output = dir.path() / "l.events";
  auto r = pipeline::DecodeTraceDir(dir.path() / "l", d);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->sampled.callgraph, "lbr");
  EXPECT_GT(r->sampled.samples, 100u) << pipeline::FormatReport(*r);
  EXPECT_GT(r->sampled.unwound, r->sampled.samples / 2) << pipeline::FormatReport(*r);
  auto text = base::ReadFile(d.output);
  ASSERT_THAT(text, HasValue());
  // spin_inner's frames sit under spin_middle under spin_outer.
  int nested = 0;
  std::vector<std::string> stack;
  for (const auto& e : ::ptsnap::testing::ParseEvents(*text)) {
    if (e.kind == 'B') {
      if (e.name == "spin_inner" && stack.size() >= 2 && stack[stack.size() - 1] == "spin_middle" &&
          stack[stack.size() - 2] == "spin_outer")
        ++nested;
      stack.push_back(e.name);
    } else if (e.kind == 'E' && !stack.empty()) {
      stack.pop_back();
    }
  }
  EXPECT_GT(nested, 0) << "no spin_inner under spin_middle under spin_outer";
}

}  // namespace
}  // namespace ptsnap::record
