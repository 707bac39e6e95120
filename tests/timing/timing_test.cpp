// Exact time (docs/emulation.md "Time", docs/decoding.md "Timestamps"): in an
// emulated trace a call lasts exactly the instructions it retired. For each
// timing program and each --timer-resolution preset, ptsnap's slices of the
// tracked functions are compared call by call with ptsnap-stepcount, which
// single-steps the same static program natively (no QEMU, libipt or ptsnap
// code). Then the Chrome JSON and the FXT of the same recording are read
// back the way viewers read them (by time interval) and must give the call
// tree the model wrote (.events, nested by begin/end order).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "output/fxt_reader.h"
#include "tests/support/events.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/stepcount_run.h"
#include "tests/support/temp_dir.h"

namespace ptsnap {
namespace {

std::string Env(const char* name) { return testing::RequiredEnv(name); }

std::string Program(const std::string& name) {
  return Env("TIMING_PROGRAMS_DIR") + "/timing_" + name;
}

struct Call {
  std::string name;
  uint64_t begin = 0, duration = 0;
  bool operator==(const Call&) const = default;
};
// Per thread (0 = main, then in order of creation), calls in order of entry.
using Calls = std::map<int, std::vector<Call>>;

// ptsnap-stepcount's `call NAME DEPTH BEGIN DURATION THREAD` lines.
Calls GroundTruth(const std::string& program, const std::vector<std::string>& funcs) {
  Calls calls;
  for (const auto& c : testing::RunStepcount(Env("STEPCOUNT_BIN"), "'" + program + "'", funcs)) {
    calls[c.thread].push_back({c.name, c.begin, c.duration});
  }
  return calls;
}

// A slice as the model wrote it (.events) or a viewer reads it.
struct Slice {
  std::string name;
  uint64_t begin = 0, end = 0;
};
struct Thread {
  std::vector<Slice> slices;      // every frame, in order of begin (model order)
  std::vector<std::string> tree;  // "depth name" in pre-order, from B/E nesting
};

// Parses .events: B/E nest by order.
std::map<int64_t, Thread> ReadEvents(const std::filesystem::path& path) {
  std::map<int64_t, Thread> threads;
  std::map<int64_t, std::vector<size_t>> open;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& e : testing::ParseEvents(text.str())) {
    if (e.inferred) continue;  // see ReadFxt
    Thread& t = threads[e.tid];
    if (e.kind == 'B') {
      t.tree.push_back(std::to_string(open[e.tid].size()) + " " + e.name);
      t.slices.push_back({e.name, e.ts, 0});
      open[e.tid].push_back(t.slices.size() - 1);
    } else if (e.kind == 'E' && !open[e.tid].empty()) {
      t.slices[open[e.tid].back()].end = e.ts;
      open[e.tid].pop_back();
    }
  }
  return threads;
}

// Nests slices by time interval, as Perfetto's JSON importer and
// speedscope do: sorted by begin, longer first; a slice is inside the open
// one when it begins before that one ends.
std::vector<std::string> TreeByInterval(std::vector<Slice> slices) {
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<std::string> tree;
  std::vector<uint64_t> ends;
  for (const Slice& s : slices) {
    while (!ends.empty() && s.begin >= ends.back()) ends.pop_back();
    EXPECT_TRUE(ends.empty() || s.end <= ends.back()) << s.name << " overlaps its parent";
    tree.push_back(std::to_string(ends.size()) + " " + s.name);
    ends.push_back(s.end);
  }
  return tree;
}

std::map<int64_t, std::vector<Slice>> ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<int64_t, std::vector<Slice>> out;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e.contains("args") && e["args"].contains("inferred_start_time")) continue;
    // ts and dur in microseconds with three decimals: whole nanoseconds.
    const auto ns = [](double us) { return static_cast<uint64_t>(us * 1000.0 + 0.5); };
    const uint64_t begin = ns(e["ts"].get<double>());
    out[e["tid"].get<int64_t>()].push_back(
        {e["name"].get<std::string>(), begin, begin + ns(e["dur"].get<double>())});
  }
  return out;
}

// FXT begin/end events paired by order per thread, then read by interval.
std::map<int64_t, std::vector<Slice>> ReadFxt(const std::filesystem::path& path) {
  std::map<int64_t, std::vector<Slice>> out;
  auto bytes = output::ReadMaybeGzip(path);
  EXPECT_TRUE(bytes.has_value());
  if (!bytes) return out;
  auto trace = output::ParseFxt(bytes.value());
  EXPECT_TRUE(trace.has_value());
  if (!trace) return out;
  std::map<int64_t, std::vector<size_t>> open;
  for (const auto& e : trace.value().events) {
    auto tid = static_cast<int64_t>(e.tid);
    auto& v = out[tid];
    // Inferred frames (their begin written after their end) are left out
    // of every tree here.
    if (e.args.count("inferred_start_time")) continue;
    if (e.type == 2) {
      v.push_back({e.name, e.ts, 0});
      open[tid].push_back(v.size() - 1);
    } else if (e.type == 3 && !open[tid].empty()) {
      v[open[tid].back()].end = e.ts;
      open[tid].pop_back();
    } else if (e.type == 4 && e.end_ts > e.ts) {
      v.push_back({e.name, e.ts, e.end_ts});
    }
  }
  return out;
}

struct Case {
  std::string program;
  std::vector<std::string> funcs;
};

class Timing : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

// glibc picks string and memory routines by CPUID, and QEMU's CPU model has
// other features than this machine (docs/emulation.md, "Startup path"): the
// C++ unwinder's memcpy then retires other instructions natively than under
// QEMU. With the features QEMU lacks masked in both runs, both take the
// same routines.
constexpr const char* kSameLibcRoutines =
    "glibc.cpu.hwcaps=-AVX2,-AVX,-AVX512F,-AVX512VL,-AVX512BW,-FSRM,-ERMS,-RTM";

// Records `c` (emulated, or on this machine's Intel PT) with `preset` and
// compares it with stepcount: the tracked calls, in order, per thread, and
// (emulated) their durations; then JSON and FXT read back by interval.
void CheckProgram(const Case& c, const std::string& preset, bool emulate) {
  ::setenv("GLIBC_TUNABLES", kSameLibcRoutines, 1);  // stepcount and ptsnap inherit it
  const std::string program = Program(c.program);
  // Stepping is slow (~100 k steps/s) and its answer is the same for every
  // preset: once per program.
  static std::map<std::string, Calls> stepped;
  if (!stepped.count(program)) stepped[program] = GroundTruth(program, c.funcs);
  const Calls& truth = stepped[program];
  ASSERT_FALSE(truth.empty()) << "stepcount found no calls of the tracked functions";

  testing::TempDir tmp;
  const auto dir = tmp.path() / "t.ptsnap";
  auto run =
      testing::RunPtsnap(std::string("run ") + (emulate ? "--emulate " : "") +
                         "--timer-resolution " + preset + " --trace-dir '" + dir.string() +
                         "' -o '" + (tmp.path() / "t.events").string() + "' -- '" + program + "'");
  ASSERT_EQ(run.rc, 0) << run.out;
  ASSERT_THAT(run.out, ::testing::HasSubstr("Decode errors: 0 ")) << run.out;
  for (const char* fmt : {"t.json", "t.fxt"}) {
    auto d = testing::RunPtsnap("decode '" + dir.string() + "' -o '" + (tmp.path() / fmt).string() +
                                "'");
    ASSERT_EQ(d.rc, 0) << d.out;
  }
  const auto events = ReadEvents(tmp.path() / "t.events");

  // Threads in order of their first slice: 0 is the main thread, then the
  // others in order of creation, as stepcount numbers them.
  std::vector<std::pair<uint64_t, int64_t>> order;
  for (const auto& [tid, t] : events)
    if (!t.slices.empty()) order.push_back({t.slices.front().begin, tid});
  std::sort(order.begin(), order.end());

  size_t compared = 0;
  for (const auto& [thread, want] : truth) {
    ASSERT_LT(static_cast<size_t>(thread), order.size()) << "thread " << thread << " missing";
    const Thread& t = events.at(order[thread].second);
    std::vector<Call> got;
    for (const Slice& s : t.slices) {
      if (std::find(c.funcs.begin(), c.funcs.end(), s.name) == c.funcs.end()) continue;
      got.push_back({s.name, 0, s.end - s.begin});
    }
    ASSERT_EQ(got.size(), want.size()) << "thread " << thread;
    // Emulated: exact with cycle-accurate timing; within the packets' word
    // with "low" (an MTC every 800 ns, no CYC). Hardware: the calls, in
    // order, each lasting some time (its clock is not the instructions).
    const uint64_t tolerance = preset == "low" ? 800 : 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].name, want[i].name) << "thread " << thread << " call " << i;
      if (!emulate) {
        EXPECT_GT(got[i].duration, 0u) << "thread " << thread << " call " << i;
        ++compared;
        continue;
      }
      const uint64_t diff = got[i].duration > want[i].duration ? got[i].duration - want[i].duration
                                                               : want[i].duration - got[i].duration;
      EXPECT_LE(diff, tolerance) << "thread " << thread << " call " << i << " " << want[i].name
                                 << ": ptsnap " << got[i].duration << " ns, stepcount "
                                 << want[i].duration << " instructions";
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u);

  // Viewers nest by time interval; they must find the model's tree.
  const auto json = ReadJson(tmp.path() / "t.json");
  const auto fxt = ReadFxt(tmp.path() / "t.fxt");
  for (const auto& [tid, t] : events) {
    if (t.slices.empty()) continue;
    ASSERT_TRUE(json.count(tid)) << tid;
    EXPECT_EQ(TreeByInterval(json.at(tid)), t.tree) << "JSON, thread " << tid;
    ASSERT_TRUE(fxt.count(tid)) << tid;
    EXPECT_EQ(TreeByInterval(fxt.at(tid)), t.tree) << "FXT, thread " << tid;
  }
}

TEST_P(Timing, CallDurationsAreRetiredInstructionsAndViewersNestAsTheModel) {
  const auto& [c, preset] = GetParam();
  CheckProgram(c, preset, /*emulate=*/true);
}

// The same programs and expectations on real Intel PT (suite `hardware`):
// the first machine with PT gives a verdict on the decode, not just on
// whether bytes were written.
TEST_P(Timing, OnHardwareTheCallsAreStepcountsAndViewersNestAsTheModel) {
  if (!std::filesystem::exists("/sys/bus/event_source/devices/intel_pt"))
    GTEST_SKIP() << "no intel_pt PMU (/sys/bus/event_source/devices/intel_pt is missing): this "
                    "machine cannot record Intel PT (a VM without PT pass-through?)";
  const auto& [c, preset] = GetParam();
  CheckProgram(c, preset, /*emulate=*/false);
}

const Case kCases[] = {
    {"recursion", {"work", "fib"}},
    {"nesting", {"outer", "middle", "inner"}},
    {"tailcall", {"start", "even", "odd", "leaf"}},
    {"exception", {"catcher", "middle", "thrower", "after_catch"}},
    {"longjmp", {"catcher", "middle", "jumper", "after_jump"}},
    {"threads", {"worker", "fib"}},
};

INSTANTIATE_TEST_SUITE_P(Programs, Timing,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values("normal", "low", "high")),
                         [](const auto& info) {
                           return std::get<0>(info.param).program + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace ptsnap
