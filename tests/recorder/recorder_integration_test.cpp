// Real perf_event_open on this machine: sideband of a spawned child, hardware
// breakpoints on a worker thread, and whole recordings (sideband only where
// there is no intel_pt PMU). Needs permission to use perf events on own
// children (perf_event_paranoid <= 2, or root).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include "perf/attr.h"
#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "record/child.h"
#include "record/elf_symbols.h"
#include "record/hardware_source.h"
#include "record/recorder.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;

std::string TargetPath() {
  const char* p = std::getenv("PTSNAP_TRIGGER_TARGET");
  return p != nullptr ? p : "";
}

#define REQUIRE_TARGET()                                   \
  if (TargetPath().empty())                                \
  GTEST_SKIP() << "PTSNAP_TRIGGER_TARGET is not set: run " \
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

TEST(Trigger, HardwareBreakpointFiresOnTheWorkerThread) {
  REQUIRE_TARGET();
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
  FailureKind kind;
  auto out = Record(opts, p, dir.path() / "t.ptsnap", base::RootPath(), &kind);
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->snapshots, 1u);
  EXPECT_EQ(out->program_status, 0);
  auto reader = trace::TraceReader::Open(dir.path() / "t.ptsnap");
  ASSERT_THAT(reader, HasValue());
  const trace::Manifest& m = reader->manifest();
  EXPECT_EQ(m.state, trace::State::kComplete);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, "trigger");
  EXPECT_EQ(m.snapshots[0].detail, "ptsnap_test_target");
  ASSERT_EQ(m.pids.size(), 1u);
  EXPECT_NE(m.snapshots[0].tid, static_cast<uint32_t>(m.pids[0]));  // the worker, not main
  EXPECT_GT(m.snapshots[0].time, 0u);
  EXPECT_EQ(m.command, opts.command);
  auto sb = reader->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  bool exec = false, mapped = false, fork = false;
  for (const auto& r : sb->records) {
    if (auto* c = std::get_if<trace::Comm>(&r.body); c && c->exec) exec = true;
    if (auto* mm = std::get_if<trace::Mmap2>(&r.body);
        mm && mm->filename.find("trigger_target") != std::string::npos)
      mapped = true;
    if (auto* t = std::get_if<trace::Task>(&r.body); t && !t->exit) fork = true;
  }
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

TEST(Record, RunWithoutTriggerSnapshotsAtExit) {
  TempDir dir;
  RecordOptions opts;
  opts.command = {"/bin/sh", "-c", "exit 7"};
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, true);
  p.hw.data_pages = 16;
  FailureKind kind;
  auto out = Record(opts, p, dir.path() / "t", base::RootPath(), &kind);
  ASSERT_THAT(out, HasValue());
  EXPECT_EQ(out->program_status, 7);
  auto reader = trace::TraceReader::Open(dir.path() / "t");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, "exit");
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
  FailureKind kind;
  auto out = Record(opts, p, dir.path() / "a", base::RootPath(), &kind);
  ASSERT_THAT(out, HasValue());
  auto reader = trace::TraceReader::Open(dir.path() / "a");
  ASSERT_THAT(reader, HasValue());
  ASSERT_EQ(reader->manifest().snapshots.size(), 1u);
  EXPECT_EQ(reader->manifest().snapshots[0].reason, "duration");
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
  FailureKind kind;
  auto out = Record(opts, p, dir.path() / "g", base::RootPath(), &kind);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(kind, FailureKind::kProcessGone);
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
  FailureKind kind;
  auto out = Record(opts, p, dir.path() / "t", base::RootPath(), &kind);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(kind, FailureKind::kTraceDirExists);
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
    opts.scope = TraceScope::kUserKernel;
    Prepared p;
    p.scope = trace::Scope::kUserKernel;
    p.hw.tracking_attr = perf::BuildTrackingAttr(true, true);
    p.hw.data_pages = 16;
    FailureKind kind;
    auto out = Record(opts, p, dir.path() / "k", base::RootPath(), &kind);
    ASSERT_THAT(out, HasValue());
    auto reader = trace::TraceReader::Open(dir.path() / "k");
    ASSERT_THAT(reader, HasValue());
    const trace::Kcore& k = reader->manifest().kcore;
    if (disabled) {
      EXPECT_EQ(k.status, "disabled");
      EXPECT_THAT(k.reason, HasSubstr("PTSNAP_NO_KCORE"));
    } else if (std::filesystem::exists("/proc/kcore") && k.status == "copied") {
      EXPECT_TRUE(std::filesystem::exists(dir.path() / "k" / "kcore" / "kcore"));
    } else {
      EXPECT_EQ(k.status, "unavailable");
      EXPECT_FALSE(k.reason.empty());
    }
  }
  unsetenv("PTSNAP_NO_KCORE");
}

}  // namespace
}  // namespace ptsnap::record

namespace ptsnap::record {
namespace {

// SIGUSR2 asks for a snapshot, SIGINT (Ctrl-C) ends the recording; both
// arrive while Record() blocks, as they would from a shell.
TEST(Record, Sigusr2SnapshotsAndSigintEnds) {
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
    std::thread sender([sig] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      kill(getpid(), sig);
    });
    FailureKind kind;
    auto out = Record(opts, p, dir.path() / "s", base::RootPath(), &kind);
    sender.join();
    ASSERT_THAT(out, HasValue());
    auto reader = trace::TraceReader::Open(dir.path() / "s");
    ASSERT_THAT(reader, HasValue());
    const auto& m = reader->manifest();
    ASSERT_EQ(m.snapshots.size(), 1u);
    if (sig == SIGUSR2) {
      EXPECT_EQ(m.snapshots[0].reason, "signal");
      EXPECT_EQ(m.snapshots[0].detail, "SIGUSR2");
      EXPECT_EQ(m.state, trace::State::kComplete);
      EXPECT_FALSE(out->interrupted);
    } else {
      EXPECT_EQ(m.snapshots[0].reason, "ctrl-c");
      EXPECT_EQ(m.state, trace::State::kInterrupted);
      EXPECT_TRUE(out->interrupted);
    }
  }
}

}  // namespace
}  // namespace ptsnap::record
