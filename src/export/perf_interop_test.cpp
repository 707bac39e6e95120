// Agreement between perf's Intel PT decoder and ptsnap's, on emulated
// recordings of the emulator's test programs: record with `ptsnap run
// --emulate --no-decode`, export, and run tools/perf-agree (perf script
// --itrace=b/cr/i on the export against `ptsnap decode --format events`).
//
// Every case must agree exactly: same calls and returns per thread, same
// instruction count, no decode error. The normalisations perf-agree applies
// (perf 6.1's PLT names, symbol aliases) are listed in docs/perf-interop.md.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using ::ptsnap::testing::EnvOr;
using ::ptsnap::testing::HavePerf;
using ::ptsnap::testing::RunShell;
using ::ptsnap::testing::ShellRun;

struct Case {
  std::string name;
  std::string command;  // program and arguments
};

class PerfInterop : public ::testing::TestWithParam<Case> {};

// Records (with `timer`), exports and compares; returns perf-agree's
// output. Times must agree too: perf stamps each branch with the last
// timing packet before it, ptsnap places it by instructions retired, so
// ptsnap's call and return times lie 0 to `max_skew` ns after perf's (one
// MTC period, 100 ns with CYC or 800 ns with "low", plus the instructions
// to the next packet).
ShellRun Agree(const Case& c, const fs::path& work, const std::string& timer = "normal",
               int max_skew = 200) {
  std::string bin = EnvOr("PTSNAP_BIN");
  ShellRun rec = RunShell(bin + " run --emulate --no-decode --timer-resolution " + timer +
                          " --trace-dir " + (work / "t").string() + " -- " + c.command);
  EXPECT_EQ(rec.status, 0) << rec.out;
  ShellRun r =
      RunShell("python3 " + EnvOr("PERF_AGREE") + " " + (work / "t").string() + " --ptsnap " + bin +
               " --work " + (work / "w").string() + " --max-skew " + std::to_string(max_skew));
  EXPECT_THAT(r.out, HasSubstr("perf-agree: times: ptsnap - perf ")) << r.out;  // compared
  return r;
}

TEST_P(PerfInterop, PerfAndPtsnapDecodeTheSameCallsAndReturns) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  const Case& c = GetParam();
  ptsnap::testing::TempDir tmp;
  ShellRun r = Agree(c, tmp.path());
  std::printf("%s", r.out.c_str());
  ASSERT_THAT(r.out, HasSubstr("perf-agree: ")) << r.out;
  EXPECT_THAT(r.out, HasSubstr(" 0 decode errors")) << "perf reported decode errors";
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("; AGREE"));
}

std::string Prog(const std::string& name) {
  return (fs::path(EnvOr("EMU_PROGRAMS_DIR")) / ("emu_" + name)).string();
}

std::string TimingProg(const std::string& name) {
  return (fs::path(EnvOr("TIMING_PROGRAMS_DIR")) / ("timing_" + name)).string();
}

std::vector<Case> Cases() {
  return {
      {"static_recursion", Prog("fib_static") + " 12"},
      {"dynamic", Prog("fib") + " 10"},
      {"cpp_exception", Prog("exception")},
      {"jump_table", Prog("switch")},
      {"signals", Prog("signal")},
      // The exact-time programs (tests/programs/timing/), static.
      {"timing_recursion", TimingProg("recursion")},
      {"timing_nesting", TimingProg("nesting")},
      {"timing_tailcall", TimingProg("tailcall")},
      {"timing_exception", TimingProg("exception")},
      {"timing_longjmp", TimingProg("longjmp")},
      {"timing_threads", TimingProg("threads")},
  };
}

INSTANTIATE_TEST_SUITE_P(Programs, PerfInterop, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(PerfInteropLs, LsOfASmallTree) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  ptsnap::testing::TempDir tmp;
  tmp.Write("tree/a/b/file", "x");
  tmp.Write("tree/c", "y");
  Case c{"ls", "/bin/ls -lR " + (tmp.path() / "tree").string()};
  ShellRun r = Agree(c, tmp.path() / "work");
  std::printf("%s", r.out.c_str());
  EXPECT_THAT(r.out, HasSubstr(" 0 decode errors"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("; AGREE"));
}

// Threads: a thread's virtual clock starts at its creator's clone time
// (docs/emulation.md, "Time"), so every thread's TSCs order correctly
// against the sideband (libc's MMAP2 before a worker's first use of it) and
// perf decodes all four threads; the late thread reuses a vCPU index.
TEST(PerfInteropThreads, EveryThreadIsDecodedByPerf) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  ptsnap::testing::TempDir tmp;
  Case c{"threads", Prog("threads")};
  ShellRun r = Agree(c, tmp.path());
  std::printf("%s", r.out.c_str());
  EXPECT_THAT(r.out, HasSubstr(": 4 threads,"));
  EXPECT_THAT(r.out, HasSubstr(" 0 decode errors"));
  EXPECT_THAT(r.out, HasSubstr("; AGREE"));
  EXPECT_EQ(r.status, 0) << r.out;
}

// The other presets: MTC only ("low": perf's times lag by up to an MTC
// period) and cycle-accurate with a TIP per return ("high").
TEST(PerfInteropTiming, LowAndHighPresets) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  for (auto [timer, skew] : {std::pair{"low", 1000}, std::pair{"high", 200}}) {
    ptsnap::testing::TempDir tmp;
    Case c{timer, Prog("fib_static") + " 12"};
    ShellRun r = Agree(c, tmp.path(), timer, skew);
    std::printf("%s", r.out.c_str());
    EXPECT_THAT(r.out, HasSubstr(" 0 decode errors")) << timer;
    EXPECT_EQ(r.status, 0) << timer << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("; AGREE")) << timer;
  }
}

// hotspot reads perf.data through its hotspot-perfparser helper (a headless
// Qt program). perfparser 1.3.0 does not decode Intel PT (and does not skip
// AUXTRACE payloads), so the documented route is `perf inject --itrace` to
// a sampled file first; this checks that route end to end.
std::string FindPerfparser() {
  std::string env = EnvOr("HOTSPOT_PERFPARSER");
  if (!env.empty()) return env;
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libexec/hotspot-perfparser",
                        "/usr/libexec/hotspot-perfparser"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

TEST(PerfInteropHotspot, PerfparserReadsTheInjectedSamples) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  std::string parser = FindPerfparser();
  if (parser.empty()) {
    GTEST_SKIP() << "hotspot-perfparser not found: apt-get install hotspot (about 200 Qt/KDE "
                    "packages, so tools/dev does not), or set HOTSPOT_PERFPARSER to the binary";
  }
  ptsnap::testing::TempDir tmp;
  fs::path t = tmp.path() / "t", data = tmp.path() / "perf.data", inj = tmp.path() / "inj.data";
  ShellRun rec = RunShell(EnvOr("PTSNAP_BIN") + " run --emulate --no-decode --trace-dir " +
                          t.string() + " -- " + Prog("fib") + " 10");
  ASSERT_EQ(rec.status, 0) << rec.out;
  ShellRun ex = RunShell(EnvOr("PTSNAP_BIN") + " export " + t.string() + " -o " + data.string());
  ASSERT_EQ(ex.status, 0) << ex.out;
  ShellRun in = RunShell("perf inject -i " + data.string() + " --itrace=i1000i -o " + inj.string());
  ASSERT_EQ(in.status, 0) << in.out;
  ShellRun count = RunShell("perf script -i " + inj.string() + " -F ip | wc -l");
  ASSERT_EQ(count.status, 0) << count.out;
  int samples = std::atoi(count.out.c_str());
  EXPECT_GT(samples, 50);  // fib(10): about 110,000 instructions
  ShellRun stats = RunShell(parser + " --input " + inj.string() + " --print-stats");
  EXPECT_EQ(stats.status, 0) << stats.out;
  EXPECT_THAT(stats.out, HasSubstr("samples: " + std::to_string(samples) + "\n")) << stats.out;
  fs::path out = tmp.path() / "out.perfparser";
  ShellRun conv = RunShell(parser + " --input " + inj.string() + " --output " + out.string());
  EXPECT_EQ(conv.status, 0) << conv.out;
  // The converted stream names the program's functions (resolved from its ELF).
  ShellRun grep = RunShell("grep -c -a fib " + out.string());
  EXPECT_EQ(grep.status, 0) << "no 'fib' symbol in perfparser's output";
}

}  // namespace
