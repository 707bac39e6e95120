// Real perf_event_open on this machine: sideband of a spawned child, hardware
// breakpoints on a worker thread, and whole recordings (sideband only where
// there is no intel_pt PMU). Needs permission to use perf events on own
// children (perf_event_paranoid <= 2, or root).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sched.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "perf/attr.h"
#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "record/aux_stream.h"
#include "record/breakpoints.h"
#include "record/child.h"
#include "record/elf_symbols.h"
#include "record/forwarding_source.h"
#include "record/hardware_source.h"
#include "record/recorder.h"
#include "record/sampling_source.h"
#include "sys/cpus.h"
#include "sys/kernel_version.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

// Record() with nobody driving it unless `control` is given (the public
// API and the CLI turn signals into Control requests; see control.h).
Result<Outcome> RecordUndriven(const RecordOptions& o, Prepared p, const std::filesystem::path& dir,
                               const base::RootPath& root,
                               const SourceFactory& make_source = nullptr,
                               Control* control = nullptr) {
  Control own;
  return Record(o, std::move(p), dir, root, control != nullptr ? *control : own, nullptr,
                make_source);
}

using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;

std::string TargetPath() {
  const char* p = std::getenv("PTSNAP_TRIGGER_TARGET");
  return p != nullptr ? p : "";
}

// meson sets it (tests/recorder/meson.build): without it the test fails,
// so losing that line cannot turn these tests into skips.
#define REQUIRE_TARGET()                             \
  if (TargetPath().empty())                          \
  FAIL() << "PTSNAP_TRIGGER_TARGET is not set: run " \
            "through `meson test`"

// trigger_target started in its stdin-wait mode, with our pipes.
struct WaitingTarget {
  pid_t pid = -1;
  pid_t worker = -1;
  int go = -1;
  WaitingTarget() {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      execl(TargetPath().c_str(), "trigger_target", "3", nullptr);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    go = in[1];
    FILE* f = fdopen(out[0], "r");
    int p = 0, w = 0;
    if (f == nullptr || fscanf(f, "ready %d %d", &p, &w) != 2) return;
    fclose(f);
    worker = w;
  }
  void Go() const { ASSERT_EQ(write(go, "g", 1), 1); }
  int Wait() {
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return st;
  }
  ~WaitingTarget() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (go >= 0) close(go);
  }
};

// `run --ptw` hands the program PTSNAP_PTWRITE=1 this way: a variable of
// the same name in ptsnap's environment is replaced, the rest passed on.
TEST(Child, SpawnAddsAndReplacesEnvironmentVariables) {
  ::setenv("PTSNAP_PTWRITE", "0", 1);
  ::setenv("PTSNAP_CHILD_TEST_KEPT", "kept", 1);
  auto child = Child::Spawn(
      {"/bin/sh", "-c", "test \"$PTSNAP_PTWRITE\" = 1 && test \"$PTSNAP_CHILD_TEST_KEPT\" = kept"},
      &::fork, {}, true, {"PTSNAP_PTWRITE=1"});
  ::unsetenv("PTSNAP_PTWRITE");
  ::unsetenv("PTSNAP_CHILD_TEST_KEPT");
  ASSERT_THAT(child, HasValue());
  ASSERT_THAT(child->Exec(), HasValue());
  ASSERT_THAT(child->Resume(), HasValue());
  EXPECT_EQ(child->Wait(), 0);
}

TEST(Sideband, DummyEventOnSpawnedChildCapturesMmap2CommAndExit) {
  auto child = Child::Spawn({"/bin/true"});
  ASSERT_THAT(child, HasValue());
  auto ev = perf::PerfEvent::Open(perf::BuildTrackingAttr(false, /*enable_on_exec=*/true),
                                  child->pid(), -1, perf::MapSpec{16, 0, false}, "dummy");
  ASSERT_THAT(ev, HasValue());
  auto id = ev->Id();
  ASSERT_THAT(id, HasValue());
  ASSERT_THAT(child->Exec(), HasValue());
  ASSERT_THAT(child->Resume(), HasValue());
  EXPECT_EQ(child->Wait(), 0);

  perf::DataRingReader ring(ev->header(), ev->data());
  std::vector<trace::Record> records;
  auto n = ring.Drain([&](std::span<const std::byte> rec) {
    auto parsed = trace::ParseRecord(rec);
    ASSERT_THAT(parsed, HasValue());
    EXPECT_EQ(parsed->size, rec.size());
    records.push_back(parsed->record);
  });
  ASSERT_THAT(n, HasValue());
  bool comm_exec = false, mmap2_true = false, exit_seen = false;
  uint64_t last_time = 0;
  const uint32_t pid = static_cast<uint32_t>(child->pid());
  for (const trace::Record& r : records) {
    // Trailer: kSampleType's pid/tid/time/cpu/id, from the end of the record.
    EXPECT_EQ(r.sample_id.pid, pid) << trace::DescribeRecord(r);
    EXPECT_EQ(r.sample_id.tid, pid) << trace::DescribeRecord(r);
    EXPECT_EQ(r.sample_id.id, *id) << trace::DescribeRecord(r);
    EXPECT_GT(r.sample_id.time, 0u);
    EXPECT_GE(r.sample_id.time, last_time);
    EXPECT_LT(r.sample_id.cpu, 4096u);
    last_time = r.sample_id.time;
    if (auto* c = std::get_if<trace::Comm>(&r.body)) {
      if (c->exec && c->comm == "true") comm_exec = true;
    }
    if (auto* m = std::get_if<trace::Mmap2>(&r.body)) {
      if (m->filename.find("true") != std::string::npos && (m->prot & PROT_EXEC)) mmap2_true = true;
    }
    if (auto* t = std::get_if<trace::Task>(&r.body)) {
      if (t->exit && t->pid == pid) exit_seen = true;
    }
  }
  EXPECT_TRUE(comm_exec) << records.size() << " records";
  EXPECT_TRUE(mmap2_true);
  EXPECT_TRUE(exit_seen);
}

// Where this host's hypervisor keeps the debug registers (breakpoints count
// nothing), the breakpoints below are armed as uprobes: TriggerUprobes
// checks the uprobe path on every host, these the host's own choice.
void TriggersFireOnTheWorkerThread() {
  WaitingTarget t;
  ASSERT_GT(t.worker, 0) << "trigger_target did not start";
  HardwareConfig cfg;
  cfg.tracking_attr = perf::BuildTrackingAttr(false, false);
  auto src = HardwarePtSource::Create(cfg);
  ASSERT_THAT(src, HasValue());
  // Breakpoints only (no PT, no sideband), on both threads.
  ASSERT_THAT((*src)->AddThread(t.pid, t.pid, false), HasValue());
  ASSERT_THAT((*src)->AddThread(t.pid, t.worker, false), HasValue());
  auto target = ResolveTrigger("ptsnap_test_target", t.pid);
  ASSERT_THAT(target, HasValue());
  auto stop = ResolveTrigger(".", t.pid);
  ASSERT_THAT(stop, HasValue());
  EXPECT_EQ(stop->size(), 2u);  // both stop-indicator names
  std::vector<TriggerPoint> points = *target;
  points.insert(points.end(), stop->begin(), stop->end());
  ASSERT_THAT((*src)->ArmTriggers(points), HasValue());
  const pid_t pid = t.pid;
  t.Go();
  int st = t.Wait();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto hits = (*src)->PollTriggers();
  ASSERT_THAT(hits, HasValue());
  int worker_hits = 0, stop_hits = 0;
  for (const TriggerHit& h : *hits) {
    EXPECT_EQ(h.pid, static_cast<uint32_t>(pid));
    if (h.symbol == "ptsnap_test_target") {
      EXPECT_EQ(h.tid, static_cast<uint32_t>(t.worker));
      EXPECT_EQ(h.ip, (*target)[0].address);
      ++worker_hits;
    }
    if (h.symbol == "ptsnap_take_snapshot") {
      EXPECT_EQ(h.tid, static_cast<uint32_t>(pid));  // the main thread calls it
      ++stop_hits;
    }
  }
  EXPECT_EQ(worker_hits, 3);
  EXPECT_EQ(stop_hits, 1);
}

TEST(Trigger, HardwareBreakpointFiresOnTheWorkerThread) {
  REQUIRE_TARGET();
  TriggersFireOnTheWorkerThread();
}

TEST(Trigger, UprobeTriggersFireOnTheWorkerThreadLikeBreakpoints) {
  REQUIRE_TARGET();
  ForceTriggerUprobesForTesting(true);
  struct Reset {
    ~Reset() { ForceTriggerUprobesForTesting(false); }
  } reset;
  TriggersFireOnTheWorkerThread();
}

// `run --trigger fflush` (#41): the program stopped at its first
// instruction maps no libc yet, so the trigger is libc's file and offset
// (address 0) and the PT source arms it as an entry uprobe; it fires when
// the program, with libc now mapped, calls fflush (trigger_target does
// once, after "ready"). Breakpoints only here, no PT.
TEST(Trigger, ALibraryFunctionOfRunIsAUprobeThatFiresOnceTheLoaderMapsIt) {
  REQUIRE_TARGET();
  if (!std::filesystem::exists("/sys/bus/event_source/devices/uprobe/type"))
    GTEST_SKIP() << "no uprobe PMU on this kernel";
  if (::geteuid() != 0) GTEST_SKIP() << "uprobe perf events need root here";
  auto child = Child::Spawn({TargetPath(), "1", "delay"});
  ASSERT_THAT(child, HasValue());
  ASSERT_THAT(child->Exec(), HasValue());
  HardwareConfig cfg;
  cfg.tracking_attr = perf::BuildTrackingAttr(false, false);
  auto src = HardwarePtSource::Create(cfg);
  ASSERT_THAT(src, HasValue());
  ASSERT_THAT((*src)->AddThread(child->pid(), child->pid(), false), HasValue());
  auto points =
      ResolveTrigger("fflush", child->pid(), kMaxTriggerFunctions, TriggerLibraries::kLinked);
  ASSERT_THAT(points, HasValue());
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ((*points)[0].address, 0u);  // not mapped yet
  EXPECT_TRUE(std::filesystem::path((*points)[0].file).is_absolute());
  ASSERT_THAT((*src)->ArmTriggers(*points), HasValue());
  ASSERT_THAT(child->Resume(), HasValue());
  EXPECT_EQ(child->Wait(), 0);
  auto hits = (*src)->PollTriggers();
  ASSERT_THAT(hits, HasValue());
  ASSERT_FALSE(hits->empty()) << "the uprobe on " << (*points)[0].file << " never fired";
  EXPECT_EQ((*hits)[0].symbol, "fflush");
  EXPECT_EQ((*hits)[0].tid, static_cast<uint32_t>(child->pid()));
  EXPECT_NE((*hits)[0].ip, 0u);
}

// A single-shot trigger (no --multi-snapshot) traps once per thread: the
// worker calls the function three times, one hit comes back.
// --only-in on 6.13+: the entry probe (aux_resume) then the return probe
// (aux_pause) open as members of the intel_pt event's group, on its thread
// or CPU, with the path for config1 (the kernel's group rules:
// perf_get_aux_event, perf_event_open's same-task/same-CPU checks). A fake
// opener records each call (and opens a software dummy in its place: no PT
// here).
TEST(OnlyIn, ProbesOpenAfterTheLeaderAsMembersOfItsGroup) {
  AuxActionProbes probes;
  probes.symbol = "handle_request";
  probes.path = "/usr/bin/server";
  probes.offset = 0x1139;
  probes.resume.type = probes.pause.type = 9;
  perf::SetAuxAction(probes.resume, perf::kAuxResume);
  perf::SetAuxAction(probes.pause, perf::kAuxPause);
  struct Call {
    perf_event_attr attr;
    pid_t pid;
    int cpu, group;
    std::string what;
    std::string path;  // what config1 pointed at during the open
  };
  std::vector<Call> calls;
  GroupMemberOpener fake = [&](const perf_event_attr& attr, pid_t pid, int cpu, int group,
                               const std::string& what) -> Result<perf::PerfEvent> {
    calls.push_back(
        {attr, pid, cpu, group, what,
         reinterpret_cast<const char*>(attr.config1)});  // NOLINT(performance-no-int-to-ptr)
    perf_event_attr dummy{};
    dummy.size = sizeof(dummy);
    dummy.type = PERF_TYPE_SOFTWARE;
    dummy.config = PERF_COUNT_SW_DUMMY;
    dummy.disabled = 1;
    return perf::PerfEvent::Open(dummy, 0, -1, perf::MapSpec{}, what);
  };
  for (auto [pid, cpu] : {std::pair{4242, -1}, std::pair{-1, 3}}) {
    calls.clear();
    auto opened = OpenAuxActionProbes(probes, 17, pid, cpu, "for tid 4242", fake);
    ASSERT_THAT(opened, HasValue());
    EXPECT_EQ(opened->size(), 2u);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(perf::AuxAction(calls[0].attr), perf::kAuxResume);  // the resume first
    EXPECT_EQ(perf::AuxAction(calls[1].attr), perf::kAuxPause);
    for (const Call& c : calls) {
      EXPECT_EQ(c.group, 17);  // the intel_pt event leads the group
      EXPECT_EQ(c.pid, pid);   // on the leader's task...
      EXPECT_EQ(c.cpu, cpu);   // ...and CPU
      EXPECT_EQ(c.path, "/usr/bin/server");
      EXPECT_EQ(c.attr.type, 9u);
    }
    EXPECT_THAT(calls[0].what,
                HasSubstr("entry probe (aux_resume) on handle_request for tid 4242"));
    EXPECT_THAT(calls[1].what, HasSubstr("return probe (aux_pause) on handle_request"));
  }
  // A refused member fails the unit with what was refused.
  GroupMemberOpener refuse = [](const perf_event_attr&, pid_t, int, int,
                                const std::string& what) -> Result<perf::PerfEvent> {
    return Error("opening " + what + ": Invalid argument", EINVAL);
  };
  EXPECT_THAT(OpenAuxActionProbes(probes, 17, 4242, -1, "for tid 4242", refuse),
              ::ptsnap::testing::HasErrorContaining("entry probe (aux_resume) on handle_request"));
}

TEST(Trigger, SingleShotBreakpointFiresOnce) {
  REQUIRE_TARGET();
  WaitingTarget t;
  ASSERT_GT(t.worker, 0) << "trigger_target did not start";
  HardwareConfig cfg;
  cfg.tracking_attr = perf::BuildTrackingAttr(false, false);
  cfg.single_shot_triggers = true;
  auto src = HardwarePtSource::Create(cfg);
  ASSERT_THAT(src, HasValue());
  ASSERT_THAT((*src)->AddThread(t.pid, t.worker, false), HasValue());
  auto target = ResolveTrigger("ptsnap_test_target", t.pid);
  ASSERT_THAT(target, HasValue());
  ASSERT_THAT((*src)->ArmTriggers(*target), HasValue());
  t.Go();
  int st = t.Wait();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto hits = (*src)->PollTriggers();
  ASSERT_THAT(hits, HasValue());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].tid, static_cast<uint32_t>(t.worker));
}

// A thread that hits a trigger and exits before the loop polls: its EXIT,
// drained first, closes its breakpoints, and the hit must survive that (the
// run test below lost it now and then under ASan, taking the exit snapshot).
// Both sources that close units on EXIT.
void ExpectHitKeptAcrossExit(PtSource& src) {
  WaitingTarget t;
  ASSERT_GT(t.worker, 0) << "trigger_target did not start";
  ASSERT_THAT(src.AddThread(t.pid, t.worker, false), HasValue());
  auto target = ResolveTrigger("ptsnap_test_target", t.pid);
  ASSERT_THAT(target, HasValue());
  ASSERT_THAT(src.ArmTriggers(*target), HasValue());
  t.Go();
  int st = t.Wait();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  TempDir dir;
  trace::Manifest m;
  m.command = {"trigger_target"};
  auto writer = trace::TraceWriter::Create(dir.path() / "t", m);
  ASSERT_THAT(writer, HasValue());
  ASSERT_THAT(src.ThreadExited(t.worker, *writer), HasValue());  // before any poll
  EXPECT_FALSE(src.HasThread(t.worker));                         // its events are closed
  auto hits = src.PollTriggers();
  ASSERT_THAT(hits, HasValue());
  ASSERT_EQ(hits->size(), 3u);  // one per call
  for (const TriggerHit& h : *hits) {
    EXPECT_EQ(h.tid, static_cast<uint32_t>(t.worker));
    EXPECT_EQ(h.symbol, "ptsnap_test_target");
  }
  auto again = src.PollTriggers();
  ASSERT_THAT(again, HasValue());
  EXPECT_TRUE(again->empty());  // handed over once
}

// The same on a sideband-only `Source` (its `Config`).
template <class Source, class Config>
void ExpectHitKeptAcrossExitOn() {
  Config cfg;
  cfg.tracking_attr = perf::BuildTrackingAttr(false, false);
  auto src = Source::Create(cfg);
  ASSERT_THAT(src, HasValue());
  ExpectHitKeptAcrossExit(**src);
}

TEST(Trigger, HitOfAThreadThatExitedBeforeThePollIsKept) {
  REQUIRE_TARGET();
  ExpectHitKeptAcrossExitOn<HardwarePtSource, HardwareConfig>();
}

TEST(Trigger, HitOfAThreadThatExitedBeforeThePollIsKeptWhenSampling) {
  REQUIRE_TARGET();
  ExpectHitKeptAcrossExitOn<SamplingSource, SamplingConfig>();
}

// A whole `run` recording, with the sideband-only source where there is no
// PT: checks the orchestration (exec stop, trigger resolved after exec, new
// thread followed through FORK, breakpoint on it, snapshot metadata, trace
// directory).
TEST(Record, RunWithTriggerOnNewThreadSidebandOnly) {
  REQUIRE_TARGET();
  TempDir dir;
  RecordOptions opts;
  opts.command = {TargetPath(), "2", "delay"};
  opts.trigger = "ptsnap_test_target";
  opts.multi_thread = true;
  opts.copy_binaries = true;
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  p.hw.data_pages = 16;
  auto out = RecordUndriven(opts, p, dir.path() / "t.ptsnap", base::RootPath());
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->snapshots, 1u);
  EXPECT_EQ(out->program_status, 0);
  auto reader = trace::TraceReader::Open(dir.path() / "t.ptsnap");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.state, trace::State::kComplete);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kTrigger);
  EXPECT_EQ(m.snapshots[0].detail, "ptsnap_test_target");
  ASSERT_EQ(m.pids.size(), 1u);
  EXPECT_NE(m.snapshots[0].tid, static_cast<uint32_t>(m.pids[0]));  // the worker, not main
  EXPECT_GT(m.snapshots[0].time, 0u);
  EXPECT_EQ(m.command, opts.command);
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  bool exec = false, mapped = false, fork = false, worker_exit = false;
  for (const auto& r : sb->records) {
    if (auto* c = std::get_if<trace::Comm>(&r.body); c && c->exec) exec = true;
    if (auto* mm = std::get_if<trace::Mmap2>(&r.body);
        mm && mm->filename.find("trigger_target") != std::string::npos)
      mapped = true;
    if (auto* t = std::get_if<trace::Task>(&r.body); t && !t->exit) fork = true;
    // The worker's own dummy event (opened when its FORK was seen, and
    // enabled then) reports its exit.
    if (auto* t = std::get_if<trace::Task>(&r.body);
        t && t->exit && t->tid != t->pid && r.sample_id.tid == t->tid)
      worker_exit = true;
  }
  EXPECT_TRUE(worker_exit);
  EXPECT_TRUE(exec);
  EXPECT_TRUE(mapped);
  EXPECT_TRUE(fork);
  // Build-ids and copies of the mapped executables, and the vdso dump.
  bool target_listed = false;
  for (const trace::Binary& b : m.binaries) {
    if (b.path.find("trigger_target") == std::string::npos) continue;
    target_listed = true;
    EXPECT_EQ(b.build_id.size(), 40u) << b.build_id;  // gcc's default sha1 build-id
    ASSERT_FALSE(b.copy.empty());
    EXPECT_EQ(std::filesystem::file_size(dir.path() / "t.ptsnap" / b.copy),
              std::filesystem::file_size(TargetPath()));
  }
  EXPECT_TRUE(target_listed);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "t.ptsnap" / "vdso" /
                                      (std::to_string(m.pids[0]) + ".so")));
}

// The hit and the program's exit fall in one turn of the loop: the loop's
// PollTriggers came before the hit, and child->Poll then saw the exit. The
// source here holds every hit back for as long as the program exists (a
// zombie exists until Record reaps it), which makes that order certain:
// the hit must still be the snapshot's reason, not the exit.
TEST(Record, TriggerHitInTheLoopsLastTurnIsSnapshotted) {
  REQUIRE_TARGET();
  struct HoldingHits final : ForwardingSource {
    using ForwardingSource::ForwardingSource;
    pid_t pid = 0;
    std::vector<TriggerHit> held;
    Result<void> AddThread(pid_t p, pid_t t, bool trace) override {
      if (pid == 0) pid = p;
      return ForwardingSource::AddThread(p, t, trace);
    }
    Result<std::vector<TriggerHit>> PollTriggers() override {
      PTSNAP_ASSIGN_OR_RETURN(auto hits, ForwardingSource::PollTriggers());
      held.insert(held.end(), hits.begin(), hits.end());
      if (pid != 0 && ::kill(pid, 0) == 0) return std::vector<TriggerHit>{};
      return std::exchange(held, {});
    }
  };
  TempDir dir;
  RecordOptions opts;
  opts.command = {TargetPath(), "2", "delay"};
  opts.trigger = "ptsnap_test_target";
  opts.multi_thread = true;
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  p.hw.data_pages = 16;
  auto out = RecordUndriven(
      opts, p, dir.path() / "t.ptsnap", base::RootPath(),
      [](const HardwareConfig& cfg) -> Result<std::unique_ptr<PtSource>> {
        PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(cfg));
        return std::unique_ptr<PtSource>(std::make_unique<HoldingHits>(std::move(hw)));
      });
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->snapshots, 1u);
  EXPECT_EQ(out->program_status, 0);
  auto reader = trace::TraceReader::Open(dir.path() / "t.ptsnap");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kTrigger);
  EXPECT_EQ(m.snapshots[0].detail, "ptsnap_test_target");
  ASSERT_EQ(m.pids.size(), 1u);
  EXPECT_NE(m.snapshots[0].tid, static_cast<uint32_t>(m.pids[0]));  // the worker's hit
}

// hw-path-review.md: without --multi-thread a per-thread tracking event
// sees only its own thread, so a sibling's dlopen was never recorded and
// the traced thread's later calls into the library decoded as unmapped.
// Untraced siblings now get a sideband event of their own.
TEST(Record, SiblingThreadsDlopenIsInTheSideband) {
  const char* prog = std::getenv("PTSNAP_DLOPEN_SIBLING");
  const char* lib = std::getenv("PTSNAP_DLOPEN_PROBE_LIB");
  ASSERT_NE(prog, nullptr) << "PTSNAP_DLOPEN_SIBLING is set by meson";
  ASSERT_NE(lib, nullptr) << "PTSNAP_DLOPEN_PROBE_LIB is set by meson";
  TempDir dir;
  RecordOptions opts;
  opts.command = {prog, lib};
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  p.hw.data_pages = 16;
  p.hw.sideband_for_untraced_threads = true;  // what Prepare sets per-thread
  auto out = RecordUndriven(opts, p, dir.path() / "dl", base::RootPath());
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->program_status, 0);
  auto reader = trace::TraceReader::Open(dir.path() / "dl");
  ASSERT_THAT(reader, HasValue());
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  const uint32_t main_tid = static_cast<uint32_t>(reader->manifest().pids.at(0));
  bool by_sibling = false;
  for (const auto& r : sb->records) {
    const auto* mm = std::get_if<trace::Mmap2>(&r.body);
    if (mm != nullptr && mm->filename.find("ptsnap_dlopen_probe") != std::string::npos &&
        r.sample_id.tid != main_tid)
      by_sibling = true;
  }
  EXPECT_TRUE(by_sibling) << "the worker's dlopen of " << lib << " is not in the sideband";
}

TEST(Record, RunWithoutTriggerSnapshotsAtExit) {
  TempDir dir;
  RecordOptions opts;
  opts.command = {"/bin/sh", "-c", "exit 7"};
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  p.hw.data_pages = 16;
  auto out = RecordUndriven(opts, p, dir.path() / "t", base::RootPath());
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->program_status, 7);
  auto reader = trace::TraceReader::Open(dir.path() / "t");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, trace::SnapshotReason::kExit);
}

TEST(Record, AttachSynthesizesMappingsAndStopsAfterDuration) {
  REQUIRE_TARGET();
  WaitingTarget t;
  ASSERT_GT(t.worker, 0);
  TempDir dir;
  RecordOptions opts;
  opts.pids = {t.pid};
  opts.duration = std::chrono::milliseconds(100);
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  p.hw.data_pages = 16;
  auto out = RecordUndriven(opts, p, dir.path() / "a", base::RootPath());
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "a");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, trace::SnapshotReason::kDuration);
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  bool target_mapped = false, comm = false;
  for (const auto& r : sb->records) {
    if (auto* mm = std::get_if<trace::Mmap2>(&r.body)) {
      EXPECT_EQ(mm->pid, static_cast<uint32_t>(t.pid));
      if (mm->filename.find("trigger_target") != std::string::npos && (mm->prot & PROT_EXEC))
        target_mapped = true;
    }
    if (auto* c = std::get_if<trace::Comm>(&r.body); c && c->comm == "trigger_target") comm = true;
  }
  EXPECT_TRUE(target_mapped);
  EXPECT_TRUE(comm);
}

TEST(Record, AttachToAProcessThatIsGoneFails) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  TempDir dir;
  RecordOptions opts;
  opts.pids = {pid};
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  auto out = RecordUndriven(opts, p, dir.path() / "g", base::RootPath());
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().kind(), ErrorKind::kProcessGone);
  EXPECT_THAT(out.error().ToString(), HasSubstr("exited before ptsnap could attach"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "g"));  // nothing half-written
}

TEST(Record, ExistingTraceDirIsNotOverwritten) {
  TempDir dir;
  dir.Write("t/manifest.json", "{}");
  RecordOptions opts;
  opts.command = {"/bin/true"};
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  auto out = RecordUndriven(opts, p, dir.path() / "t", base::RootPath());
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().kind(), ErrorKind::kTraceDirExists);
  EXPECT_THAT(out.error().ToString(), HasSubstr("already exists"));
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

// Kernel scope on this machine: the kernel image copy is either turned off
// by the environment or unavailable (no /proc/kcore here); either way the
// manifest says why and the recording still completes.
TEST(Record, KernelScopeRecordsWhyTheKernelImageWasNotCopied) {
  if (geteuid() != 0) GTEST_SKIP() << "kernel-scope sideband needs root here";
  for (bool disabled : {true, false}) {
    if (disabled) {
      setenv("PTSNAP_NO_KCORE", "1", 1);
    } else {
      unsetenv("PTSNAP_NO_KCORE");
      unsetenv("MAGIC_TRACE_PERF_NO_KCORE");
    }
    TempDir dir;
    RecordOptions opts;
    opts.command = {"/bin/true"};
    opts.scope = trace::Scope::kUserKernel;
    Prepared p;
    p.scope = trace::Scope::kUserKernel;
    p.hw.tracking_attr = perf::BuildTrackingAttr(true, true);
    p.hw.data_pages = 16;
    auto out = RecordUndriven(opts, p, dir.path() / "k", base::RootPath());
    ASSERT_THAT(out, HasValue());
    auto reader = trace::TraceReader::Open(dir.path() / "k");
    ASSERT_THAT(reader, HasValue());
    const trace::Kcore& k = reader->manifest().kcore;
    if (disabled) {
      EXPECT_EQ(k.status, trace::KcoreStatus::kDisabled);
      EXPECT_THAT(k.reason, HasSubstr("PTSNAP_NO_KCORE"));
    } else if (std::filesystem::exists("/proc/kcore") && k.status == trace::KcoreStatus::kCopied) {
      EXPECT_TRUE(std::filesystem::exists(dir.path() / "k" / "kcore" / "kcore"));
    } else {
      EXPECT_EQ(k.status, trace::KcoreStatus::kUnavailable);
      EXPECT_FALSE(k.reason.empty());
    }
  }
  unsetenv("PTSNAP_NO_KCORE");
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

// A snapshot request (what SIGUSR2 becomes) takes a snapshot, a stop request
// (Ctrl-C) ends the recording; both arrive from another thread while
// Record() blocks, as the CLI's signal handlers send them.
TEST(Record, SnapshotAndStopRequests) {
  REQUIRE_TARGET();
  for (int sig : {SIGUSR2, SIGINT}) {
    WaitingTarget t;
    ASSERT_GT(t.worker, 0);
    TempDir dir;
    RecordOptions opts;
    opts.pids = {t.pid};
    opts.duration = std::chrono::seconds(20);  // a safety net; the signal ends it first
    Prepared p;
    p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
    p.hw.data_pages = 16;
    // Sent once the recording runs: the manifest is the readiness signal,
    // not a sleep (a request before it would be taken just the same).
    std::atomic<bool> done{false};
    Control control;
    const std::filesystem::path manifest = dir.path() / "s" / "manifest.json";
    std::thread sender([sig, &done, &control, manifest] {
      while (!done && !std::filesystem::exists(manifest))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (done) return;
      if (sig == SIGUSR2) {
        control.RequestSnapshot();
      } else {
        control.RequestStop();
      }
    });
    auto out = RecordUndriven(opts, p, dir.path() / "s", base::RootPath(), nullptr, &control);
    done = true;
    sender.join();
    ASSERT_THAT(out, HasValue());
    auto reader = trace::TraceReader::Open(dir.path() / "s");
    ASSERT_THAT(reader, HasValue());
    const auto& m = reader->manifest();
    ASSERT_EQ(m.snapshots.size(), 1u);
    if (sig == SIGUSR2) {
      EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kSignal);
      EXPECT_EQ(m.snapshots[0].detail, "SIGUSR2");
      EXPECT_EQ(m.state, trace::State::kComplete);
      EXPECT_FALSE(out->interrupted);
    } else {
      EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kCtrlC);
      EXPECT_EQ(m.state, trace::State::kInterrupted);
      EXPECT_TRUE(out->interrupted);
    }
  }
}

// ---- System-wide (per-CPU) mode ------------------------------------------

// A PtSource on heap memory: per CPU an AUX area that the "hardware" fills
// with bytes naming the CPU while enabled, read with the real
// AuxSnapshotReader (snapshot mode) or AuxStreamer (full mode).
class FakeCpuSource final : public PtSource {
 public:
  struct Cpu {
    int cpu = -1;
    std::unique_ptr<perf_event_mmap_page> header = std::make_unique<perf_event_mmap_page>();
    std::vector<std::byte> aux = std::vector<std::byte>(16384);
    uint64_t written = 0;
    bool enabled = false;
    bool stopped = false;  // full mode: stopped by a TRUNCATED fill
    std::unique_ptr<perf::AuxSnapshotReader> snap;
    std::unique_ptr<AuxStreamer> full;
  };
  explicit FakeCpuSource(bool full) : full_(full) {}

  static std::byte Tag(int cpu, uint64_t pos) {
    return std::byte(static_cast<uint8_t>(cpu * 16 + static_cast<int>(pos % 16)));
  }

  Result<void> AddThread(pid_t, pid_t tid, bool trace_pt) override {
    threads.push_back(tid);
    pt_threads += trace_pt;
    return Ok();
  }
  Result<void> AddCpu(int cpu) override {
    if (add_cpu_error) return *add_cpu_error;
    auto c = std::make_unique<Cpu>();
    c->cpu = cpu;
    if (full_) {
      trace::Stream info;
      info.cpu = cpu;
      c->full = std::make_unique<AuxStreamer>(c->header.get(), c->aux, info);
    } else {
      c->snap = std::make_unique<perf::AuxSnapshotReader>(c->header.get(), c->aux);
    }
    cpus.push_back(std::move(c));
    return Ok();
  }
  Result<void> ArmTriggers(const std::vector<TriggerPoint>&) override { return Ok(); }
  Result<void> EnableAll() override {
    for (auto& c : cpus) c->enabled = true;
    return Ok();
  }
  Result<SidebandEvents> DrainSideband(trace::TraceWriter& writer) override {
    for (auto& c : cpus) {
      if (!c->enabled || c->stopped) continue;
      // Full mode never writes past aux_tail + size; overwrite mode wraps,
      // here at every drain: a ring that filled only part way into its last
      // 4 KiB looks wrapped to perf's heuristic (AuxSnapshotReader) without
      // being so, and how many drains a timed test gets depends on the
      // machine's speed.
      const uint64_t chunk = full_ ? 3000 : c->aux.size() + 1000;
      uint64_t room = full_ ? c->aux.size() - (c->written - c->header->aux_tail) : chunk;
      const uint64_t n = std::min<uint64_t>(chunk, room);
      for (uint64_t i = 0; i < n; ++i, ++c->written)
        c->aux[c->written % c->aux.size()] = Tag(c->cpu, c->written);
      c->header->aux_head = full_ ? c->written : c->written % c->aux.size();
      if (full_ && n < chunk) {
        // The buffer was full: the kernel reports TRUNCATED and stops PT
        // until it is drained and re-enabled.
        c->full->NoteAux(trace::Aux{c->written - n, n, PERF_AUX_FLAG_TRUNCATED}, writer);
        c->stopped = true;
        ++truncations;
      }
    }
    return SidebandEvents{};
  }
  Result<void> DrainAux(trace::TraceWriter& writer) override {
    // Drains only every 8th time asked, so the 16 KiB rings fill up. After
    // three drains it has seen what the test needs (fills, data on disk
    // while recording) and ends the recording as a shell's kill would: the
    // number of loop turns, not the wall clock, decides.
    if (stop_after_drains_ > 0 && drain_calls_ == 8 * stop_after_drains_ && !finishing_)
      control_->RequestStop();
    if (++drain_calls_ % 8 != 0 && !finishing_) return Ok();
    for (auto& c : cpus) {
      PTSNAP_TRY(c->full->Drain(writer));
      c->stopped = false;
    }
    // What is on disk while the recording still runs.
    for (const trace::Stream& s : writer.manifest().streams) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(writer.dir() / s.file, ec);
      if (!ec) on_disk_while_recording = std::max<uint64_t>(on_disk_while_recording, size);
    }
    return Ok();
  }
  Result<std::vector<TriggerHit>> PollTriggers() override { return std::vector<TriggerHit>{}; }
  Result<void> Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) override {
    for (auto& c : cpus) c->enabled = false;
    for (auto& c : cpus) {
      EXPECT_FALSE(c->enabled);
      perf::AuxSnapshot snap = c->snap->Copy();
      if (snap.bytes.empty()) continue;
      trace::Stream s;
      s.cpu = c->cpu;
      s.snapshot = seq;
      s.wrapped = snap.wrapped;
      PTSNAP_TRY(writer.AddStream(s, snap.bytes));
    }
    if (resume) PTSNAP_TRY(EnableAll());
    return Ok();
  }
  Result<void> Finish(trace::TraceWriter& writer) override {
    if (!full_) return Ok();
    for (auto& c : cpus) c->enabled = false;
    finishing_ = true;
    return DrainAux(writer);
  }
  uint64_t Now() const override { return 1000; }
  size_t traced_threads() const override { return pt_threads; }
  bool HasThread(pid_t tid) const override {
    return std::find(threads.begin(), threads.end(), tid) != threads.end();
  }
  std::optional<trace::TimeConv> time_conv() const override { return std::nullopt; }

  std::vector<std::unique_ptr<Cpu>> cpus;
  std::vector<pid_t> threads;
  size_t pt_threads = 0;
  uint64_t on_disk_while_recording = 0;
  int truncations = 0;

 private:
  bool full_;
  bool finishing_ = false;
  int drain_calls_ = 0;

 public:
  int stop_after_drains_ = 0;  // > 0: a stop request once this many drains happened
  Control* control_ = nullptr;
  std::optional<Error> add_cpu_error;  // what AddCpu fails with, when set
};

SourceFactory FakeFactory(FakeCpuSource* fake) {
  return [fake](const HardwareConfig&) -> Result<std::unique_ptr<PtSource>> {
    return std::unique_ptr<PtSource>(std::make_unique<ForwardingSource>(fake));
  };
}

// The recorder tells a refused mmap of the buffers (the locked-memory
// limit) from a refused perf_event_open (privilege) by the kind the perf
// layer gives the error, not by its text.
TEST(SystemWide, OpenFailuresAreExplainedByTheirKind) {
  struct Case {
    Error error;
    ErrorKind kind;
    const char* says;
  };
  const Case cases[] = {
      {Error::FromErrno("mmap of 4198400 bytes", EPERM)
           .AddContext("mapping the AUX area of intel_pt on CPU 0")
           .WithKind(ErrorKind::kBufferMapping),
       ErrorKind::kBufferMapping, "perf_event_mlock_kb"},
      // ENOMEM from the mmap is the kernel failing to allocate, not the budget.
      {Error::FromErrno("mmap of 8392704 bytes", ENOMEM)
           .AddContext("mapping the AUX area of intel_pt on CPU 0")
           .WithKind(ErrorKind::kBufferMapping),
       ErrorKind::kBufferMapping, "could not allocate"},
      {Error::FromErrno("perf_event_open", EACCES).AddContext("opening intel_pt on CPU 0"),
       ErrorKind::kPrivilege, "perf_event_paranoid"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    RecordOptions opts;
    opts.all_cpus = true;
    Prepared p;
    p.cpus = {0};
    FakeCpuSource fake(false);
    fake.add_cpu_error = c.error;
    auto out = RecordUndriven(opts, p, dir.path() / "t", base::RootPath(), FakeFactory(&fake));
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error().kind(), c.kind) << out.error().ToString();
    EXPECT_THAT(out.error().ToString(), HasSubstr(c.says));
  }
}

TEST(SystemWide, AttachSnapshotsEveryCpuIntoItsOwnStream) {
  TempDir dir;
  RecordOptions opts;
  opts.all_cpus = true;
  opts.duration = std::chrono::milliseconds(60);
  Prepared p;
  p.cpus = {0, 2, 5};
  FakeCpuSource fake_source(false);
  FakeCpuSource* fake = &fake_source;
  auto out = RecordUndriven(opts, p, dir.path() / "sw", base::RootPath(), FakeFactory(fake));
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(fake->cpus.size(), 3u);
  EXPECT_TRUE(fake->threads.empty());  // no -p: no per-thread events
  auto reader = trace::TraceReader::Open(dir.path() / "sw");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.state, trace::State::kComplete);
  EXPECT_TRUE(m.pids.empty());
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kDuration);
  ASSERT_EQ(m.streams.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const trace::Stream& s = m.streams[i];
    EXPECT_EQ(s.cpu, p.cpus[i]);
    EXPECT_EQ(s.tid, -1);
    EXPECT_EQ(s.pid, -1);
    EXPECT_EQ(s.snapshot, 1u);
    auto bytes = reader->ReadStream(s);
    ASSERT_THAT(bytes, HasValue());
    ASSERT_FALSE(bytes->empty());
    // Each CPU's ring went to its own stream, oldest byte first.
    const uint64_t first = s.wrapped ? fake->cpus[i]->written - bytes->size() : 0;
    EXPECT_EQ(static_cast<std::byte>((*bytes)[0]), FakeCpuSource::Tag(s.cpu, first));
    EXPECT_EQ(static_cast<std::byte>(bytes->back()),
              FakeCpuSource::Tag(s.cpu, fake->cpus[i]->written - 1));
  }
  // Mappings of the processes that existed before: ours among them.
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  bool own = false;
  for (const auto& r : sb->records)
    if (auto* mm = std::get_if<trace::Mmap2>(&r.body))
      own |= mm->pid == static_cast<uint32_t>(getpid()) && (mm->prot & PROT_EXEC) != 0;
  EXPECT_TRUE(own);
  EXPECT_TRUE(
      std::filesystem::exists(dir.path() / "sw" / "vdso" / (std::to_string(getpid()) + ".so")));
}

TEST(SystemWide, FullExecutionStreamsToDiskWhileRecordingAndCountsLoss) {
  TempDir dir;
  RecordOptions opts;
  opts.all_cpus = true;
  opts.full_execution = true;
  opts.duration = std::chrono::seconds(60);  // a safety net: the fake ends it
  Prepared p;
  p.cpus = {0, 1};
  p.mode = trace::Mode::kFull;
  p.hw.full_execution = true;
  FakeCpuSource fake_source(true);
  FakeCpuSource* fake = &fake_source;
  fake->stop_after_drains_ = 3;
  Control control;
  fake->control_ = &control;
  std::vector<Event> events;
  auto out = Record(
      opts, p, dir.path() / "full", base::RootPath(), control,
      [&events](const Event& e) { events.push_back(e); }, FakeFactory(fake));
  ASSERT_THAT(out, HasValue());
  EXPECT_GT(fake->on_disk_while_recording, 0u);  // streamed, not held until the end
  auto reader = trace::TraceReader::Open(dir.path() / "full");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  ASSERT_EQ(m.streams.size(), 2u);
  uint32_t truncated = 0;
  for (size_t i = 0; i < 2; ++i) {
    const trace::Stream& s = m.streams[i];
    EXPECT_EQ(s.cpu, static_cast<int>(i));
    EXPECT_EQ(s.tid, -1);
    EXPECT_EQ(s.snapshot, 0u);
    const auto& c = *fake->cpus[i];
    EXPECT_EQ(s.size, c.written);  // every byte produced, in order
    auto bytes = reader->ReadStream(s);
    ASSERT_THAT(bytes, HasValue());
    for (size_t j = 0; j < bytes->size(); j += 101)
      ASSERT_EQ(static_cast<std::byte>((*bytes)[j]), FakeCpuSource::Tag(s.cpu, j)) << j;
    truncated += s.truncated;
  }
  EXPECT_GT(fake->truncations, 0);
  EXPECT_EQ(truncated, static_cast<uint32_t>(fake->truncations));
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, trace::SnapshotReason::kFull);
  auto lost = std::find_if(events.begin(), events.end(),
                           [](const Event& e) { return e.kind == Event::Kind::kDataLost; });
  ASSERT_NE(lost, events.end());
  EXPECT_THAT(lost->message, HasSubstr("PT data was lost: the AUX buffer filled " +
                                       std::to_string(fake->truncations) + " time(s)"));
}

// Real per-CPU dummy events (software events work on this VM): one per
// online CPU with context_switch, and a thread pinned to each CPU sleeping
// in a loop, so every CPU switches tasks while the recording runs.
TEST(SystemWide, PerCpuDummyEventsSeeCpuWideSwitchesOnEveryCpu) {
  if (geteuid() != 0) GTEST_SKIP() << "system-wide events need root (or paranoid <= 0) here";
  auto online = sys::ReadOnlineCpus(base::RootPath());
  ASSERT_THAT(online, HasValue());
  std::atomic<bool> stop{false};
  std::vector<std::thread> sleepers;
  for (int cpu : *online) {
    sleepers.emplace_back([cpu, &stop] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  TempDir dir;
  RecordOptions opts;
  opts.all_cpus = true;
  opts.duration = std::chrono::milliseconds(300);
  Prepared p;
  p.cpus = *online;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  p.hw.data_pages = 64;
  auto out = RecordUndriven(opts, p, dir.path() / "live", base::RootPath());
  stop = true;
  for (auto& t : sleepers) t.join();
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "live");
  ASSERT_THAT(reader, HasValue());
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  std::map<uint32_t, int> outs, ins;
  bool own_mapping = false;
  for (const auto& r : sb->records) {
    if (auto* sw = std::get_if<trace::Switch>(&r.body)) {
      EXPECT_EQ(r.type, static_cast<uint32_t>(PERF_RECORD_SWITCH_CPU_WIDE));
      EXPECT_TRUE(sw->cpu_wide);
      (sw->out ? outs : ins)[r.sample_id.cpu]++;
    }
    if (auto* mm = std::get_if<trace::Mmap2>(&r.body))
      own_mapping |= mm->pid == static_cast<uint32_t>(getpid());
  }
  for (int cpu : *online) {
    EXPECT_GT(outs[static_cast<uint32_t>(cpu)], 0) << "no switch-out on CPU " << cpu;
    EXPECT_GT(ins[static_cast<uint32_t>(cpu)], 0) << "no switch-in on CPU " << cpu;
  }
  EXPECT_TRUE(own_mapping);                         // synthesized from /proc/*/maps
  EXPECT_TRUE(reader->manifest().streams.empty());  // no PT on this machine
  int switches = 0;
  for (auto& [cpu, n] : outs) switches += n;
  for (auto& [cpu, n] : ins) switches += n;
  std::printf("[ %zu sideband records, %d SWITCH_CPU_WIDE on %zu CPUs in 300 ms ]\n",
              sb->records.size(), switches, online->size());
}

TEST(SystemWide, RunTracesTheWholeSystemWhileTheProgramRuns) {
  if (geteuid() != 0) GTEST_SKIP() << "system-wide events need root (or paranoid <= 0) here";
  auto online = sys::ReadOnlineCpus(base::RootPath());
  ASSERT_THAT(online, HasValue());
  TempDir dir;
  RecordOptions opts;
  opts.all_cpus = true;
  opts.command = {"/bin/sh", "-c", "exit 3"};
  Prepared p;
  p.cpus = *online;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  p.hw.data_pages = 64;
  auto out = RecordUndriven(opts, p, dir.path() / "run", base::RootPath());
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->program_status, 3);
  auto reader = trace::TraceReader::Open(dir.path() / "run");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, trace::SnapshotReason::kExit);
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  // The program's exec, seen by a CPU-wide event (enabled before it execs).
  bool exec_seen = false;
  for (const auto& r : sb->records)
    if (auto* c = std::get_if<trace::Comm>(&r.body); c && c->exec && c->comm == "sh")
      exec_seen = std::find(online->begin(), online->end(), static_cast<int>(r.sample_id.cpu)) !=
                  online->end();
  EXPECT_TRUE(exec_seen);
}

// ---- The trigger path (hw-path-review.md: "the trigger is slow") --------

// A source whose breakpoint "fires" while the loop drains the sideband,
// signalled on an eventfd as a breakpoint ring's fd is. The loop must take
// the snapshot (PT disabled) before it drains anything again. (Control's
// own test shows the fd wakes a sleeping loop at once.)
class FakeTriggerSource final : public PtSource {
 public:
  FakeTriggerSource() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  Result<void> AddThread(pid_t, pid_t, bool) override { return Ok(); }
  Result<void> AddCpu(int) override { return Ok(); }
  Result<void> ArmTriggers(const std::vector<TriggerPoint>&) override { return Ok(); }
  Result<void> EnableAll() override { return Ok(); }
  Result<SidebandEvents> DrainSideband(trace::TraceWriter&) override {
    if (++drains == 3) {
      drains_at_hit = drains;
      const uint64_t one = 1;
      (void)!::write(wake_.get(), &one, sizeof one);
    }
    return SidebandEvents{};
  }
  Result<void> DrainAux(trace::TraceWriter&) override { return Ok(); }
  Result<std::vector<TriggerHit>> PollTriggers() override {
    uint64_t n = 0;
    if (::read(wake_.get(), &n, sizeof n) == sizeof n) {
      return std::vector<TriggerHit>{
          {0x1234, static_cast<uint32_t>(getpid()), static_cast<uint32_t>(getpid()), 42, "fired"}};
    }
    return std::vector<TriggerHit>{};
  }
  Result<void> Snapshot(trace::TraceWriter&, uint32_t, bool) override {
    drains_at_snapshot = drains;
    return Ok();
  }
  Result<void> Finish(trace::TraceWriter&) override { return Ok(); }
  uint64_t Now() const override { return 1; }
  size_t traced_threads() const override { return 1; }
  bool HasThread(pid_t) const override { return true; }
  std::optional<trace::TimeConv> time_conv() const override { return std::nullopt; }
  std::vector<int> WakeFds() const override { return {wake_.get()}; }

  int drains = 0, drains_at_hit = -1, drains_at_snapshot = -1;

 private:
  base::UniqueFd wake_;
};

TEST(Trigger, AHitWakesTheLoopAndIsSnapshottedBeforeAnyDrain) {
  TempDir dir;
  RecordOptions opts;
  opts.pids = {getpid()};
  opts.duration = std::chrono::seconds(60);  // a safety net: the hit ends it
  Prepared p;
  FakeTriggerSource fake;
  auto factory = [&fake](const HardwareConfig&) -> Result<std::unique_ptr<PtSource>> {
    // Record destroys what the factory returns: it gets a borrowing shell.
    return std::unique_ptr<PtSource>(std::make_unique<ForwardingSource>(&fake));
  };
  const auto start = std::chrono::steady_clock::now();
  auto out = RecordUndriven(opts, p, dir.path() / "trig", base::RootPath(), factory);
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->snapshots, 1u);
  ASSERT_GE(fake.drains_at_hit, 0);
  EXPECT_EQ(fake.drains_at_snapshot, fake.drains_at_hit)
      << "a sideband drain ran between the breakpoint hit and the PT disable";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  auto reader = trace::TraceReader::Open(dir.path() / "trig");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, trace::SnapshotReason::kTrigger);
  EXPECT_EQ(reader->manifest().snapshots[0].detail, "fired");
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

size_t CountOpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// hw-path-review.md: exited threads' buffers were never closed. A process
// that makes 1,000 short-lived threads (in batches of 50, each alive ~20 ms
// so the recording follows it) while the real sideband source records it
// with --multi-thread: each followed thread's events are closed at its
// exit, so the fds come back down instead of growing by a thousand.
// A two-instruction socket filter (r0 = 0; exit) named `name`, loaded with
// bpf(2): with the JIT on, the kernel announces its image with
// PERF_RECORD_KSYMBOL (perf_event_bpf_event) to every event that asked for
// ksymbol and sees the loading task. -1 and errno when refused.
int LoadTinyBpfProgram(const char* name) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
  insns[1].code = BPF_JMP | BPF_EXIT;
  bpf_attr a{};
  a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  a.insns = reinterpret_cast<uintptr_t>(insns);
  a.insn_cnt = 2;
  static const char kLicense[] = "GPL";
  a.license = reinterpret_cast<uintptr_t>(kLicense);
  std::strncpy(a.prog_name, name, sizeof(a.prog_name) - 1);
  return static_cast<int>(::syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a)));
}

// hw-path-review.md 5b: KSYMBOL and TEXT_POKE reach only CPU-wide events and
// the current task's. A per-thread kernel-scope recording of one process
// opens a CPU-wide dummy on every CPU for them (perf's text_poke dummy), so
// a BPF program another task loads while recording is in the sideband; with
// the bits only on the per-thread tracking event (before) it is not.
TEST(KernelSideband, AnotherTasksBpfLoadReachesTheTraceThroughTheCpuWideEvents) {
  REQUIRE_TARGET();
  auto online = sys::ReadOnlineCpus(base::RootPath());
  ASSERT_THAT(online, HasValue());
  if (const int probe = LoadTinyBpfProgram("ptsnap_probe"); probe < 0) {
    GTEST_SKIP() << "bpf(BPF_PROG_LOAD) refused here (" << std::strerror(errno)
                 << "): no KSYMBOL to provoke";
  } else {
    ::close(probe);
  }
  const auto kv = sys::ReadKernelVersion(base::RootPath());
  ASSERT_THAT(kv, HasValue());
  // Counts the BPF programs named `name` in the trace's sideband; `cpu_wide`:
  // as Prepare sets it up with the privilege for CPU-wide events, else as
  // before (ksymbol on the per-thread tracking event only).
  auto ksymbols_seen = [&](bool cpu_wide, const char* name, size_t* cpus_open) -> int {
    TempDir dir;
    WaitingTarget target;  // the traced process: it loads nothing
    EXPECT_GT(target.pid, 0);
    RecordOptions opts;
    opts.pids = {target.pid};
    opts.duration = std::chrono::seconds(60);  // a safety net: the loader stops it
    Prepared p;
    p.hw.tracking_attr = perf::BuildTrackingAttr(true, false, *kv);
    p.hw.data_pages = 16;
    if (cpu_wide) {
      p.hw.kernel_sideband_attr = perf::BuildKernelSidebandAttr(*kv);
      p.hw.kernel_sideband_cpus = *online;
      p.hw.tracking_attr.ksymbol = 0;
      p.hw.tracking_attr.text_poke = 0;
    }
    Control control;
    std::thread loader([&] {
      // Until the recording runs (its manifest exists), or 30 s if it failed.
      for (int i = 0; i < 30000 && !std::filesystem::exists(dir.path() / "k" / "manifest.json");
           ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const int fd = LoadTinyBpfProgram(name);  // this test's task, not the target
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a few drains
      if (fd >= 0) ::close(fd);
      control.RequestStop();
    });
    auto out = Record(opts, p, dir.path() / "k", base::RootPath(), control, nullptr,
                      [&](const HardwareConfig& cfg) -> Result<std::unique_ptr<PtSource>> {
                        PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(cfg));
                        *cpus_open = hw->kernel_sideband_cpus();
                        return std::unique_ptr<PtSource>(std::move(hw));
                      });
    loader.join();
    EXPECT_THAT(out, HasValue());
    auto reader = trace::TraceReader::Open(dir.path() / "k");
    EXPECT_THAT(reader, HasValue());
    if (!reader) return -1;
    auto sb = reader->ReadSideband();
    EXPECT_THAT(sb, HasValue());
    if (!sb) return -1;
    int seen = 0;
    uint64_t last_time = 0;
    for (const auto& r : sb->records) {
      EXPECT_GE(r.sample_id.time, last_time) << "sideband out of time order";
      last_time = r.sample_id.time;
      const auto* k = std::get_if<trace::Ksymbol>(&r.body);
      // Its load; the unload (flags UNREGISTER) may follow when it is closed.
      if (k != nullptr && k->name.find(name) != std::string::npos &&
          (k->flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER) == 0) {
        ++seen;
        EXPECT_NE(k->addr, 0u);
        EXPECT_GT(k->len, 0u);
      }
    }
    return seen;
  };
  size_t cpus_open = 0;
  EXPECT_EQ(ksymbols_seen(false, "ptsnap_before", &cpus_open), 0)
      << "the per-thread event saw another task's BPF load: the test proves nothing here";
  EXPECT_EQ(cpus_open, 0u);
  EXPECT_EQ(ksymbols_seen(true, "ptsnap_after", &cpus_open), 1)
      << "the BPF program this test loaded is not in the sideband";
  EXPECT_EQ(cpus_open, online->size());
}

TEST(Threads, ExitedThreadsEventsAreClosed) {
  TempDir dir;
  RecordOptions opts;
  opts.pids = {getpid()};
  opts.multi_thread = true;
  opts.duration = std::chrono::seconds(120);  // a safety net: the spawner stops it
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  p.hw.data_pages = 16;
  Control control;
  std::atomic<int> added{0};
  std::atomic<size_t> fds_at_end{0};
  const size_t baseline = CountOpenFds();
  std::thread spawner([&] {
    // Starts once the recording runs (its manifest exists).
    while (!std::filesystem::exists(dir.path() / "thr" / "manifest.json"))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int batch = 0; batch < 20; ++batch) {
      std::vector<std::thread> ts;
      for (int i = 0; i < 50; ++i)
        ts.emplace_back([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
      for (auto& t : ts) t.join();
    }
    // Let the loop drain the last EXIT records, then look and stop.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    fds_at_end = CountOpenFds();
    control.RequestStop();
  });
  // Counts the threads the recording opened events for.
  struct Counting final : ForwardingSource {
    Counting(std::unique_ptr<PtSource> in, std::atomic<int>* added)
        : ForwardingSource(std::move(in)), added(added) {}
    std::atomic<int>* added;
    Result<void> AddThread(pid_t a, pid_t b, bool c) override {
      auto r = ForwardingSource::AddThread(a, b, c);
      if (r) ++*added;
      return r;
    }
  };
  auto out =
      Record(opts, p, dir.path() / "thr", base::RootPath(), control, nullptr,
             [&](const HardwareConfig& cfg) -> Result<std::unique_ptr<PtSource>> {
               PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(cfg));
               return std::unique_ptr<PtSource>(std::make_unique<Counting>(std::move(hw), &added));
             });
  spawner.join();
  ASSERT_THAT(out, HasValue());
  // The recording followed most of the thousand (each AddThread opened events).
  EXPECT_GT(added.load(), 500) << "too few threads followed for the test to mean anything";
  // Without the close, every followed thread kept its event fd open.
  EXPECT_LT(fds_at_end.load(), baseline + 60)
      << "fds at the end: " << fds_at_end << ", before: " << baseline
      << ", threads followed: " << added;
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

// hw-path-review.md: on attach, mmaps made between reading /proc/PID/maps
// and enabling the events were lost. The sideband events are enabled
// before the existing mappings are read (and written as synthesized
// records), PT after.
TEST(Attach, SidebandIsOnBeforeTheMapsAreRead) {
  TempDir dir;
  const auto trace = dir.path() / "att";
  // What sideband.data holds when each enable happens (Record destroys the
  // source, so the answers live here).
  std::optional<uint64_t> at_sideband, at_all;
  struct Order final : ForwardingSource {
    Order(PtSource* to, std::filesystem::path dir, std::optional<uint64_t>* s,
          std::optional<uint64_t>* a)
        : ForwardingSource(to), dir(std::move(dir)), at_sideband(s), at_all(a) {}
    std::filesystem::path dir;
    std::optional<uint64_t>*at_sideband, *at_all;
    uint64_t SidebandBytes() const {
      std::error_code ec;
      auto n = std::filesystem::file_size(dir / "sideband.data", ec);
      return ec ? 0 : n;
    }
    Result<void> EnableSideband() override {
      *at_sideband = SidebandBytes();
      return ForwardingSource::EnableSideband();
    }
    Result<void> EnableAll() override {
      if (!*at_all) *at_all = SidebandBytes();
      return ForwardingSource::EnableAll();
    }
  };
  FakeTriggerSource fake;  // ends the recording with a hit after a few drains
  RecordOptions opts;
  opts.pids = {getpid()};
  opts.duration = std::chrono::seconds(60);
  Prepared p;
  auto out = RecordUndriven(opts, p, trace, base::RootPath(),
                            [&](const HardwareConfig&) -> Result<std::unique_ptr<PtSource>> {
                              return std::unique_ptr<PtSource>(
                                  std::make_unique<Order>(&fake, trace, &at_sideband, &at_all));
                            });
  ASSERT_THAT(out, HasValue());
  ASSERT_TRUE(at_sideband.has_value()) << "the sideband events were never enabled on their own";
  ASSERT_TRUE(at_all.has_value());
  EXPECT_EQ(*at_sideband, 0u) << "the mappings were read before the sideband was on";
  EXPECT_GT(*at_all, 0u) << "the synthesized mappings should be written before PT starts";
}

}  // namespace
}  // namespace ptsnap::record

// ---- A self-driven source (the emulator's shape, pt_source.h) -------------

namespace ptsnap::record {
namespace {

// Starts `sh -c "read x <&FD; exit 3"`: the program ends when the source is
// asked to stop (RequestStop writes a line to FD). It takes a snapshot at
// each request, on the next drain, as the emulator's plugin does.
class FakeSelfDrivenSource final : public PtSource {
 public:
  struct Seen {
    bool began = false;
    int finished = 0;
    int exit_status = -1;
    std::vector<std::string> asked;
  };
  FakeSelfDrivenSource(Seen* seen, std::optional<std::string> fail_at_exit)
      : seen_(seen), fail_at_exit_(std::move(fail_at_exit)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      read_.reset(fds[0]);
      write_.reset(fds[1]);
    }
  }
  [[nodiscard]] bool self_driven() const override { return true; }
  [[nodiscard]] bool host_vdso() const override { return false; }
  Result<Launch> LaunchCommand(const std::vector<std::string>& /*command*/) override {
    return Launch{{"/bin/sh", "-c", "read x <&" + std::to_string(read_.get()) + "; exit 3"},
                  {read_.get()}};
  }
  Result<void> Begin(trace::TraceWriter& /*writer*/) override {
    seen_->began = true;
    read_.reset();
    return Ok();
  }
  Result<void> RequestSnapshot(const std::string& detail) override {
    seen_->asked.push_back(detail);
    return Ok();
  }
  void RequestStop() override { (void)!::write(write_.get(), "\n", 1); }
  Result<SidebandEvents> DrainSideband(trace::TraceWriter& writer) override {
    for (; taken_ < seen_->asked.size(); ++taken_) {
      trace::Snapshot s;
      s.seq = static_cast<uint32_t>(taken_ + 1);
      s.reason = trace::SnapshotReason::kSignal;
      s.detail = seen_->asked[taken_];
      PTSNAP_TRY(writer.AddSnapshot(s));
      new_.push_back(s);
    }
    return SidebandEvents{};
  }
  std::vector<trace::Snapshot> TakenSnapshots() override { return std::exchange(new_, {}); }
  Result<void> TargetExited(int status) override {
    seen_->exit_status = status;
    if (fail_at_exit_) return Error(*fail_at_exit_);
    return Ok();
  }
  Result<void> Finish(trace::TraceWriter& /*writer*/) override {
    ++seen_->finished;
    return Ok();
  }
  // What the loop must not call for a self-driven source fails loudly.
  Result<void> AddThread(pid_t, pid_t, bool) override { return Ok(); }
  Result<void> AddCpu(int) override { return Error("AddCpu called"); }
  Result<void> ArmTriggers(const std::vector<TriggerPoint>&) override {
    return Error("ArmTriggers called");
  }
  Result<void> EnableAll() override { return Ok(); }
  Result<void> DrainAux(trace::TraceWriter&) override { return Ok(); }
  Result<std::vector<TriggerHit>> PollTriggers() override { return std::vector<TriggerHit>{}; }
  Result<void> Snapshot(trace::TraceWriter&, uint32_t, bool) override {
    return Error("Snapshot called: a self-driven source takes its own");
  }
  [[nodiscard]] uint64_t Now() const override { return 0; }
  [[nodiscard]] size_t traced_threads() const override { return 1; }
  [[nodiscard]] bool HasThread(pid_t) const override { return true; }
  [[nodiscard]] std::optional<trace::TimeConv> time_conv() const override {
    return trace::TimeConv{0, 1, 0, true};
  }

 private:
  Seen* seen_;
  std::optional<std::string> fail_at_exit_;
  base::UniqueFd read_, write_;
  size_t taken_ = 0;
  std::vector<trace::Snapshot> new_;
};

struct SelfDrivenRun {
  Result<Outcome> out = Error("not run");
  Result<uint32_t> first = Error("not asked");
  FakeSelfDrivenSource::Seen seen;
};

// One recording of the fake: once the trace directory exists a driver asks
// for a snapshot, waits for its number, then asks for the end.
void RunSelfDriven(const std::filesystem::path& dir, std::optional<std::string> fail_at_exit,
                   SelfDrivenRun& run) {
  RecordOptions opts;
  opts.command = {"the-program"};   // the source's LaunchCommand replaces it
  opts.trigger = "no_such_symbol";  // the source's business: never resolved by the loop
  Prepared p;
  p.emulator = "a fake self-driven source";
  Control control;
  std::thread driver([&] {
    while (!std::filesystem::exists(dir / "manifest.json"))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    run.first = control.Snapshot("first look");
    control.RequestStop();
  });
  run.out = Record(opts, p, dir, base::RootPath(), control, nullptr,
                   [&](const HardwareConfig&) -> Result<std::unique_ptr<PtSource>> {
                     return std::unique_ptr<PtSource>(
                         std::make_unique<FakeSelfDrivenSource>(&run.seen, fail_at_exit));
                   });
  driver.join();
}

TEST(SelfDriven, TheLoopForwardsRequestsAnnouncesItsSnapshotsAndWaitsForTheProgram) {
  TempDir tmp;
  SelfDrivenRun run;
  RunSelfDriven(tmp.path() / "t", std::nullopt, run);
  ASSERT_THAT(run.out, HasValue());
  ASSERT_THAT(run.first, HasValue());
  EXPECT_EQ(*run.first, 1u);
  EXPECT_TRUE(run.seen.began);
  EXPECT_EQ(run.seen.asked, std::vector<std::string>{"first look"});
  EXPECT_EQ(run.seen.exit_status, 3) << "the stop request reached the program through its fd";
  EXPECT_EQ(run.seen.finished, 1);
  EXPECT_EQ(run.out->program_status, 3);
  EXPECT_EQ(run.out->snapshots, 1u);
  EXPECT_TRUE(run.out->interrupted);
  auto reader = trace::TraceReader::Open(tmp.path() / "t");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.source, trace::Source::kEmulated);
  EXPECT_EQ(m.emulator, "a fake self-driven source");
  EXPECT_EQ(m.state, trace::State::kInterrupted);
  ASSERT_EQ(m.snapshots.size(), 1u) << "the loop adds no exit or ctrl-c snapshot of its own";
  EXPECT_EQ(m.snapshots[0].detail, "first look");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "t" / "vdso")) << "no host vDSO for it";
}

TEST(SelfDriven, AFailureAtTheProgramsEndIsTheErrorAndStaysInTheManifest) {
  TempDir tmp;
  SelfDrivenRun run;
  const std::string why = "the plugin stopped: disk full; what it wrote is kept";
  RunSelfDriven(tmp.path() / "t", why, run);
  ASSERT_FALSE(run.out);
  EXPECT_EQ(run.out.error().message(), why) << "the source's message, with no context added";
  EXPECT_EQ(run.seen.finished, 1) << "Finish still tidies up";
  auto reader = trace::TraceReader::Open(tmp.path() / "t");
  ASSERT_THAT(reader, HasValue());
  EXPECT_EQ(reader->manifest().state, trace::State::kInterrupted);
  EXPECT_EQ(reader->manifest().stop_error, why);
  EXPECT_EQ(reader->manifest().snapshots.size(), 1u) << "what was taken stays listed";
}

}  // namespace
}  // namespace ptsnap::record
