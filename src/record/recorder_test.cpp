// Unit tests of the recorder's pure parts: option parsing, error messages
// (every errno a user can meet), and Prepare() against fake /sys and /proc
// trees (no PMU, no privilege, rounding).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/string_util.h"
#include "probe/probe.h"
#include "record/child.h"
#include "record/hardware_source.h"
#include "record/options.h"
#include "record/recorder.h"
#include "tests/support/fake_cpuid.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasErrorKind;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(Options, ParseSize) {
  EXPECT_EQ(*ParseSize("4M"), 4u << 20);
  EXPECT_EQ(*ParseSize("256K"), 256u << 10);
  EXPECT_EQ(*ParseSize("1GiB"), 1u << 30);
  EXPECT_EQ(*ParseSize("65536"), 65536u);
  EXPECT_EQ(*ParseSize(" 8 kb "), 8192u);
  EXPECT_THAT(ParseSize("lots"), HasErrorContaining("bad size 'lots'"));
  EXPECT_THAT(ParseSize("4T"), HasErrorContaining("bad size"));
  EXPECT_THAT(ParseSize("99999999999999999999"), HasErrorContaining("bad size"));
}

TEST(Options, ParseDuration) {
  EXPECT_EQ(*ParseDuration("2ms"), 2'000'000u);
  EXPECT_EQ(*ParseDuration("500us"), 500'000u);
  EXPECT_EQ(*ParseDuration("1.5ms"), 1'500'000u);
  EXPECT_EQ(*ParseDuration("800ns"), 800u);
  EXPECT_EQ(*ParseDuration("2s"), 2'000'000'000u);
  EXPECT_EQ(*ParseDuration(" 3 MS "), 3'000'000u);
  EXPECT_EQ(*ParseDuration(".5us"), 500u);
  EXPECT_EQ(*ParseDuration("1.0000000004s"), 1'000'000'000u);  // 9 decimals kept
  EXPECT_EQ(*ParseDuration("0.0015ms"), 1'500u);
  EXPECT_EQ(*ParseDuration("1.5ns"), 2u);               // rounds to the nearest ns
  EXPECT_EQ(*ParseDuration("2min"), 120'000'000'000u);  // base::ParseDurationNs's units
  EXPECT_THAT(ParseDuration("2"),
              HasErrorContaining("give a unit (ns, us, ms, s, m or h), e.g. 2ms"));
  EXPECT_THAT(ParseDuration("fast"), HasErrorContaining("bad duration 'fast'"));
  EXPECT_THAT(ParseDuration("2 parsecs"), HasErrorContaining("bad duration"));
  EXPECT_THAT(ParseDuration("1.ms"), HasErrorContaining("bad duration"));
  EXPECT_THAT(ParseDuration("-1ms"), HasErrorContaining("bad duration"));
  EXPECT_THAT(ParseDuration("0ms"), HasErrorContaining("shorter than 1 ns"));
  EXPECT_THAT(ParseDuration("0.1ns"), HasErrorContaining("shorter than 1 ns"));
  EXPECT_THAT(ParseDuration("90000s"), HasErrorContaining("longer than a day"));
  EXPECT_THAT(ParseDuration("99999999999999999999999ms"), HasErrorContaining("bad duration"));
}

// --duration: ParseDuration's spellings, and bare numbers as seconds
// (magic-trace's -duration 5), rounded up to whole milliseconds.
TEST(Options, ParseRecordingDuration) {
  using std::chrono::milliseconds;
  EXPECT_EQ(*ParseRecordingDuration("10s"), milliseconds(10'000));
  EXPECT_EQ(*ParseRecordingDuration("5"), milliseconds(5'000));  // a bare number is seconds
  EXPECT_EQ(*ParseRecordingDuration("2.5"), milliseconds(2'500));
  EXPECT_EQ(*ParseRecordingDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseRecordingDuration(" 3 MS "), milliseconds(3));
  EXPECT_EQ(*ParseRecordingDuration("1.5s"), milliseconds(1'500));
  EXPECT_EQ(*ParseRecordingDuration("2m"), milliseconds(120'000));
  EXPECT_EQ(*ParseRecordingDuration("2min"), milliseconds(120'000));
  EXPECT_EQ(*ParseRecordingDuration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(*ParseRecordingDuration("1ns"), milliseconds(1));  // rounded up
  EXPECT_EQ(*ParseRecordingDuration("3\xc2\xb5s"), milliseconds(1));
  EXPECT_EQ(*ParseRecordingDuration("1.0001ms"), milliseconds(2));
  EXPECT_THAT(ParseRecordingDuration("soon"),
              HasErrorContaining("bad --duration 'soon': use e.g. 10s, 500ms, 2m, 1.5s"));
  for (const char* bad : {"0", "0s", "-1", "1.s", "", "5 parsecs", "99999999999999999999h"})
    EXPECT_THAT(ParseRecordingDuration(bad), HasErrorContaining("bad --duration")) << bad;
}

TEST(Options, SlowCallGapIsTheThresholdButAtLeast10ms) {
  EXPECT_EQ(SlowCallGapNs(1'000), 10'000'000u);
  EXPECT_EQ(SlowCallGapNs(50'000'000), 50'000'000u);
}

TEST(Options, RoundToPowerOfTwoPages) {
  bool rounded = true;
  EXPECT_EQ(RoundToPowerOfTwoPages(4u << 20, &rounded), 4u << 20);
  EXPECT_FALSE(rounded);
  EXPECT_EQ(RoundToPowerOfTwoPages(3000000, &rounded), 4u << 20);
  EXPECT_TRUE(rounded);
  EXPECT_EQ(RoundToPowerOfTwoPages(1, &rounded), 4096u);
  EXPECT_EQ(RoundToPowerOfTwoPages(uint64_t{3} * 4096, &rounded), 4 * 4096u);
}

// perf's minimums: 8 KiB with --full-execution, one page in snapshot mode.
TEST(Options, CheckAuxSizeHasPerfsMinimums) {
  EXPECT_THAT(CheckAuxSize(4096, true),
              HasErrorContaining("--snapshot-size 4 KiB is too small for --full-execution: the PT "
                                 "buffer needs at least 8 KiB"));
  EXPECT_THAT(CheckAuxSize(8192, true), HasValue());
  EXPECT_THAT(CheckAuxSize(4096, false), HasValue());
  EXPECT_THAT(CheckAuxSize(0, false), HasErrorContaining("needs at least 4 KiB"));
  // A bad command line (exit 2), as --snapshot-size 0 is, not a failure.
  EXPECT_EQ(CheckAuxSize(1024, false).error().kind(), ErrorKind::kUsage);
}

// perf's intel_pt_psb_period and its "may be too small for PSB period"
// warning (size <= period + 256).
TEST(Options, PsbPeriodWarning) {
  EXPECT_EQ(perf::PsbPeriodBytes(false, 5), 256u);  // early hardware: frequent PSBs
  EXPECT_EQ(perf::PsbPeriodBytes(true, 0), 2048u);
  EXPECT_EQ(perf::PsbPeriodBytes(true, 3), 16384u);
  auto w = PsbPeriodWarning(16384, 16384);
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("--snapshot-size 16 KiB may be too small for the PSB period"));
  EXPECT_TRUE(PsbPeriodWarning(16384 + 256, 16384).has_value());
  EXPECT_FALSE(PsbPeriodWarning(16384 + 257, 16384).has_value());
  EXPECT_FALSE(PsbPeriodWarning(4096, 256).has_value());
}

TEST(Options, DefaultTraceDirSitsBesideTheOutput) {
  EXPECT_EQ(DefaultTraceDir("trace.fxt.gz"), "trace.ptsnap");
  EXPECT_EQ(DefaultTraceDir("out/run1.json"), "out/run1.ptsnap");
  EXPECT_EQ(DefaultTraceDir(""), "trace.ptsnap");
}

size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

pid_t FailingFork() {
  errno = EAGAIN;
  return -1;
}

// A failed fork() must not leak the two pipes Spawn made for the child.
TEST(Child, FailedForkClosesItsPipes) {
  const size_t before = OpenFds();
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Child::Spawn({"/bin/true"}, &FailingFork), HasErrorContaining("fork"));
  }
  EXPECT_EQ(OpenFds(), before);
}

void OnAlarm(int) {}

// The recorder's signal handlers have no SA_RESTART, so waitpid can fail
// with EINTR (Ctrl-C while the child starts); WaitPid keeps waiting.
TEST(Child, WaitPidRetriesAfterASignal) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = OnAlarm;
  ::sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::usleep(300 * 1000);
    ::_exit(7);
  }
  itimerval every{{0, 20000}, {0, 20000}};  // every 20 ms
  ASSERT_EQ(::setitimer(ITIMER_REAL, &every, nullptr), 0);
  int st = 0;
  const pid_t r = WaitPid(pid, &st, 0);
  const int err = errno;
  itimerval off{};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &old, nullptr);
  ASSERT_EQ(r, pid) << std::strerror(err);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
}

// `run` needs PTRACE_TRACEME; Yama's ptrace_scope 3 refuses it to everyone.

constexpr const char* kDev = "sys/bus/event_source/devices/intel_pt/";

void WritePmu(const TempDir& d) {
  d.Write(std::string(kDev) + "type", "8\n");
  d.Write(std::string(kDev) + "format/pt", "config:0");
  d.Write(std::string(kDev) + "format/tsc", "config:10");
  d.Write(std::string(kDev) + "format/branch", "config:13");
  d.Write(std::string(kDev) + "max_nonturbo_ratio", "22\n");
}

void WriteUser(const TempDir& d, int paranoid) {
  d.Write("proc/self/status",
          "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
  d.Write("proc/sys/kernel/perf_event_paranoid", std::to_string(paranoid) + "\n");
}

// attach: a process that exits between attach's checks and the read of its
// memory map is named as gone (kProcessGone), not a bare ENOENT on
// /proc/PID/maps.
TEST(Attach, AProcessGoneWhileAttachingIsNamedSo) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: the pid is free
  auto sb = SynthesizeSideband(child, 0);
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().kind(), ErrorKind::kProcessGone);
  EXPECT_THAT(sb.error().ToString(),
              ::testing::HasSubstr("exited while ptsnap was attaching to it: nothing of it was "
                                   "traced"));
}

TEST(Prepare, NoPmuFailsWithKind) {
  TempDir d;
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  EXPECT_THAT(
      Prepare(o, base::RootPath(d.path()), cpuid),
      AllOf(HasErrorContaining("no Intel PT on this machine"), HasErrorKind(ErrorKind::kNoPmu)));
}

TEST(Prepare, KernelScopeWithoutPrivilegeFailsBeforeOpening) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.scope = trace::Scope::kUserKernel;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              AllOf(HasErrorContaining("--trace-include-kernel needs CAP_PERFMON"),
                    HasErrorKind(ErrorKind::kPrivilege)));
  // paranoid 1 allows it.
  WriteUser(d, 1);
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid), HasValue());
}

TEST(Prepare, BuildsAttrsAndDefaults) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.snapshot_size = 100000;  // not a power of two pages
  o.timer.preset = "low";
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->aux_bytes, 128u << 10);
  ASSERT_FALSE(p->warnings.empty());
  EXPECT_THAT(p->warnings[0], HasSubstr("rounded up to 128 KiB"));
  ASSERT_TRUE(p->hw.pt_attr.has_value());
  EXPECT_EQ(p->hw.pt_attr->type, 8u);
  EXPECT_EQ(p->hw.pt_attr->config, (1u << 0) | (1u << 10) | (1u << 13));
  EXPECT_EQ(p->hw.pt_attr->enable_on_exec, 1u);  // run
  EXPECT_EQ(p->hw.tracking_attr.enable_on_exec, 1u);
  EXPECT_EQ(p->hw.aux_pages, 32u);
  EXPECT_EQ(p->pt.nom_freq, 22u);
  EXPECT_EQ(p->mode, trace::Mode::kSnapshot);
  EXPECT_TRUE(p->cpus.empty());  // per-thread
  // Unprivileged default: the probe's rule, 128 KiB.
  o.snapshot_size = 0;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->aux_bytes, 128u << 10);
  EXPECT_EQ(p->aux_bytes, probe::DefaultSnapshotBytes(p->privileges, 1));
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("rounded"))));
  // Triggers trap once per thread unless every hit is to be snapshotted.
  EXPECT_TRUE(p->hw.single_shot_triggers);
  o.multi_snapshot = true;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.single_shot_triggers);
  EXPECT_TRUE(p->hw.sideband_for_untraced_threads);  // per-thread
}

// --ptw: the ptw and fup_on_ptw terms where the CPU has PTWRITE, else the
// error naming caps/ptwrite and the emulated encoding (docs/errors.md).
TEST(Prepare, PtwNeedsCapsPtwriteAndSetsItsTerms) {
  TempDir d;
  WritePmu(d);
  d.Write(std::string(kDev) + "format/fup_on_ptw", "config:5");
  d.Write(std::string(kDev) + "format/ptw", "config:12");
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.timer.preset = "low";
  o.ptw = true;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("--ptw needs the PTWRITE instruction, which this CPU lacks"));
  d.Write(std::string(kDev) + "caps/ptwrite", "1\n");
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->hw.pt_attr.has_value());
  EXPECT_EQ(p->hw.pt_attr->config, (1u << 0) | (1u << 5) | (1u << 10) | (1u << 12) | (1u << 13));
  EXPECT_EQ(p->pt.config, p->hw.pt_attr->config) << "the manifest shows what was opened";
}

// --pwr-evt: the pwr_evt term where the CPU has Power Event Trace, else the
// error naming caps/power_event_trace (docs/errors.md).
TEST(Prepare, PwrEvtNeedsCapsPowerEventTraceAndSetsItsTerm) {
  TempDir d;
  WritePmu(d);
  d.Write(std::string(kDev) + "format/pwr_evt", "config:4");
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.timer.preset = "low";
  o.pwr_evt = true;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("--pwr-evt needs Power Event Trace, which this CPU lacks"));
  d.Write(std::string(kDev) + "caps/power_event_trace", "1\n");
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->hw.pt_attr.has_value());
  EXPECT_EQ(p->hw.pt_attr->config, (1u << 0) | (1u << 4) | (1u << 10) | (1u << 13));
  EXPECT_EQ(p->pt.config, p->hw.pt_attr->config) << "the manifest shows what was opened";
}

// --filter: resolved against the program, checked against the PMU's
// ip_filtering and nr_addr_filters, and handed to the PT source as the
// kernel's string for PERF_EVENT_IOC_SET_FILTER.
TEST(Prepare, FilterBecomesTheKernelsFilterString) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/proc/self/exe"};  // this test: an ELF file with symbols
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  o.filter = "filter 0x1000/0x40, tracestop 0x2000/16";
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("caps/ip_filtering is 0 or missing"));
  d.Write(std::string(kDev) + "caps/ip_filtering", "1\n");
  d.Write(std::string(kDev) + "nr_addr_filters", "1\n");
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("2 address ranges, but this CPU's Intel PT takes at most 1"));
  d.Write(std::string(kDev) + "nr_addr_filters", "2\n");
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->hw.addr_filter, "filter 0x1000/0x40@" + self + ",stop 0x2000/0x10@" + self);
  EXPECT_EQ(p->pt.filter, p->hw.addr_filter);  // the manifest's pt.filter
  o.filter = "start 0x1000/1";
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("Intel PT has no start/stop addresses"));
  o.filter = "";
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->hw.addr_filter, "");
}

}  // namespace
}  // namespace ptsnap::record

// A function of this test binary for --only-in to find.
extern "C" __attribute__((noinline, used)) int ptsnap_only_in_target(int x) { return x * 3 + 1; }

namespace ptsnap::record {
namespace {

void WriteUprobePmu(const TempDir& d) {
  d.Write("sys/bus/event_source/devices/uprobe/type", "9\n");
  d.Write("sys/bus/event_source/devices/uprobe/format/retprobe", "config:0\n");
}

// --only-in per kernel release: 6.13+ opens the PT event paused with an
// entry uprobe (aux_resume) and a return uprobe (aux_pause) for its group;
// 6.12 falls back to an address filter on the function, with one note.
TEST(Prepare, OnlyInUsesAuxPauseFrom613AndAFilterBefore) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  WriteUprobePmu(d);
  d.Write(std::string(kDev) + "caps/ip_filtering", "1\n");
  d.Write(std::string(kDev) + "nr_addr_filters", "2\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/proc/self/exe"};
  o.only_in = "ptsnap_only_in_target";
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();

  d.Write("proc/sys/kernel/osrelease", "6.13.0\n");
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->hw.only_in.has_value());
  EXPECT_EQ(perf::AuxAction(*p->hw.pt_attr), perf::kAuxStartPaused);
  const AuxActionProbes& probes = *p->hw.only_in;
  EXPECT_EQ(probes.path, self);
  EXPECT_NE(probes.offset, 0u);
  EXPECT_EQ(probes.resume.type, 9u);
  EXPECT_EQ(perf::AuxAction(probes.resume), perf::kAuxResume);
  EXPECT_EQ(probes.resume.config, 0u);
  EXPECT_EQ(probes.resume.config2, probes.offset);
  EXPECT_EQ(perf::AuxAction(probes.pause), perf::kAuxPause);
  EXPECT_EQ(probes.pause.config, 1u);  // retprobe
  EXPECT_EQ(p->hw.addr_filter, "");
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("--only-in"))));
  // #22: a single snapshot's trigger pauses PT at the hit, on 6.13+ only.
  EXPECT_TRUE(p->hw.trigger_aux_pause);
  o.multi_snapshot = true;
  EXPECT_FALSE(Prepare(o, base::RootPath(d.path()), cpuid)->hw.trigger_aux_pause);
  o.multi_snapshot = false;

  d.Write("proc/sys/kernel/osrelease", "6.12.9\n");
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.only_in.has_value());
  EXPECT_EQ(perf::AuxAction(*p->hw.pt_attr), 0u);  // 6.12 refuses the bit (EINVAL)
  EXPECT_FALSE(p->hw.trigger_aux_pause);
  EXPECT_THAT(p->hw.addr_filter, ::testing::StartsWith("filter " + base::Hex(probes.offset) + "/"));
  EXPECT_THAT(p->hw.addr_filter, ::testing::EndsWith("@" + self));
  EXPECT_THAT(p->warnings,
              ::testing::Contains(
                  "--only-in ptsnap_only_in_target: this kernel (6.12) has no AUX pause/resume "
                  "(Linux 6.13+): tracing only ptsnap_only_in_target's own code instead (as "
                  "--filter ptsnap_only_in_target: the functions it calls are not traced)"));
  // With a --filter of its own, short form too: both ranges.
  o.filter = "ptsnap_only_in_target";
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(std::count(p->hw.addr_filter.begin(), p->hw.addr_filter.end(), ','), 1);
  o.filter = "";
  // The fallback needs IP filtering.
  d.Write(std::string(kDev) + "caps/ip_filtering", "0\n");
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("has no IP filtering for the fallback"));

  o.only_in = "no_such_function_here";
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              AllOf(HasErrorContaining("--only-in: no function named 'no_such_function_here' in"),
                    HasErrorKind(ErrorKind::kTrigger)));
}

// The default buffer size shares the user's mlock budget among the buffers
// the recording will map: attach --multi-thread maps one per thread.
TEST(Prepare, DefaultSnapshotSizeSharesTheBudgetAmongThreads) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  d.Write("proc/sys/kernel/perf_event_mlock_kb", "12288\n");  // 12 MiB, one CPU
  for (int tid = 4242; tid < 4242 + 40; ++tid)
    d.Write("proc/4242/task/" + std::to_string(tid) + "/stat", "");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.pids = {4242};
  auto one = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(one, HasValue());
  EXPECT_EQ(one->aux_bytes, 128u << 10);  // the unprivileged default fits
  o.multi_thread = true;
  auto many = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(many, HasValue());
  // 40 buffers in 12 MiB + 64 KiB: 309 KiB each, 52 KiB after perf's 257 KiB
  // data ring: 32 KiB of AUX each.
  EXPECT_EQ(many->aux_bytes, 32u << 10);
  EXPECT_EQ(many->aux_bytes, probe::DefaultSnapshotBytes(many->privileges, 1, 40));
  // With the default 516 KiB there is no room for 40.
  d.Write("proc/sys/kernel/perf_event_mlock_kb", "516\n");
  auto none = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().ToString(),
              HasSubstr("no room for 40 PT buffers (one per traced thread)"));
  EXPECT_THAT(none.error().ToString(), HasSubstr("trace fewer threads (without --multi-thread)"));
}

void WriteRoot(const TempDir& d, int paranoid) {
  d.Write("proc/self/status", "Name:\tx\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n");
  d.Write("proc/sys/kernel/perf_event_paranoid", std::to_string(paranoid) + "\n");
}

// --sampling: no intel_pt PMU needed; the event, callgraph and frequency
// come from the machine (probes injected), the privileges are PT's.
OpenProbe Opens(bool cycles, bool lbr) {
  return [cycles, lbr](const perf_event_attr& a) {
    if (a.type != PERF_TYPE_HARDWARE) return true;
    return (a.sample_type & PERF_SAMPLE_BRANCH_STACK) != 0 ? lbr : cycles;
  };
}

TEST(PrepareSampling, VmWithoutPmuGetsCpuClockAndDwarf) {
  TempDir d;  // no intel_pt, no pdcm
  WriteUser(d, 2);
  d.Write("proc/sys/kernel/perf_event_max_sample_rate", "50000\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.sampling = true;
  o.timer.preset = "high";
  auto p = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->sampling.has_value());
  const perf_event_attr& a = p->sampling->sampling_attr;
  EXPECT_EQ(a.type, PERF_TYPE_SOFTWARE);
  EXPECT_EQ(a.config, PERF_COUNT_SW_CPU_CLOCK);
  EXPECT_EQ(a.sample_freq, 50000u);  // high = perf_event_max_sample_rate
  EXPECT_EQ(a.enable_on_exec, 1u);   // run
  EXPECT_EQ(p->sampling_info.event, "cpu-clock");
  EXPECT_EQ(p->sampling_info.callgraph, "dwarf");
  EXPECT_EQ(p->sampling_info.sample_type, a.sample_type);
  EXPECT_EQ(p->sampling_info.regs_user, perf::kX86UserRegsMask);
  EXPECT_EQ(p->sampling_info.stack_user, perf::kDwarfStackBytes);
  EXPECT_EQ(p->sampling_info.frequency, 50000u);
  EXPECT_THAT(p->warnings, ::testing::Contains(HasSubstr("defaulting to dwarf")));
  // About a second of dwarf samples at 50 kHz: the 64 MiB cap.
  EXPECT_EQ(p->sampling->snapshot_bytes, kSamplingSnapshotMaxBytes);
  EXPECT_EQ(p->aux_bytes, kSamplingSnapshotMaxBytes);
  EXPECT_FALSE(p->hw.pt_attr.has_value());
  EXPECT_EQ(p->hw.data_pages, p->sampling->data_pages);
  EXPECT_GE(p->sampling->data_pages, 16u);
  EXPECT_TRUE(p->sampling->single_shot_triggers);
  EXPECT_EQ(DefaultSamplingSnapshotBytes(1000, 100), kSamplingSnapshotMinBytes);
  EXPECT_EQ(DefaultSamplingSnapshotBytes(10000, 576), 5760000u);
  // An explicit mode is taken without a warning; lbr is refused here.
  o.callgraph_mode = "fp";
  p = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->sampling_info.callgraph, "fp");
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("defaulting"))));
  o.callgraph_mode = "lbr";
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              HasErrorContaining("use --callgraph-mode fp or dwarf"));
}

TEST(PrepareSampling, HardwareWithPdcmEverywhereDefaultsToLbr) {
  TempDir d;
  WriteUser(d, 2);
  d.Write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu pdcm\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.pids = {4242};
  o.sampling = true;
  auto p = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(true, true));
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->sampling_info.event, "cycles");
  EXPECT_EQ(p->sampling_info.callgraph, "lbr");
  EXPECT_EQ(p->sampling->sampling_attr.enable_on_exec, 0u);   // attach
  EXPECT_EQ(p->sampling->sampling_attr.sample_freq, 10000u);  // normal
  EXPECT_THAT(p->warnings, ::testing::Contains(HasSubstr("defaulting to lbr")));
  // Cycles but an LBR event that does not open: dwarf.
  p = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(true, false));
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->sampling_info.event, "cycles");
  EXPECT_EQ(p->sampling_info.callgraph, "dwarf");
}

TEST(PrepareSampling, PrivilegesAreThoseOfPerfEventOpen) {
  TempDir d;
  ::ptsnap::testing::FakeCpuid cpuid;
  d.Write("sys/devices/system/cpu/online", "0-1\n");
  RecordOptions o;
  o.command = {"/bin/true"};
  o.sampling = true;
  WriteUser(d, 3);  // Debian's level 3: nothing without CAP_PERFMON
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              HasErrorKind(ErrorKind::kPrivilege));
  WriteUser(d, 2);
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)), HasValue());
  o.scope = trace::Scope::kUserKernel;
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              AllOf(HasErrorContaining("--trace-include-kernel needs CAP_PERFMON"),
                    HasErrorKind(ErrorKind::kPrivilege)));
  WriteUser(d, 1);
  auto k = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_THAT(k, HasValue());
  EXPECT_EQ(k->sampling->sampling_attr.exclude_kernel, 0u);
  o.scope = trace::Scope::kUser;
  o.all_cpus = true;
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              HasErrorKind(ErrorKind::kPrivilege));
  WriteUser(d, 0);
  auto sw = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_THAT(sw, HasValue());
  EXPECT_THAT(sw->cpus, ::testing::ElementsAre(0, 1));
  EXPECT_EQ(sw->sampling->sampling_attr.enable_on_exec, 0u);  // per-CPU: on before the exec
}

TEST(PrepareSampling, TimingThatIsNotASampleRateIsRefused) {
  TempDir d;
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.sampling = true;
  o.timer = *perf::ParseTiming("custom:cyc=1");
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              HasErrorContaining("cannot be used with --sampling"));
  o.timer = *perf::ParseTiming("sample:1000000");
  auto p = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->sampling->sampling_attr.sample_freq, 100000u);  // the kernel's default max
  EXPECT_THAT(p->warnings, ::testing::Contains(HasSubstr("perf_event_max_sample_rate")));
}

// RLIMIT_MEMLOCK and perf_event_mlock_kb too small for one ring: an error
// naming both and the fixes, before anything opens.
TEST(PrepareSampling, AnMlockBudgetWithoutRoomForARingFailsFirst) {
  TempDir d;
  WriteUser(d, 2);
  d.Write("proc/sys/kernel/perf_event_mlock_kb", "0\n");
  d.Write("proc/self/limits",
          "Limit                     Soft Limit           Hard Limit           Units\n"
          "Max locked memory         16384                16384                bytes\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.sampling = true;
  EXPECT_THAT(PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false)),
              AllOf(HasErrorContaining("the perf mlock budget leaves no room for a sampling ring"),
                    HasErrorContaining("RLIMIT_MEMLOCK 16 KiB"), HasErrorContaining("ulimit -l"),
                    HasErrorContaining("or use --callgraph-mode fp (smaller samples)"),
                    HasErrorKind(ErrorKind::kBufferMapping)));
  // Already fp: the smaller samples are not offered again.
  d.Write("proc/self/limits",
          "Limit                     Soft Limit           Hard Limit           Units\n"
          "Max locked memory         4096                 4096                 bytes\n");
  o.callgraph_mode = "fp";
  auto fp = PrepareSampling(o, base::RootPath(d.path()), cpuid, Opens(false, false));
  ASSERT_FALSE(fp.has_value());
  EXPECT_THAT(fp.error().ToString(), ::testing::EndsWith("or `ulimit -l`) or run as root"));
}

TEST(SamplingDataPages, SizedByRateAndRecordWithinTheBudget) {
  // dwarf at 10 kHz: 25 ms of ~8.6 KiB samples is about 2 MiB.
  const uint64_t dwarf = SampleRecordBytes(perf::CallgraphMode::kDwarf);
  EXPECT_GT(dwarf, 8192u);
  EXPECT_EQ(SamplingDataPages(10000, dwarf, std::nullopt), 1024u);
  EXPECT_EQ(SamplingDataPages(1000, SampleRecordBytes(perf::CallgraphMode::kFp), std::nullopt),
            16u);
  // 516 KiB: 128 data pages and the header page.
  EXPECT_EQ(SamplingDataPages(10000, dwarf, 516u << 10), 128u);
  EXPECT_EQ(SamplingDataPages(10000, dwarf, 8u << 10), 0u);
}

TEST(Prepare, DefaultSnapshotSizeIsTheProbesRule) {
  TempDir d;
  WritePmu(d);
  WriteRoot(d, 2);
  d.Write("sys/devices/system/cpu/online", "0-7\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->aux_bytes, 4u << 20);
  EXPECT_EQ(p->aux_bytes, probe::DefaultSnapshotBytes(p->privileges, 8));
  // An mlock budget with no room for a buffer fails before anything opens.
  WriteUser(d, 2);
  d.Write("proc/sys/kernel/perf_event_mlock_kb", "0\n");
  d.Write("proc/self/limits",
          "Limit                     Soft Limit           Hard Limit           Units\n"
          "Max locked memory         4096                 4096                 bytes\n");
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("sysctl -w kernel.perf_event_mlock_kb="));
}

// Prepare reads the kernel's release and gates the tracking event's bits:
// 5.4 LTS would refuse text_poke with EINVAL.
TEST(Prepare, TrackingAttrBitsFollowTheKernelRelease) {
  TempDir d;
  WritePmu(d);
  WriteRoot(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.scope = trace::Scope::kUserKernel;
  d.Write("proc/sys/kernel/osrelease", "5.4.0-1103-aws\n");
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->hw.tracking_attr.ksymbol, 1u);
  EXPECT_EQ(p->hw.tracking_attr.text_poke, 0u);
  d.Write("proc/sys/kernel/osrelease", "6.13.0\n");
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->hw.tracking_attr.ksymbol, 1u);
  EXPECT_EQ(p->hw.tracking_attr.text_poke, 1u);
  // Where the CPU-wide events open (the CPUs are known), they carry the
  // bits, gated the same way.
  d.Write("sys/devices/system/cpu/online", "0-1\n");
  d.Write("proc/sys/kernel/osrelease", "5.4.0-1103-aws\n");
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->hw.kernel_sideband_attr.has_value());
  EXPECT_EQ(p->hw.kernel_sideband_attr->ksymbol, 1u);
  EXPECT_EQ(p->hw.kernel_sideband_attr->text_poke, 0u);
  d.Write("proc/sys/kernel/osrelease", "4.19.0\n");
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.kernel_sideband_attr.has_value());  // no record type to ask for
}

// Per-thread kernel scope: TEXT_POKE and KSYMBOL reach only CPU-wide events
// and the current task's, so Prepare asks for a CPU-wide dummy on every
// online CPU where the privileges allow one (as perf does), and says what
// may decode wrongly where they do not.
TEST(Prepare, PerThreadKernelScopeCollectsTextPokeOnEveryCpu) {
  TempDir d;
  WritePmu(d);
  WriteRoot(d, 2);
  d.Write("sys/devices/system/cpu/online", "0-3\n");
  d.Write("proc/sys/kernel/osrelease", "6.13.0\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.scope = trace::Scope::kUserKernel;
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  ASSERT_TRUE(p->hw.kernel_sideband_attr.has_value());
  EXPECT_EQ(p->hw.kernel_sideband_attr->ksymbol, 1u);
  EXPECT_EQ(p->hw.kernel_sideband_attr->text_poke, 1u);
  EXPECT_EQ(p->hw.kernel_sideband_cpus, (std::vector<int>{0, 1, 2, 3}));
  // Not twice: the per-thread tracking events leave both to it.
  EXPECT_EQ(p->hw.tracking_attr.ksymbol, 0u);
  EXPECT_EQ(p->hw.tracking_attr.text_poke, 0u);
  for (const std::string& w : p->warnings) EXPECT_THAT(w, Not(HasSubstr("may decode wrongly")));

  // paranoid 1 allows a kernel scope but no CPU-wide event: the tracking
  // events keep the bits (the threads' own records) and one line says why.
  WriteUser(d, 1);
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.kernel_sideband_attr.has_value());
  EXPECT_EQ(p->hw.tracking_attr.ksymbol, 1u);
  EXPECT_EQ(p->hw.tracking_attr.text_poke, 1u);
  EXPECT_THAT(p->warnings, Contains(AllOf(HasSubstr("may decode wrongly"),
                                          HasSubstr("kernel.perf_event_paranoid <= 0 (it is 1)"))));

  // --all-cpus: the tracking events are CPU-wide and keep the bits.
  WriteRoot(d, 2);
  o.all_cpus = true;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.kernel_sideband_attr.has_value());
  EXPECT_EQ(p->hw.tracking_attr.text_poke, 1u);
  // User scope: nothing of the kernel's.
  o.all_cpus = false;
  o.scope = trace::Scope::kUser;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_FALSE(p->hw.kernel_sideband_attr.has_value());
}

TEST(Prepare, FullExecutionNeedsAtLeast8KiB) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.full_execution = true;
  o.snapshot_size = 4096;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("is too small for --full-execution"));
  o.snapshot_size = 8192;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid), HasValue());
  o.full_execution = false;
  o.snapshot_size = 4096;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid), HasValue());
}

// A PMU with a configurable PSB period (psb_period 3 by default: a PSB about
// every 16 KiB): a 16 KiB snapshot gets perf's warning, 32 KiB does not.
TEST(Prepare, WarnsWhenTheSnapshotIsNearThePsbPeriod) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 2);
  d.Write(std::string(kDev) + "format/psb_period", "config:24-27");
  d.Write(std::string(kDev) + "caps/psb_cyc", "1\n");
  d.Write(std::string(kDev) + "caps/psb_periods", "3f\n");
  d.Write(std::string(kDev) + "caps/topa_multiple_entries", "1\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};
  o.timer.preset = "low";
  o.snapshot_size = 16 << 10;
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_THAT(p->warnings, ::testing::Contains(HasSubstr("may be too small for the PSB period")));
  o.snapshot_size = 32 << 10;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("PSB period"))));
  // Full execution streams everything: no snapshot to be too small.
  o.snapshot_size = 16 << 10;
  o.full_execution = true;
  p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_THAT(p->warnings, Not(::testing::Contains(HasSubstr("PSB period"))));
}

TEST(SystemWide, SelectsOnlineCpus) {
  const std::vector<int> online = {0, 1, 2, 3, 6};
  EXPECT_EQ(*SelectCpus({}, online), online);
  EXPECT_EQ(*SelectCpus({3, 1, 3}, online), (std::vector<int>{1, 3}));
  EXPECT_THAT(SelectCpus({1, 4, 5}, online),
              HasErrorContaining("--cpu 1,4-5: CPU 4-5 are not online (online: 0-3,6)"));
  EXPECT_THAT(SelectCpus({9}, online), HasErrorContaining("CPU 9 is not online"));
  EXPECT_THAT(SelectCpus({}, {}), HasErrorContaining("no online CPUs"));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(Prepare, SystemWideWithoutPrivilegeFailsBeforeOpening) {
  TempDir d;
  WritePmu(d);
  WriteUser(d, 1);  // enough for the kernel, not for all CPUs
  d.Write("sys/devices/system/cpu/online", "0-3\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.all_cpus = true;
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              AllOf(HasErrorContaining("needs CAP_PERFMON or CAP_SYS_ADMIN (root), or "
                                       "kernel.perf_event_paranoid <= 0 (it is 1)"),
                    HasErrorKind(ErrorKind::kPrivilege)));
  WriteUser(d, 0);
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Prepare, SystemWideAttrsArePerCpu) {
  TempDir d;
  WritePmu(d);
  WriteRoot(d, 2);
  d.Write("sys/devices/system/cpu/online", "0-3,6\n");
  ::ptsnap::testing::FakeCpuid cpuid;
  RecordOptions o;
  o.command = {"/bin/true"};  // run -a: the whole system while CMD runs
  o.all_cpus = true;
  o.cpus = {6, 1};
  o.scope = trace::Scope::kUserKernel;
  auto p = Prepare(o, base::RootPath(d.path()), cpuid);
  ASSERT_THAT(p, HasValue());
  EXPECT_EQ(p->cpus, (std::vector<int>{1, 6}));
  ASSERT_TRUE(p->hw.pt_attr.has_value());
  const perf_event_attr& pt = *p->hw.pt_attr;
  // Not tied to the program's exec; enabled by ptsnap before it execs.
  EXPECT_EQ(pt.enable_on_exec, 0u);
  EXPECT_EQ(pt.inherit, 0u);
  EXPECT_EQ(pt.disabled, 1u);
  EXPECT_EQ(pt.exclude_kernel, 0u);
  EXPECT_NE(pt.sample_type & PERF_SAMPLE_CPU, 0u);  // per-CPU: records say which CPU
  EXPECT_EQ(pt.sample_id_all, 1u);
  const perf_event_attr& tr = p->hw.tracking_attr;
  EXPECT_EQ(tr.enable_on_exec, 0u);
  EXPECT_EQ(tr.context_switch, 1u);  // CPU-wide: PERF_RECORD_SWITCH_CPU_WIDE
  EXPECT_EQ(tr.task, 1u);
  EXPECT_EQ(tr.mmap2, 1u);
  EXPECT_EQ(tr.comm, 1u);
  EXPECT_NE(tr.sample_type & PERF_SAMPLE_CPU, 0u);
  EXPECT_NE(tr.sample_type & PERF_SAMPLE_TIME, 0u);
  // A CPU that is not online is refused before anything opens.
  o.cpus = {5};
  EXPECT_THAT(Prepare(o, base::RootPath(d.path()), cpuid),
              HasErrorContaining("CPU 5 is not online (online: 0-3,6)"));
}

// The kernel side of one full-mode PT event, as far as restarting it goes
// (kernel/events/ring_buffer.c, core.c): IOC_DISABLE + IOC_ENABLE always
// restarts it; IOC_ENABLE alone restarts a disabled event but does nothing
// to one left ACTIVE with PERF_HES_STOPPED.
struct ModelPtEvent {
  bool enabled = true;
  bool stopped = false;  // ACTIVE but PERF_HES_STOPPED
  [[nodiscard]] bool tracing() const { return enabled && !stopped; }
  void Apply(AuxRestart a) {
    if (a == AuxRestart::kDisableEnable) {
      enabled = true;
      stopped = false;
    } else if (a == AuxRestart::kEnable && !enabled) {
      enabled = true;
    }
  }
};

// What the kernel does to the event between two drains, and whether the
// reader gets to see a TRUNCATED record for it.
struct KernelStep {
  const char* what;
  bool disables = false;       // the event ends up disabled
  bool stops_only = false;     // ... or ACTIVE but stopped
  bool record_seen = false;    // a TRUNCATED record reached the data ring
  bool after_restart = false;  // the disable lands after the reader's restart (race)
};

// The recorder's full-mode loop against each way the kernel can stop PT: it
// must be tracing again after every drain (or, for a disable that races the
// restart, after the next one), never off for good.
TEST(AuxRestart, FullModeNeverStaysDisabled) {
  const KernelStep steps[] = {
      {"buffer full, TRUNCATED seen", true, false, true, false},
      {"TRUNCATED lost (data ring full: PERF_RECORD_LOST instead)", true, false, false, false},
      {"no room at sched-in: disabled without a record", true, false, false, false},
      {"ENABLE undone by the deferred disable", true, false, true, true},
      {"ACTIVE but stopped after TRUNCATED", false, true, true, false},
      {"nothing happened", false, false, false, false},
  };
  for (const KernelStep& k : steps) {
    ModelPtEvent ev;
    for (int drain = 0; drain < 3; ++drain) {
      const bool first = drain == 0;
      if (first && !k.after_restart) {
        if (k.disables) ev.enabled = false;
        if (k.stops_only) ev.stopped = true;
      }
      ev.Apply(AuxRestartAfterDrain(first && k.record_seen, /*finishing=*/false));
      if (first && k.after_restart) ev.enabled = false;  // the irq_work runs now
      if (!(first && k.after_restart)) {
        EXPECT_TRUE(ev.tracing()) << k.what << ", drain " << drain;
      }
    }
    EXPECT_TRUE(ev.tracing()) << k.what;
  }
  // Finish stops the events for good: no restart whatever was seen.
  EXPECT_EQ(AuxRestartAfterDrain(true, true), AuxRestart::kNone);
  EXPECT_EQ(AuxRestartAfterDrain(false, true), AuxRestart::kNone);
}

TEST(TimeConv, ReadsTheUserPageAndConvertsTsc) {
  auto page = std::make_unique<perf_event_mmap_page>();
  page->time_zero = 1000;
  page->time_mult = 3 << 20;  // 3 ns per cycle with shift 20
  page->time_shift = 20;
  page->cap_user_time_zero = 1;
  trace::TimeConv tc = ReadTimeConv(page.get());
  EXPECT_EQ(tc.time_zero, 1000u);
  EXPECT_EQ(tc.time_mult, 3u << 20);
  EXPECT_EQ(tc.time_shift, 20u);
  EXPECT_TRUE(tc.cap_user_time_zero);
  EXPECT_EQ(trace::TscToPerfTime(tc, 0), 1000u);
  EXPECT_EQ(trace::TscToPerfTime(tc, 10), 1030u);
  EXPECT_EQ(trace::TscToPerfTime(tc, (uint64_t{1} << 20) + 5), 1000u + 3 * ((1u << 20) + 5));
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

// hw-path-review.md: the streams of a snapshot were written to disk while
// PT was still disabled, lengthening the gap. Now: disable, copy, enable,
// then write; and a failed step never leaves PT off.
TEST(RunSnapshot, WritesOnlyAfterPtIsEnabledAgain) {
  std::vector<std::string> order;
  SnapshotSteps steps;
  steps.disable_all = [&]() -> Result<void> {
    order.push_back("disable");
    return Ok();
  };
  steps.copy_all = [&] {
    order.push_back("copy");
    std::vector<std::pair<trace::Stream, std::vector<std::byte>>> out(2);
    out[0].first.tid = 1;
    out[1].first.tid = 2;
    return out;
  };
  steps.enable_all = [&]() -> Result<void> {
    order.push_back("enable");
    return Ok();
  };
  steps.write = [&](const trace::Stream& s, const std::vector<std::byte>&) -> Result<void> {
    order.push_back("write " + std::to_string(s.tid));
    return Ok();
  };
  ASSERT_THAT(RunSnapshot(steps, true), HasValue());
  EXPECT_EQ(order, (std::vector<std::string>{"disable", "copy", "enable", "write 1", "write 2"}));
  order.clear();
  ASSERT_THAT(RunSnapshot(steps, false), HasValue());  // the last snapshot: PT stays off
  EXPECT_EQ(order, (std::vector<std::string>{"disable", "copy", "write 1", "write 2"}));
  // A failed disable: PT is enabled again, nothing is written, the error returns.
  order.clear();
  steps.disable_all = [&]() -> Result<void> {
    order.push_back("disable");
    return Error("IOC_DISABLE failed");
  };
  EXPECT_THAT(RunSnapshot(steps, true), HasErrorContaining("IOC_DISABLE failed"));
  EXPECT_EQ(order, (std::vector<std::string>{"disable", "enable"}));
}

}  // namespace
}  // namespace ptsnap::record
