// The virtual clock (docs/emulation.md, "Time"): each thread's clock
// published for the others, and futex causality (a wait that returns
// continues after whoever woke the word).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

uint64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Makes `t`'s time visible to every thread (clock_ = max(clock_, clock)).
void Plugin::Publish(const ThreadState* t) {
  uint64_t g = clock_.load(std::memory_order_relaxed);
  while (g < t->clock && !clock_.compare_exchange_weak(g, t->clock, std::memory_order_relaxed)) {
  }
}

void Plugin::FutexWoken(uint64_t addr, uint64_t clock) {
  if (addr == 0) return;
  std::lock_guard lock(futex_mu_);
  uint64_t& c = futex_clock_[addr];
  c = std::max(c, clock);
}

// The word the kernel clears and wakes when thread `tid` exits (0: none).
uint64_t Plugin::ClearChildTid(pid_t tid) {
  std::lock_guard lock(futex_mu_);
  auto it = clear_tid_.find(tid);
  return it != clear_tid_.end() ? it->second : 0;
}

// A wait on `addr` returned: the waiter continues after whoever woke it.
void Plugin::FutexCatch(ThreadState* t, uint64_t addr) {
  if (addr == 0) return;
  std::lock_guard lock(futex_mu_);
  auto it = futex_clock_.find(addr);
  if (it != futex_clock_.end()) t->clock = std::max(t->clock, it->second);
}

}  // namespace ptsnap::emulate
