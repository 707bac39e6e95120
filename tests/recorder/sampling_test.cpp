// `ptsnap run/attach --sampling` end to end on this machine (docs/recording.md,
// "Sampling mode"): the ptsnap binary records tests/programs/sampling_spin
// with real perf_event_open (cpu-clock where there is no hardware PMU), and
// the trace directory is read back: source "sampled", samples streams of
// PERF_RECORD_SAMPLE records laid out by the manifest's sample_type, IPs in
// the program's text, fp call stacks deeper than one frame. Decoding
// sampled traces is not this side's: every run passes --no-decode.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

struct Exit {
  int code = -1;
  std::string err;
};

// Runs ptsnap with `args`; returns its exit code and stderr.
Exit Ptsnap(std::vector<std::string> args) {
  const auto run = ::ptsnap::testing::RunPtsnapArgv(std::move(args));
  return {run.rc, run.out};
}

std::string Spin() {
  const char* p = std::getenv("PTSNAP_SAMPLING_SPIN");
  return p != nullptr ? p : "";
}

// sampling_spin running on its own, ready (it printed "ready PID").
struct Target {
  pid_t pid = -1;
  Target(const std::string& ms, const std::string& threads) {
    int out[2];
    if (pipe(out) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(out[1], 1);
      close(out[0]);
      execl(Spin().c_str(), "sampling_spin", ms.c_str(), threads.c_str(), nullptr);
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    int p = 0;
    if (f == nullptr || fscanf(f, "ready %d", &p) != 1) pid = -1;
    if (f != nullptr) fclose(f);
  }
  int Wait() {
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return st;
  }
  ~Target() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

bool HasIntelPt() { return fs::exists("/sys/bus/event_source/devices/intel_pt"); }

// One PERF_RECORD_SAMPLE, the fields every sampled recording has, and the
// callchain (fp: user frames after PERF_CONTEXT_USER).
struct Sample {
  uint64_t ip = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  std::vector<uint64_t> callchain;
  size_t size = 0;
};

// Walks a samples stream by its headers; fails the test on a record that is
// not a sample or runs past the end. Layout: sample_type 0x...1a7 starts
// IDENTIFIER, IP, TID, TIME, CPU, PERIOD, CALLCHAIN (perf_event.h order).
std::vector<Sample> ParseSamples(const std::string& bytes, uint64_t sample_type) {
  std::vector<Sample> out;
  EXPECT_EQ(sample_type & 0x1a7u, 0x1a7u) << "unexpected sample_type " << sample_type;
  EXPECT_NE(sample_type & PERF_SAMPLE_IDENTIFIER, 0u);
  for (size_t off = 0; off + sizeof(perf_event_header) <= bytes.size();) {
    perf_event_header h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    if (h.type != PERF_RECORD_SAMPLE || h.size < 64 || off + h.size > bytes.size()) {
      ADD_FAILURE() << "record at " << off << ": type " << h.type << " size " << h.size;
      break;
    }
    const char* b = bytes.data() + off + sizeof(h);
    Sample s;
    s.size = h.size;
    std::memcpy(&s.ip, b + 8, 8);
    std::memcpy(&s.pid, b + 16, 4);
    std::memcpy(&s.tid, b + 20, 4);
    std::memcpy(&s.time, b + 24, 8);
    uint64_t nr = 0;
    std::memcpy(&nr, b + 48, 8);
    if (56 + nr * 8 <= h.size - sizeof(h)) {
      s.callchain.resize(nr);
      if (nr != 0) std::memcpy(s.callchain.data(), b + 56, nr * 8);
    } else {
      ADD_FAILURE() << "callchain of " << nr << " entries runs past the record";
    }
    out.push_back(std::move(s));
    off += h.size;
  }
  return out;
}

struct Text {
  uint64_t start = 0, end = 0;
};

// The executable mappings of sampling_spin in the sideband.
std::vector<Text> SpinText(const ptsnap::trace::TraceReader& r) {
  std::vector<Text> out;
  auto sb = r.ReadSideband();
  EXPECT_TRUE(sb.has_value());
  if (!sb) return out;
  for (const auto& rec : sb->records) {
    const auto* m = std::get_if<ptsnap::trace::Mmap2>(&rec.body);
    if (m != nullptr && (m->prot & PROT_EXEC) != 0 &&
        fs::path(m->filename).filename() == "sampling_spin")
      out.push_back({m->addr, m->addr + m->len});
  }
  return out;
}

bool InText(const std::vector<Text>& text, uint64_t ip) {
  return std::any_of(text.begin(), text.end(),
                     [ip](const Text& t) { return ip >= t.start && ip < t.end; });
}

// Every samples stream's samples, checking each stream's shape.
std::vector<Sample> AllSamples(const ptsnap::trace::TraceReader& r) {
  std::vector<Sample> all;
  const auto& m = r.manifest();
  EXPECT_TRUE(m.sampling.has_value());
  if (!m.sampling) return all;
  for (const auto& s : m.streams) {
    EXPECT_EQ(s.kind, ptsnap::trace::StreamKind::kSamples) << s.file;
    EXPECT_THAT(s.file, ::testing::StartsWith("samples/"));
    auto bytes = r.ReadStream(s);
    EXPECT_TRUE(bytes.has_value()) << s.file;
    if (!bytes) continue;
    EXPECT_LE(bytes->size(), m.snapshot_size) << "a snapshot stream holds at most snapshot_size";
    for (Sample& x : ParseSamples(*bytes, m.sampling->sample_type)) {
      if (s.tid >= 0) {
        EXPECT_EQ(static_cast<int32_t>(x.tid), s.tid) << s.file;
      }
      all.push_back(std::move(x));
    }
  }
  return all;
}

class Sampling : public ::testing::Test {
 protected:
  void SetUp() override {
    // meson sets both (tests/recorder/meson.build): losing them must fail.
    if (std::getenv("PTSNAP_BIN") == nullptr || Spin().empty())
      FAIL() << "PTSNAP_BIN and PTSNAP_SAMPLING_SPIN must be set: run through `meson test`";
  }
  std::string Dir() const { return (dir_.path() / "t.ptsnap").string(); }
  TempDir dir_;
};

TEST_F(Sampling, RunWithFramePointersSamplesTheProgramsTextWithDeepStacks) {
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "fp", "--no-decode", "--trace-dir",
                   Dir(), "--", Spin(), "400"});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.err, Not(HasSubstr("defaulting")));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  EXPECT_EQ(m.source, ptsnap::trace::Source::kSampled);
  EXPECT_EQ(m.state, ptsnap::trace::State::kComplete);
  ASSERT_TRUE(m.sampling.has_value());
  EXPECT_EQ(m.sampling->callgraph, "fp");
  // CALLCHAIN, and the registers and stack copy of the decoder's leaf mend.
  EXPECT_EQ(m.sampling->sample_type, 0x131a7u);
  EXPECT_EQ(m.sampling->regs_user, 0x1c0u);
  EXPECT_EQ(m.sampling->stack_user, 512u);
  EXPECT_EQ(m.sampling->frequency, 10000u);  // --timer-resolution normal
  EXPECT_EQ(m.snapshot_size,
            10000u * 1136);  // a second of fp samples (DefaultSamplingSnapshotBytes)
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kExit);
  ASSERT_FALSE(m.streams.empty());
  const std::vector<Text> text = SpinText(*r);
  ASSERT_FALSE(text.empty()) << "no MMAP2 of sampling_spin in the sideband";
  std::vector<Sample> samples = AllSamples(*r);
  ASSERT_GT(samples.size(), 20u);  // 400 ms at 10 kHz of cpu-clock: thousands
  size_t in_text = 0, deep = 0;
  for (const Sample& s : samples) {
    in_text += InText(text, s.ip);
    size_t frames = 0;
    for (uint64_t ip : s.callchain) frames += InText(text, ip);
    deep += frames >= 3;  // spin_inner <- spin_middle <- spin_outer (<- main)
  }
  EXPECT_GT(in_text, samples.size() / 2) << "most samples should be in the spinning loop";
  EXPECT_GT(deep, samples.size() / 2) << "fp call stacks should reach spin_outer";
}

TEST_F(Sampling, DwarfIsTheDefaultHereAndCarriesRegistersAndStack) {
  if (fs::exists("/sys/bus/event_source/devices/cpu"))
    GTEST_SKIP() << "a hardware PMU may offer LBR here: the default is not necessarily dwarf";
  Exit e = Ptsnap({"run", "-sampling", "--no-decode", "--trace-dir", Dir(), "--", Spin(), "200"});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.err, HasSubstr("defaulting to dwarf, which may have high overhead and decoding "
                               "time"));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  ASSERT_TRUE(m.sampling.has_value());
  EXPECT_EQ(m.sampling->event, "cpu-clock");
  EXPECT_EQ(m.sampling->callgraph, "dwarf");
  EXPECT_EQ(m.sampling->sample_type, 0x131a7u);
  EXPECT_EQ(m.sampling->regs_user, 0xff0fffu);
  EXPECT_EQ(m.sampling->stack_user, 8192u);
  std::vector<Sample> samples = AllSamples(*r);
  ASSERT_FALSE(samples.empty());
  // Every user-mode sample holds the stack copy: more than 8 KiB each.
  size_t big = 0;
  for (const Sample& s : samples) big += s.size > 8192;
  EXPECT_GT(big, samples.size() / 2);
}

TEST_F(Sampling, AttachForADurationSamplesTheProcess) {
  Target t("5000", "1");
  ASSERT_GT(t.pid, 0);
  Exit e = Ptsnap({"attach", "--sampling", "--callgraph-mode", "fp", "-p", std::to_string(t.pid),
                   "--duration", "400ms", "--no-decode", "--trace-dir", Dir()});
  ASSERT_EQ(e.code, 0) << e.err;
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  EXPECT_EQ(m.source, ptsnap::trace::Source::kSampled);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kDuration);
  const std::vector<Text> text = SpinText(*r);  // synthesized from /proc/PID/maps
  ASSERT_FALSE(text.empty());
  std::vector<Sample> samples = AllSamples(*r);
  ASSERT_GT(samples.size(), 10u);
  size_t in_text = 0;
  for (const Sample& s : samples) {
    EXPECT_EQ(s.pid, static_cast<uint32_t>(t.pid));
    in_text += InText(text, s.ip);
  }
  EXPECT_GT(in_text, samples.size() / 2);
  // --duration counts from the first sample (a sampled attach's events are
  // its sideband events, enabled before the clock once started): the
  // samples span at most the duration and a turn of the loop, unless
  // ptsnap says that it ran late.
  uint64_t first = UINT64_MAX, last = 0;
  for (const Sample& s : samples) first = std::min(first, s.time), last = std::max(last, s.time);
  if (e.err.find("--duration 400ms: the recording ran ") == std::string::npos) {
    EXPECT_LE(last - first, uint64_t{450'000'000}) << e.err;
  }
}

// magic-trace's fallback: attach where there is no Intel PT samples, in
// one line.
TEST_F(Sampling, AttachWithoutPtPicksSamplingAndSaysSoOnce) {
  if (HasIntelPt()) GTEST_SKIP() << "this machine has an intel_pt PMU: attach records PT";
  Target t("5000", "1");
  ASSERT_GT(t.pid, 0);
  Exit e = Ptsnap({"attach", "-p", std::to_string(t.pid), "--duration", "300ms", "--no-decode",
                   "--trace-dir", Dir()});
  ASSERT_EQ(e.code, 0) << e.err;
  const std::string line = "Intel PT not found: recording with stack sampling instead (--sampling";
  ASSERT_THAT(e.err, HasSubstr(line));
  EXPECT_EQ(e.err.find(line), e.err.rfind(line));
  EXPECT_THAT(e.err, Not(HasSubstr("--callgraph-mode not given")));  // folded into the line
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->manifest().source, ptsnap::trace::Source::kSampled);
  EXPECT_FALSE(AllSamples(*r).empty());
}

TEST_F(Sampling, TriggerTakesTheSnapshot) {
  Exit e =
      Ptsnap({"run", "--sampling", "--callgraph-mode", "fp", "--trigger", "sampling_trigger_point",
              "--after", "wait", "--no-decode", "--trace-dir", Dir(), "--", Spin(), "300"});
  ASSERT_EQ(e.code, 0) << e.err;
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kTrigger);
  EXPECT_EQ(m.snapshots[0].detail, "sampling_trigger_point");
  ASSERT_FALSE(m.streams.empty());
  for (const auto& s : m.streams) EXPECT_EQ(s.snapshot, m.snapshots[0].seq);
  std::vector<Sample> samples = AllSamples(*r);
  ASSERT_FALSE(samples.empty());
  // The ring keeps the most recent samples: the last is before the hit.
  uint64_t last = 0;
  for (const Sample& s : samples) last = std::max(last, s.time);
  EXPECT_LE(last, m.snapshots[0].time + 5'000'000u);  // within the loop's 5 ms
}

// A trigger on a function of a shared library (#41): libc is not mapped
// when the program is stopped at its first instruction, so the trigger is
// found in the libraries it links and armed as an entry uprobe at the
// function's file offset, which fires once the loader has mapped it.
// sampling_spin calls fflush once, after "ready".
TEST_F(Sampling, ATriggerOnALibraryFunctionTakesTheSnapshot) {
  if (!fs::exists("/sys/bus/event_source/devices/uprobe/type"))
    GTEST_SKIP() << "no uprobe PMU on this kernel";
  if (::geteuid() != 0) GTEST_SKIP() << "uprobe perf events need root here";
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "fp", "--trigger", "fflush", "--after",
                   "wait", "--no-decode", "--trace-dir", Dir(), "--", Spin(), "50"});
  ASSERT_EQ(e.code, 0) << e.err;
  // libc's, or the sanitizer runtime's that the sanitized tree loads first.
  EXPECT_THAT(e.err, ::testing::ContainsRegex(
                         "Trigger armed: fflush @ lib[a-z]+\\.so(\\.[0-9]+)+\\+0x[0-9a-f]+ "
                         "\\(file offset; an entry uprobe\\)"));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  ASSERT_EQ(m.snapshots.size(), 1u) << e.err;
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kTrigger);
  EXPECT_EQ(m.snapshots[0].detail, "fflush");
  EXPECT_EQ(m.snapshots[0].tid, static_cast<uint32_t>(m.pids.at(0)));
}

// A library the program only dlopen()s is in no `ld.so --list`: named by
// its path (PATH:NAME), it is looked up in that file and armed as an entry
// uprobe on it, which fires once a sibling thread loads it (#41: "libraries
// only dlopen()ed" were not found).
TEST_F(Sampling, ATriggerInALibraryTheProgramDlopensTakesTheSnapshot) {
  if (!fs::exists("/sys/bus/event_source/devices/uprobe/type"))
    GTEST_SKIP() << "no uprobe PMU on this kernel";
  if (::geteuid() != 0) GTEST_SKIP() << "uprobe perf events need root here";
  const std::string prog = std::getenv("PTSNAP_DLOPEN_SIBLING");
  const std::string lib = fs::canonical(std::getenv("PTSNAP_DLOPEN_PROBE_LIB")).string();
  // By its file name alone it is not found (no library the program links
  // has it), and the error names the libraries searched.
  Exit miss = Ptsnap({"run", "--sampling", "--trigger",
                      fs::path(lib).filename().string() + ":ptsnap_dlopen_probe", "--no-decode",
                      "--trace-dir", Dir(), "--", prog, lib});
  EXPECT_EQ(miss.code, 1) << miss.err;
  EXPECT_THAT(miss.err, HasSubstr("shared libraries it links ("));
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "fp", "--trigger",
                   lib + ":ptsnap_dlopen_probe", "--after", "wait", "--no-decode", "--trace-dir",
                   Dir(), "--", prog, lib});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.err, ::testing::ContainsRegex("Trigger armed: ptsnap_dlopen_probe @ "
                                              "libptsnap_dlopen_probe\\.so\\+0x[0-9a-f]+ "
                                              "\\(file offset; an entry uprobe\\)"));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(r->manifest().snapshots.size(), 1u) << e.err;
  EXPECT_EQ(r->manifest().snapshots[0].reason, ptsnap::trace::SnapshotReason::kTrigger);
}

// attach: a running process has its libraries mapped; the trigger is
// found in them and armed at its runtime address there (sampling_spin
// calls clock_gettime all the time it spins).
TEST_F(Sampling, AttachTriggerOnALibraryFunctionTakesTheSnapshot) {
  Target t("5000", "1");
  ASSERT_GT(t.pid, 0);
  Exit e = Ptsnap({"attach", "--sampling", "--callgraph-mode", "fp", "-p", std::to_string(t.pid),
                   "--trigger", "clock_gettime", "--no-decode", "--trace-dir", Dir()});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.err,
              ::testing::ContainsRegex(
                  "Trigger armed: clock_gettime @ 0x[0-9a-f]+ \\(lib[a-z]+\\.so(\\.[0-9]+)+\\)"));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  ASSERT_EQ(m.snapshots.size(), 1u) << e.err;
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kTrigger);
  EXPECT_EQ(m.snapshots[0].detail, "clock_gettime");
}

TEST_F(Sampling, MultiThreadAttachGivesAStreamPerThread) {
  Target t("5000", "3");
  ASSERT_GT(t.pid, 0);
  Exit e =
      Ptsnap({"attach", "--sampling", "--callgraph-mode", "fp", "--multi-thread", "-p",
              std::to_string(t.pid), "--duration", "500ms", "--no-decode", "--trace-dir", Dir()});
  ASSERT_EQ(e.code, 0) << e.err;
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  std::set<int32_t> tids;
  for (const auto& s : r->manifest().streams) tids.insert(s.tid);
  EXPECT_EQ(tids.size(), 3u);
  EXPECT_TRUE(tids.count(t.pid));
  EXPECT_FALSE(AllSamples(*r).empty());
}

// The process exits while ptsnap is attached: what was sampled is kept and
// the recording ends cleanly (reason exit).
TEST_F(Sampling, AttachToAProcessThatExitsKeepsItsSamples) {
  Target t("3000", "1");  // long enough for an ASan build of ptsnap to attach under load
  ASSERT_GT(t.pid, 0);
  Exit e = Ptsnap({"attach", "--sampling", "--callgraph-mode", "fp", "-p", std::to_string(t.pid),
                   "--duration", "20s", "--no-decode", "--trace-dir", Dir()});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(WEXITSTATUS(t.Wait()), 0);
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  EXPECT_EQ(m.state, ptsnap::trace::State::kComplete);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kExit);
  EXPECT_GT(AllSamples(*r).size(), 10u);
}

// The process's /proc/PID/maps cannot be read (as under hidepid, or for
// another user's process): one error naming it and the fix, before any event
// opens or the trace directory is made. Staged in a private mount namespace:
// a mode-000 file bound over the maps file, and ptsnap run without the
// capabilities that let root read it anyway.
TEST_F(Sampling, AttachToAProcessWhoseMapsCannotBeReadFailsBeforeRecording) {
  if (geteuid() != 0) GTEST_SKIP() << "staging an unreadable /proc/PID/maps needs root (mount)";
  if (ptsnap::testing::RunShellRaw("command -v unshare setpriv >/dev/null").status != 0)
    GTEST_SKIP() << "unshare and setpriv (util-linux) are needed to stage it";
  Target t("20000", "1");
  ASSERT_GT(t.pid, 0);
  const std::string masked = (dir_.path() / "masked").string();
  ASSERT_EQ(
      ptsnap::testing::RunShellRaw("touch '" + masked + "' && chmod 000 '" + masked + "'").status,
      0);
  const std::string maps = "/proc/" + std::to_string(t.pid) + "/maps";
  const std::string no_dac = "-dac_override,-dac_read_search";
  const auto r = ptsnap::testing::RunShellRaw(
      "unshare -m sh -c \"mount --make-rprivate / && mount --bind '" + masked + "' " + maps +
      " && exec setpriv --inh-caps=" + no_dac + " --bounding-set=" + no_dac + " '" +
      std::getenv("PTSNAP_BIN") + "' attach --sampling --callgraph-mode fp -p " +
      std::to_string(t.pid) + " --duration 1s --no-decode --trace-dir '" + Dir() + "'\" 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: cannot read the memory map of process " +
                               std::to_string(t.pid) + " (open " + maps +
                               ": Permission denied): ptsnap needs the process's memory map to "
                               "name its code; attach as root or as the process's user"));
  EXPECT_FALSE(fs::exists(Dir())) << "nothing is recorded, so no trace directory";
}

// run's library trigger is an entry uprobe, which the kernel refuses
// without CAP_PERFMON: the error says what it needs, before anything is
// recorded. Staged as root with CAP_PERFMON and CAP_SYS_ADMIN dropped.
TEST_F(Sampling, ALibraryTriggerWithoutCapPerfmonSaysWhatItNeeds) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping CAP_PERFMON with setpriv needs root";
  if (ptsnap::testing::RunShellRaw("command -v setpriv >/dev/null").status != 0)
    GTEST_SKIP() << "setpriv (util-linux) is needed to stage it";
  if (ptsnap::testing::RunShellRaw("test \"$(cat /proc/sys/kernel/perf_event_paranoid)\" -le 2")
          .status != 0)
    GTEST_SKIP() << "perf_event_paranoid > 2: without CAP_PERFMON sampling itself is refused";
  const std::string no_cap = "-perfmon,-sys_admin";
  const auto r = ptsnap::testing::RunShellRaw(
      "setpriv --inh-caps=" + no_cap + " --bounding-set=" + no_cap + " '" +
      std::getenv("PTSNAP_BIN") +
      "' run --sampling --callgraph-mode fp --trigger fflush --no-decode --trace-dir '" + Dir() +
      "' -- '" + Spin() + "' 10 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ptsnap: error: a trigger on a shared library's function is an "
                               "entry uprobe, which needs root (CAP_SYS_ADMIN; "
                               "kernel.perf_event_paranoid does not change it"));
  EXPECT_THAT(r.out, HasSubstr("opening trigger uprobe fflush @ "));
  EXPECT_FALSE(fs::exists(Dir())) << "nothing is recorded, so no trace directory";
}

TEST_F(Sampling, FullExecutionStreamsEverySample) {
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "fp", "--full-execution",
                   "--timer-resolution", "sample:2000", "--no-decode", "--trace-dir", Dir(), "--",
                   Spin(), "300cpu"});
  ASSERT_EQ(e.code, 0) << e.err;
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  EXPECT_EQ(m.mode, ptsnap::trace::Mode::kFull);
  EXPECT_EQ(m.sampling->frequency, 2000u);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, ptsnap::trace::SnapshotReason::kFull);
  // 300 ms of CPU time (not wall time: on a loaded machine the spinner
  // once got 126 samples in 300 ms) at 2 kHz: about 600 samples, all of them.
  EXPECT_GT(AllSamples(*r).size(), 200u);
}

// Usage errors and the machine's refusals: one line, the documented code
// (docs/errors.md), nothing written.
TEST_F(Sampling, OptionsThatDoNotGoTogether) {
  Exit emu = Ptsnap({"run", "--sampling", "--emulate", "--", "/bin/true"});
  EXPECT_EQ(emu.code, 2);
  EXPECT_THAT(emu.err, HasSubstr("--sampling and --emulate are two collection modes"));
  Exit cg = Ptsnap({"run", "--emulate", "-callgraph-mode", "fp", "--", "/bin/true"});
  EXPECT_EQ(cg.code, 2);
  EXPECT_THAT(cg.err, HasSubstr("--callgraph-mode only applies to --sampling"));
  Exit sample = Ptsnap({"run", "--emulate", "--timer-resolution", "sample:100", "--", "/bin/true"});
  EXPECT_EQ(sample.code, 2);
  EXPECT_THAT(sample.err, HasSubstr("can only be used with --sampling (did you forget"));
  Exit custom =
      Ptsnap({"run", "--sampling", "--timer-resolution", "custom:cyc=1", "--", "/bin/true"});
  EXPECT_EQ(custom.code, 2);
  EXPECT_THAT(custom.err, HasSubstr("cannot be used with --sampling"));
  Exit bad = Ptsnap({"run", "--sampling", "--callgraph-mode", "stack", "--", "/bin/true"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("valid: lbr, lbr-no-stitch, fp, dwarf"));
  for (const Exit& x : {emu, cg, sample, custom, bad})
    EXPECT_EQ(std::count(x.err.begin(), x.err.end(), '\n'), 1) << x.err;
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(Sampling, LbrWithoutLbrNamesTheOtherModes) {
  if (fs::exists("/sys/bus/event_source/devices/cpu"))
    GTEST_SKIP() << "a hardware PMU is present: LBR may be available";
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "lbr", "--", "/bin/true"});
  EXPECT_EQ(e.code, 1);
  EXPECT_THAT(e.err, HasSubstr("no LBR call-stack support"));
  EXPECT_THAT(e.err, HasSubstr("use --callgraph-mode fp or dwarf"));
}

// The trace directory's file system fills up (a 1 MiB tmpfs) while a
// full-execution recording streams dwarf samples (about 8 KiB each): one
// error naming the full disk, exit 1; the program is not killed with the
// recording but runs on untraced to its own end (status 0); the trace lists
// whole samples only (a write cut short is taken back), state interrupted
// with the cause, and `ptsnap info` reads it without complaint.
TEST_F(Sampling, DiskFullStopsTheRecordingAndTheProgramRunsOnUnharmed) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const ::ptsnap::testing::SmallTmpfs small(dir_.path() / "small", "1m");
  ASSERT_TRUE(small.mounted()) << "mount -t tmpfs failed as root";
  const std::string dir = (small.path() / "t").string();
  Exit e = Ptsnap({"run", "--sampling", "--callgraph-mode", "dwarf", "--full-execution",
                   "--timer-resolution", "sample:4000", "--no-decode", "--trace-dir", dir, "--",
                   Spin(), "1000"});
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_THAT(e.err, HasSubstr("ptsnap: error: the file system holding " + dir + " is full ("));
  EXPECT_THAT(e.err, HasSubstr("No space left on device): recording stopped; what was captured "
                               "is kept in " +
                               dir + " and decodes: free space or choose another --trace-dir; " +
                               Spin() + " ran on untraced and exited with status 0\n"));
  auto r = ptsnap::trace::TraceReader::Open(dir);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const auto& m = r->manifest();
  EXPECT_EQ(m.state, ptsnap::trace::State::kInterrupted);
  EXPECT_THAT(m.stop_error, HasSubstr("No space left on device"));
  ASSERT_EQ(m.streams.size(), 1u);
  auto bytes = r->ReadStream(m.streams[0]);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().ToString();
  EXPECT_EQ(bytes->size(), m.streams[0].size);
  EXPECT_EQ(fs::file_size(fs::path(dir) / m.streams[0].file), m.streams[0].size)
      << "the torn write was truncated away";
  // Every whole sample that fit: the 1 MiB less the 256 KiB .reserve, the
  // small sideband and manifest, and less than one sample (about 750 KiB
  // here). Before, a batch the disk could not take whole was dropped whole:
  // under ASan's slower drain CI kept 10 samples.
  EXPECT_GE(m.streams[0].size, 640u << 10);
  size_t parsed = 0;
  for (const Sample& s : ParseSamples(*bytes, m.sampling->sample_type)) parsed += s.size;
  EXPECT_EQ(parsed, bytes->size()) << "whole samples, back to back";
  const auto info = ::ptsnap::testing::RunPtsnap("info '" + dir + "'");
  EXPECT_EQ(info.rc, 0) << info.out;
  EXPECT_THAT(info.out, HasSubstr("No space left on device"));
  EXPECT_THAT(info.out, Not(HasSubstr("MISMATCH")));
}

// Threads the program creates beyond what the fd limit allows are left out
// with one warning and a count at the end; the recording itself goes on and
// its snapshot is written (ptsnap keeps fds free for the trace's files:
// before, the snapshot's stream file failed with EMFILE and the recording
// was lost).
TEST_F(Sampling, ThreadsBeyondTheFdLimitAreLeftOutWithOneWarning) {
  const auto run = ::ptsnap::testing::RunShell(
      "prlimit --nofile=24 '" + std::string(std::getenv("PTSNAP_BIN")) +
      "' run --sampling --multi-thread --callgraph-mode fp --no-decode --trace-dir '" + Dir() +
      "' -- '" + Spin() + "' 300 16");
  EXPECT_EQ(run.status, 0) << run.out;
  size_t warnings = 0;
  for (size_t at = run.out.find("is not traced: too many open files"); at != std::string::npos;
       at = run.out.find("is not traced: too many open files", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << run.out;
  EXPECT_THAT(run.out, HasSubstr("keeping 16 fds free for writing the trace"));
  EXPECT_THAT(run.out, HasSubstr("thread(s) created while recording were not traced"));
  auto r = ptsnap::trace::TraceReader::Open(Dir());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->manifest().state, ptsnap::trace::State::kComplete);
  EXPECT_EQ(r->manifest().snapshots.size(), 1u);
  EXPECT_FALSE(AllSamples(*r).empty());
}

// ptsnap raises its own soft fd limit to the hard one (1,000+ threads need
// more than 1024 fds); the program it starts keeps the soft limit it would
// have had.
TEST_F(Sampling, PtsnapRaisesItsFdLimitButNotTheProgramsOne) {
  const auto run = ::ptsnap::testing::RunShell(
      "ulimit -Sn 256 && ulimit -Hn 2048 && '" + std::string(std::getenv("PTSNAP_BIN")) +
      "' run --sampling --callgraph-mode fp --no-decode --trace-dir '" + Dir() +
      "' -- sh -c 'grep \"Max open files\" /proc/$PPID/limits; echo program $(ulimit -Sn)'");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, ::testing::ContainsRegex("Max open files +2048 +2048")) << "ptsnap's own";
  EXPECT_THAT(run.out, HasSubstr("program 256\n"));
}

// ptsnap killed (SIGKILL) while `run` records a native program: the program
// dies with it (PR_SET_PDEATHSIG, record/child.cpp), as qemu does under
// --emulate, instead of running on untraced; the trace directory is left
// in state "recording" with what it listed, and `ptsnap info` says it was
// cut short. (perf record's workload would run on: see docs/recording.md.)
TEST(SamplingCli, KilledPtsnapTakesItsNativeProgramWithIt) {
  const char* bin = std::getenv("PTSNAP_BIN");
  ASSERT_NE(bin, nullptr) << "PTSNAP_BIN is set by meson";
  TempDir tmp;
  const fs::path dir = tmp.path() / "killed";
  const fs::path log = tmp.path() / "killed.log";
  const pid_t ptsnap = ::fork();
  ASSERT_GE(ptsnap, 0);
  if (ptsnap == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(bin, bin, "run", "--sampling", "--no-decode", "--trace-dir", dir.c_str(), "--",
            "/bin/sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Recording once the manifest exists; the program is the recording
  // thread's child (/proc/PID/task/TID/children).
  pid_t program = -1;
  for (int i = 0; i < 500 && program <= 0; ++i) {
    ::usleep(10'000);
    if (!fs::exists(dir / "manifest.json")) continue;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(ptsnap) + "/task", ec)) {
      std::FILE* f = std::fopen((t.path() / "children").c_str(), "r");
      if (f == nullptr) continue;
      int pid = 0;
      if (std::fscanf(f, "%d", &pid) == 1) program = pid;
      std::fclose(f);
    }
  }
  ::kill(ptsnap, SIGKILL);
  ::waitpid(ptsnap, nullptr, 0);
  ASSERT_GT(program, 0) << "ptsnap never started the program";
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    // Gone, or a zombie of init's: its /proc/PID/stat state is Z or X.
    std::FILE* f = std::fopen(("/proc/" + std::to_string(program) + "/stat").c_str(), "r");
    char state = 'X';
    if (f != nullptr) {
      if (std::fscanf(f, "%*d %*s %c", &state) != 1) state = 'X';
      std::fclose(f);
    }
    gone = state == 'Z' || state == 'X';
    if (!gone) ::usleep(10'000);
  }
  EXPECT_TRUE(gone) << "the program (pid " << program << ") outlived ptsnap";
  auto r = ::ptsnap::trace::TraceReader::Open(dir);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->manifest().state, ::ptsnap::trace::State::kRecording);
  const auto info = ::ptsnap::testing::RunPtsnap("info '" + dir.string() + "'");
  EXPECT_EQ(info.rc, 0) << info.out;
  EXPECT_THAT(info.out, HasSubstr("cut short by a crash or kill"));
}

// Under sudo (SUDO_UID/SUDO_GID with real uid 0) every file and directory
// ptsnap creates belongs to the user who ran sudo: the trace directory and
// all below it (the emulator's files moved in, binary copies), and the
// decoded output; the trace keeps its modes (0700 directories, 0600 files).
TEST(SamplingCli, UnderSudoEveryFileBelongsToTheInvokingUser) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root (sudo's real uid) to give files away";
  const char* bin = std::getenv("PTSNAP_BIN");
  ASSERT_NE(bin, nullptr) << "PTSNAP_BIN is set by meson";
  TempDir tmp;
  const fs::path dir = tmp.path() / "sudo.ptsnap";
  const fs::path out = tmp.path() / "sudo.fxt";
  const auto run = ::ptsnap::testing::RunShellRaw(
      "SUDO_UID=4242 SUDO_GID=4343 '" + std::string(bin) + "' run --emulate --copy-binaries " +
      "--trace-dir '" + dir.string() + "' -o '" + out.string() + "' -- /bin/true 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  size_t files = 0, dirs = 0;
  auto check = [&](const fs::path& p, bool in_trace) {
    struct stat st;
    ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 4242U) << p << " is not the sudo user's";
    EXPECT_EQ(st.st_gid, 4343U) << p;
    if (!in_trace) return;
    if (S_ISDIR(st.st_mode)) {
      ++dirs;
      EXPECT_EQ(st.st_mode & 07777, 0700U) << p;
    } else if (S_ISREG(st.st_mode)) {
      ++files;
      EXPECT_EQ(st.st_mode & 077, 0U) << p << " is readable by others";
    }
  };
  check(dir, true);
  for (const auto& e : fs::recursive_directory_iterator(dir)) check(e.path(), true);
  check(out, false);
  EXPECT_GE(files, 4U) << "manifest, sideband, a stream and binary copies";
  EXPECT_GE(dirs, 3U) << "the trace, pt/ and binaries/";
  EXPECT_TRUE(fs::exists(dir / "binaries")) << "--copy-binaries copied nothing";
}

// Where the owner cannot change (a user namespace that maps only root, as a
// filesystem without owners would refuse it), ptsnap warns once and goes
// on: the output is written, root's.
TEST(SamplingCli, UnderSudoAFailedChangeOfOwnerIsOneWarning) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root (sudo's real uid) to give files away";
  if (::ptsnap::testing::RunShellRaw("unshare -r true 2>&1").status != 0)
    GTEST_SKIP() << "unshare -r (a user namespace) is not allowed here";
  const char* bin = std::getenv("PTSNAP_BIN");
  ASSERT_NE(bin, nullptr) << "PTSNAP_BIN is set by meson";
  TempDir tmp;
  const fs::path dir = tmp.path() / "t.ptsnap";
  const fs::path out = tmp.path() / "t.fxt";
  Exit rec =
      Ptsnap({"run", "--emulate", "--no-decode", "--trace-dir", dir.string(), "--", "/bin/true"});
  ASSERT_EQ(rec.code, 0) << rec.err;
  const auto run = ::ptsnap::testing::RunShellRaw("unshare -r env SUDO_UID=4242 SUDO_GID=4343 '" +
                                                  std::string(bin) + "' decode '" + dir.string() +
                                                  "' -o '" + out.string() + "' 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("to the user who ran sudo (Invalid argument); files stay root's"));
  size_t warnings = 0;
  for (size_t at = run.out.find("who ran sudo"); at != std::string::npos;
       at = run.out.find("who ran sudo", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1U) << run.out;
  EXPECT_GT(fs::file_size(out), 0U);
}

}  // namespace
