// Test program for the recorder's trigger and sideband tests.
//
//   trigger_target [N [delay]]
//
// Starts a worker thread, prints "ready <pid> <worker tid>" on stdout, then
// waits for one byte on stdin (with "delay": sleeps 300 ms instead, for
// tests that let ptsnap start the program and follow the new thread). After that the worker calls
// ptsnap_test_target() N times (default 3), the main thread joins it, calls
// ptsnap_take_snapshot() once and exits 0. The pause lets a test install
// per-thread breakpoints on both threads before the calls happen.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ptsnap/stop_indicator.h"

extern "C" __attribute__((noinline, used)) int ptsnap_test_target(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x + 1;
}

namespace {

int g_calls = 3;
int g_go[2];
std::atomic<long> g_worker_tid{0};

void* Worker(void*) {
  g_worker_tid.store(syscall(SYS_gettid));
  char c;
  if (read(g_go[0], &c, 1) != 1) return nullptr;
  int sum = 0;
  for (int i = 0; i < g_calls; ++i) sum += ptsnap_test_target(i);
  return reinterpret_cast<void*>(static_cast<long>(sum));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_calls = std::atoi(argv[1]);
  const bool delay = argc > 2 && std::string_view(argv[2]) == "delay";
  if (pipe(g_go) != 0) return 2;
  pthread_t t;
  if (pthread_create(&t, nullptr, Worker, nullptr) != 0) return 2;
  long worker_tid = 0;
  while ((worker_tid = g_worker_tid.load()) == 0) usleep(100);
  std::printf("ready %d %ld\n", getpid(), worker_tid);
  std::fflush(stdout);
  char c;
  if (delay) {
    usleep(300 * 1000);
  } else if (read(0, &c, 1) != 1) {
    return 3;
  }
  if (write(g_go[1], "g", 1) != 1) return 2;
  void* ret = nullptr;
  pthread_join(t, &ret);
  ptsnap_take_snapshot(static_cast<uint64_t>(reinterpret_cast<long>(ret)));
  return 0;
}
