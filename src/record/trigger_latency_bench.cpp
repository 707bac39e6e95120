// How long from a trigger's breakpoint hit to the PT disable, through the
// real session loop (record::Record) and a real hardware breakpoint on a
// real process; docs/recording.md, "Trigger latency". No Intel PT here: the
// sideband-only source stands in for it, and the time is taken where
// HardwarePtSource::Snapshot disables PT first.
//
// A forked child writes CLOCK_MONOTONIC into shared memory, then calls
// ptsnap_latency_target() (the trigger); the loop's Snapshot notes the time
// it starts and lets the child go on. Hits come at random gaps (0.2-2 ms) so
// they land at every phase of the loop. Two runs: the loop waking on the
// breakpoints' fds (now), and the same loop without them, sleeping its 5 ms
// between looks (as before the fix). Prints p50/p99/max per run.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "record/forwarding_source.h"
#include "record/hardware_source.h"
#include "record/recorder.h"
#include "trace/trace_dir.h"

extern "C" __attribute__((noinline, used)) int ptsnap_latency_target(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x + 1;
}

namespace ptsnap::record {
namespace {

constexpr int kHits = 200;

struct Shared {
  std::atomic<int> go{0};
  std::atomic<uint64_t> t_hit{0};
  std::atomic<int> hits{0};  // calls of the trigger so far
  std::atomic<int> ack{0};   // hits snapshotted so far
};

uint64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] void Child(Shared* s) {
  while (s->go.load() == 0) ::usleep(100);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> gap_us(200, 2000);
  int unanswered = 0;
  for (int i = 0; i < kHits; ++i) {
    ::usleep(static_cast<useconds_t>(gap_us(rng)));
    s->t_hit.store(NowNs());
    s->hits.store(i + 1);
    ptsnap_latency_target(i);
    // Wait for the snapshot of this hit (at most 1 s), so hits never queue.
    const uint64_t deadline = NowNs() + 1000000000ull;
    while (s->ack.load() <= i && NowNs() < deadline) ::sched_yield();
    // Three hits in a row unanswered: the breakpoint does not fire here
    // (some VMs give guests no debug registers); stop instead of waiting
    // 200 s.
    if (s->ack.load() <= i && ++unanswered >= 3) ::_exit(3);
    if (s->ack.load() > i) unanswered = 0;
  }
  ::_exit(0);
}

// Forwards to the real source; times Snapshot's start; with `wake` false it
// hides the breakpoints' fds, so the loop only looks every 5 ms.
class Timed final : public ForwardingSource {
 public:
  Timed(std::unique_ptr<PtSource> inner, Shared* s, bool wake, std::vector<uint64_t>* out,
        std::vector<bool>* busy)
      : ForwardingSource(std::move(inner)), s_(s), wake_(wake), out_(out), busy_(busy) {}
  Result<void> EnableAll() override {
    auto r = ForwardingSource::EnableAll();
    s_->go.store(1);
    return r;
  }
  // The loop asks for them right before it sleeps in poll(): the time it
  // last went to sleep tells a hit that found it asleep from one that found
  // it busy (the previous snapshot's manifest write, a drain).
  std::vector<int> WakeFds() const override {
    asleep_since_ = NowNs();
    return wake_ ? ForwardingSource::WakeFds() : std::vector<int>{};
  }
  Result<void> Snapshot(trace::TraceWriter& w, uint32_t seq, bool resume) override {
    // Only a snapshot of a hit not yet answered (not the one at the end).
    const int hits = s_->hits.load();
    if (hits > s_->ack.load()) {
      const uint64_t hit = s_->t_hit.load();
      out_->push_back(NowNs() - hit);  // where PT would be disabled
      busy_->push_back(hit < asleep_since_);
    }
    auto r = ForwardingSource::Snapshot(w, seq, resume);
    s_->ack.store(hits);
    return r;
  }

 private:
  Shared* s_;
  bool wake_;
  std::vector<uint64_t>* out_;
  std::vector<bool>* busy_;  // per hit: the loop was not asleep when it came
  mutable uint64_t asleep_since_ = 0;
};

int RunOnce(bool wake, const char* label) {
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return std::perror("mmap"), 1;
  auto* s = new (mem) Shared();
  const pid_t child = ::fork();
  if (child == 0) Child(s);
  std::vector<uint64_t> lat;
  std::vector<bool> busy;
  RecordOptions opts;
  opts.pids = {child};
  opts.trigger = "ptsnap_latency_target";
  opts.multi_snapshot = true;
  opts.duration = std::chrono::seconds(60);
  Prepared p;
  p.hw.tracking_attr = perf::BuildTrackingAttr(false, false);
  p.hw.data_pages = 16;
  char tmpl[] = "/tmp/ptsnap-latency-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return std::perror("mkdtemp"), 1;
  const std::filesystem::path dir = std::filesystem::path(tmpl) / "t";
  Control control;
  auto out = Record(opts, p, dir, base::RootPath(), control, nullptr,
                    [&](const HardwareConfig& cfg) -> Result<std::unique_ptr<PtSource>> {
                      PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(cfg));
                      return std::unique_ptr<PtSource>(
                          std::make_unique<Timed>(std::move(hw), s, wake, &lat, &busy));
                    });
  int st = 0;
  ::waitpid(child, &st, 0);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  ::munmap(mem, sizeof(Shared));
  if (!out) {
    std::fprintf(stderr, "trigger_latency: %s\n", out.error().ToString().c_str());
    return 1;
  }
  if (lat.empty() || (WIFEXITED(st) && WEXITSTATUS(st) == 3)) {
    std::fprintf(stderr,
                 "trigger_latency: three trigger hits in a row were not snapshotted: the hardware "
                 "breakpoint does not fire on this machine (a VM that gives its guests no debug "
                 "registers?)\n");
    return 1;
  }
  auto print = [&](std::vector<uint64_t> v, const char* what) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
      return static_cast<double>(v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]) /
             1e3;
    };
    std::printf(
        "trigger hit -> PT disable, %-28s %-12s %3zu hits: p50 %7.1f us  p99 %7.1f us  max %7.1f "
        "us\n",
        label, what, v.size(), at(0.5), at(0.99), static_cast<double>(v.back()) / 1e3);
  };
  print(lat, "all");
  // Where the tail comes from: hits that found the loop asleep in poll()
  // (the wake-up) and hits that came while it was busy (its last snapshot's
  // manifest write, a drain).
  std::vector<uint64_t> asleep, busy_lat;
  for (size_t i = 0; i < lat.size(); ++i) (busy[i] ? busy_lat : asleep).push_back(lat[i]);
  print(asleep, "loop asleep");
  print(busy_lat, "loop busy");
  return 0;
}

}  // namespace
}  // namespace ptsnap::record

int main() {
  using ptsnap::record::RunOnce;
  int rc = RunOnce(true, "waking on breakpoint fds:");
  rc |= RunOnce(false, "5 ms sleep (before):");
  return rc;
}
