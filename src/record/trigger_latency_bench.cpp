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
  std::atomic<int> ack{0};
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
  for (int i = 0; i < kHits; ++i) {
    ::usleep(static_cast<useconds_t>(gap_us(rng)));
    s->t_hit.store(NowNs());
    ptsnap_latency_target(i);
    // Wait for the snapshot of this hit (at most 1 s), so hits never queue.
    const uint64_t deadline = NowNs() + 1000000000ull;
    while (s->ack.load() <= i && NowNs() < deadline) ::sched_yield();
  }
  ::_exit(0);
}

// Forwards to the real source; times Snapshot's start; with `wake` false it
// hides the breakpoints' fds, so the loop only looks every 5 ms.
class Timed final : public ForwardingSource {
 public:
  Timed(std::unique_ptr<PtSource> inner, Shared* s, bool wake, std::vector<uint64_t>* out)
      : ForwardingSource(std::move(inner)), s_(s), wake_(wake), out_(out) {}
  Result<void> EnableAll() override {
    auto r = ForwardingSource::EnableAll();
    s_->go.store(1);
    return r;
  }
  std::vector<int> WakeFds() const override {
    return wake_ ? ForwardingSource::WakeFds() : std::vector<int>{};
  }
  Result<void> Snapshot(trace::TraceWriter& w, uint32_t seq, bool resume) override {
    out_->push_back(NowNs() - s_->t_hit.load());  // where PT would be disabled
    auto r = ForwardingSource::Snapshot(w, seq, resume);
    s_->ack.store(static_cast<int>(seq));
    return r;
  }

 private:
  Shared* s_;
  bool wake_;
  std::vector<uint64_t>* out_;
};

int RunOnce(bool wake, const char* label) {
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return std::perror("mmap"), 1;
  auto* s = new (mem) Shared();
  const pid_t child = ::fork();
  if (child == 0) Child(s);
  std::vector<uint64_t> lat;
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
  auto out = Record(
      opts, p, dir, base::RootPath(), control, nullptr,
      [&](const HardwareConfig& cfg) -> Result<std::unique_ptr<PtSource>> {
        PTSNAP_ASSIGN_OR_RETURN(auto hw, HardwarePtSource::Create(cfg));
        return std::unique_ptr<PtSource>(std::make_unique<Timed>(std::move(hw), s, wake, &lat));
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
  if (lat.empty()) {
    std::fprintf(stderr, "trigger_latency: no trigger hit was snapshotted\n");
    return 1;
  }
  std::sort(lat.begin(), lat.end());
  auto at = [&](double q) {
    return lat[static_cast<size_t>(q * static_cast<double>(lat.size() - 1))];
  };
  std::printf(
      "trigger hit -> PT disable, %-28s %3zu hits: p50 %7.1f us  p99 %7.1f us  max %7.1f us\n",
      label, lat.size(), static_cast<double>(at(0.5)) / 1e3, static_cast<double>(at(0.99)) / 1e3,
      static_cast<double>(lat.back()) / 1e3);
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
