// `ptsnap decode --decoder ours` against `--decoder libipt`, end to end: the
// emulated recordings the suite makes (fib, threads, signals, a C++
// exception, fork, a jump table, JIT code, CPython, `ls -lR`), with the
// default timing (CYC) and --timer-resolution low (MTC), each decoded by
// the whole pipeline with both decoders. What a user sees must be the
// same: every slice with its times, the summary's counts and instructions,
// and the marks of emulated PTWRITE (docs/decoding.md, "Marks"). libipt is
// the oracle (docs/decoding.md, "Decoders").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/file_util.h"
#include "emulate/emulate.h"
#include "perf/attr.h"
#include "pipeline/pipeline.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::pipeline {
namespace {

using Engine = decode::PtDecoder::Engine;

class DecodeEngines : public ::testing::TestWithParam<const char*> {
 protected:
  struct Decoded {
    DecodeReport report;
    std::string events;
  };
  Decoded Decode(const std::filesystem::path& dir, Engine engine, const char* name,
                 unsigned jobs = 1) {
    DecodeOptions d;
    d.output = dir.string() + name + ".events";
    d.decoder = engine;
    d.jobs = jobs;
    Decoded out;
    auto rep = DecodeTraceDir(dir, d);
    EXPECT_TRUE(rep.has_value()) << rep.error().ToString();
    if (!rep) return out;
    out.report = *rep;
    auto text = base::ReadFile(d.output, size_t{1} << 30);
    EXPECT_TRUE(text.has_value());
    if (text) out.events = *text;
    return out;
  }
  // The `[mark ...]` lines of an .events file.
  static size_t CountMarks(const std::string& events) {
    size_t n = 0;
    for (size_t p = 0; (p = events.find(" I [mark ", p)) != std::string::npos; ++p) ++n;
    return n;
  }
  // `marks`: the marks both engines must show.
  void Check(std::vector<std::string> cmd, bool full_execution = true, size_t marks = 0) {
    record::RecordOptions o;
    o.full_execution = full_execution;
    o.command = cmd;
    auto timing = perf::ParseTiming(GetParam());
    ASSERT_TRUE(timing.has_value());
    o.timer = *timing;
    const auto dir = tmp_.path() / ("t" + std::to_string(n_++));
    auto r = emulate::RecordEmulated(o, dir);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    const Decoded lib = Decode(dir, Engine::kLibipt, "-libipt");
    const Decoded ours = Decode(dir, Engine::kOurs, "-ours");
    // -j 2: decoding on its own thread ahead of the model (parallel.h).
    const Decoded ahead = Decode(dir, Engine::kOurs, "-ours-j2", 2);
    const decode::DecodeStats &a = lib.report.decode, &b = ours.report.decode;
    EXPECT_GT(a.instructions, 1000u) << cmd[0];
    // Exact without falling back to libipt.
    EXPECT_EQ(b.flow_fallbacks, 0u) << cmd[0];
    EXPECT_EQ(a.instructions, b.instructions) << cmd[0];
    EXPECT_EQ(a.errors, b.errors) << cmd[0];
    EXPECT_EQ(a.nomap_errors, b.nomap_errors) << cmd[0];
    EXPECT_EQ(a.overflows, b.overflows) << cmd[0];
    EXPECT_EQ(a.undecoded_bytes, b.undecoded_bytes) << cmd[0];
    EXPECT_EQ(a.tsx_aborts, b.tsx_aborts) << cmd[0];
    EXPECT_EQ(lib.report.slices, ours.report.slices) << cmd[0];
    EXPECT_EQ(lib.report.threads, ours.report.threads) << cmd[0];
    EXPECT_EQ(lib.report.first_ns, ours.report.first_ns) << cmd[0];
    EXPECT_EQ(lib.report.last_ns, ours.report.last_ns) << cmd[0];
    EXPECT_FALSE(lib.events.empty());
    // Every slice, its thread and its times, and the marks (emulated
    // PTWRITE: docs/decoding.md, "Marks") at the same places.
    EXPECT_EQ(CountMarks(ours.events), marks) << cmd[0];
    EXPECT_EQ(CountMarks(lib.events), marks) << cmd[0];
    EXPECT_TRUE(lib.events == ours.events) << cmd[0] << ": the timelines differ";
    // The summary a user reads (but for the file each wrote).
    DecodeReport same_file = ours.report;
    same_file.output = lib.report.output;
    EXPECT_EQ(FormatReport(lib.report), FormatReport(same_file)) << cmd[0];
    // -j 2 against -j 1: the same file byte for byte, the same summary.
    EXPECT_TRUE(ahead.events == ours.events) << cmd[0] << ": -j 2 wrote another timeline";
    DecodeReport ahead_file = ahead.report;
    ahead_file.output = ours.report.output;
    EXPECT_EQ(FormatReport(ours.report), FormatReport(ahead_file)) << cmd[0] << " -j 2";
    if (marks != 0) {
      // libipt's marks come from a side decoder (decode/libipt_marks.h):
      // the same at -j 2.
      const Decoded lib_ahead = Decode(dir, Engine::kLibipt, "-libipt-j2", 2);
      EXPECT_TRUE(lib_ahead.events == lib.events) << cmd[0] << ": libipt -j 2 differs";
    }
    std::printf("%s (%s): %llu instructions, %llu slices, equal\n", cmd[0].c_str(), GetParam(),
                static_cast<unsigned long long>(a.instructions),
                static_cast<unsigned long long>(lib.report.slices));
  }
  ::ptsnap::testing::TempDir tmp_;
  int n_ = 0;
};

TEST_P(DecodeEngines, Fib) { Check({PTSNAP_EMU_FIB, "20"}); }
TEST_P(DecodeEngines, Threads) { Check({PTSNAP_EMU_THREADS}); }
TEST_P(DecodeEngines, Signals) { Check({PTSNAP_EMU_SIGNAL}); }
TEST_P(DecodeEngines, Exception) { Check({PTSNAP_EMU_EXCEPTION}); }
TEST_P(DecodeEngines, Fork) { Check({PTSNAP_EMU_FORK}); }
TEST_P(DecodeEngines, Switch) { Check({PTSNAP_EMU_SWITCH}); }
TEST_P(DecodeEngines, Jit) { Check({PTSNAP_EMU_JIT}); }
// examples/c/requests.c: 300 request ids and "done" marked with ptsnap_mark().
TEST_P(DecodeEngines, Marks) { Check({PTSNAP_EMU_REQUESTS, "300"}, true, 301); }
TEST_P(DecodeEngines, Python) {
  Check({"/usr/bin/python3", "-S", "-c", "import json; print(len(json.dumps(list(range(300)))))"});
}
TEST_P(DecodeEngines, LsRecursive) { Check({"/bin/ls", "-lR", "/usr/share/doc/libipt2"}); }
// Node.js, a snapshot at its exit: a JIT (V8's code, which libipt reads
// through the image's callback and never caches: every pass is a first
// pass) and seven threads whose streams decode one after the other, each
// meeting libc code the earlier ones left in libipt's block caches (they
// belong to the image sections, shared by every stream). Both change where
// libipt's blocks end, so where an inline frame (libc's, from its DWARF)
// begins and ends inside them; the flow decoder must end them there too.
TEST_P(DecodeEngines, NodeSnapshot) {
  if (!std::filesystem::exists("/usr/bin/node"))
    GTEST_SKIP() << "/usr/bin/node is not installed (nodejs)";
  Check({"/usr/bin/node", "--single-threaded", "-e",
         "function hot(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; }"
         " let t = 0; for (let k = 0; k < 2000; k++) t += hot(500);"},
        /*full_execution=*/false);
}

// -j 2 writes the same FXT, JSON and gzip-compressed FXT files as -j 1,
// source lines included (looked up on the model's thread for the writer's,
// parallel.h; deflate on a thread of its own for .gz).
TEST_P(DecodeEngines, FibFilesWithJobs) {
  record::RecordOptions o;
  o.full_execution = true;
  o.command = {PTSNAP_EMU_FIB, "15"};
  auto timing = perf::ParseTiming(GetParam());
  ASSERT_TRUE(timing.has_value());
  o.timer = *timing;
  const auto dir = tmp_.path() / "jobs";
  auto r = emulate::RecordEmulated(o, dir);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  for (const char* suffix : {".fxt", ".json", ".fxt.gz"}) {
    std::string file[2];
    for (unsigned jobs : {1u, 2u}) {
      DecodeOptions d;
      d.output = tmp_.path() / ("jobs" + std::to_string(jobs) + suffix);
      d.jobs = jobs;
      auto rep = DecodeTraceDir(dir, d);
      ASSERT_TRUE(rep.has_value()) << rep.error().ToString();
      auto text = base::ReadFile(d.output, size_t{1} << 30);
      ASSERT_TRUE(text.has_value());
      file[jobs - 1] = *text;
    }
    EXPECT_GT(file[0].size(), 1000u) << suffix;
    EXPECT_TRUE(file[0] == file[1]) << suffix << ": -j 2 wrote another file";
    if (std::string(suffix) == ".json") {
      EXPECT_NE(file[1].find("\"line\":"), std::string::npos) << "no source lines to compare";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Timing, DecodeEngines, ::testing::Values("normal", "low"));

}  // namespace
}  // namespace ptsnap::pipeline
