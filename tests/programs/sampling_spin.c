// A CPU-bound program for the sampling recorder's tests
// (tests/recorder/sampling_test.cpp): spins in spin_outer -> spin_middle ->
// spin_inner for MS milliseconds on THREADS threads (default 1: the main
// thread only), then calls sampling_trigger_point() once and exits 0.
// Built with frame pointers, so fp call stacks have depth > 1.
//   sampling_spin MS [THREADS]
// MS ending in "cpu" (e.g. 300cpu) counts each thread's CPU time instead of
// wall time: a test that expects a number of cpu-clock samples gets them
// however loaded the machine is.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static clockid_t g_clock = CLOCK_MONOTONIC;

static double NowMs(void) {
  struct timespec ts;
  clock_gettime(g_clock, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((noinline)) void spin_inner(unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) sink += i * i;
}

__attribute__((noinline)) void spin_middle(unsigned long n) {
  spin_inner(n);
  sink ^= n;
}

__attribute__((noinline)) void spin_outer(double ms) {
  const double end = NowMs() + ms;
  while (NowMs() < end) spin_middle(20000);
}

// The --trigger target: called once, after the spinning.
__attribute__((noinline)) void sampling_trigger_point(void) { sink += 1; }

static double g_ms;

static void* Worker(void* arg) {
  (void)arg;
  spin_outer(g_ms);
  return NULL;
}

int main(int argc, char** argv) {
  char* unit = NULL;
  g_ms = argc > 1 ? strtod(argv[1], &unit) : 300;
  if (unit != NULL && strcmp(unit, "cpu") == 0) g_clock = CLOCK_THREAD_CPUTIME_ID;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1) threads = 1;
  if (threads > 16) threads = 16;
  pthread_t tids[16];
  for (int i = 1; i < threads; ++i) pthread_create(&tids[i], NULL, Worker, NULL);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  spin_outer(g_ms);
  for (int i = 1; i < threads; ++i) pthread_join(tids[i], NULL);
  sampling_trigger_point();
  return 0;
}
