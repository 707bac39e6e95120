// A request loop with chosen slow requests, for --slower-than:
//   emu_slow_call CALLS SLOW FAST_UNITS SLOW_UNITS [THREADS [WAIT_MS]]
// calls handle_request CALLS times (per thread); the calls whose index is in
// the comma-separated list SLOW do SLOW_UNITS units of work, the others
// FAST_UNITS. With THREADS > 1 the loop also runs in THREADS - 1 more
// threads, where only the last thread's calls listed in SLOW are slow and
// the main thread's are all fast. WAIT_MS: sleep that long first (for a
// tracer to attach). Also built natively (tests/programs/meson.build) for
// the recorder's --slower-than tests.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_calls, g_threads;
static long g_fast, g_slow;
static char g_slow_list[256];

__attribute__((noinline)) long work(long units) {
  unsigned long s = 0;  // wraps by design (no signed overflow)
  for (long i = 0; i < units; ++i) s += (unsigned long)i ^ (s >> 3);
  return (long)s;
}

__attribute__((noinline)) long handle_request(long units) {
  return (long)((unsigned long)work(units) + 1);
}

static int IsSlow(int i) {
  char list[256];
  strcpy(list, g_slow_list);
  for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ","))
    if (atoi(tok) == i) return 1;
  return 0;
}

static long Loop(int slow_allowed) {
  unsigned long r = 0;  // wraps by design
  for (int i = 0; i < g_calls; ++i)
    r += (unsigned long)handle_request(slow_allowed && IsSlow(i) ? g_slow : g_fast);
  return (long)r;
}

static void* Thread(void* arg) {
  long last = (long)arg;
  // Time for a tracer that follows new threads as it reads their creation
  // (the native --slower-than probes) to add this one before its loop.
  struct timespec ts = {0, 100 * 1000000L};
  nanosleep(&ts, NULL);
  long r = Loop(last != 0);
  return (void*)r;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s CALLS SLOW FAST_UNITS SLOW_UNITS [THREADS]\n", argv[0]);
    return 2;
  }
  g_calls = atoi(argv[1]);
  snprintf(g_slow_list, sizeof(g_slow_list), "%s", argv[2]);
  g_fast = atol(argv[3]);
  g_slow = atol(argv[4]);
  g_threads = argc > 5 ? atoi(argv[5]) : 1;
  const int wait_ms = argc > 6 ? atoi(argv[6]) : 0;
  if (wait_ms > 0) {
    struct timespec ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  long r = 0;
  if (g_threads <= 1) {
    r = Loop(1);
  } else {
    pthread_t t[64];
    int n = g_threads - 1 < 64 ? g_threads - 1 : 64;
    for (int i = 0; i < n; ++i) pthread_create(&t[i], NULL, Thread, (void*)(long)(i == n - 1));
    r = Loop(0);
    for (int i = 0; i < n; ++i) {
      void* v = NULL;
      pthread_join(t[i], &v);
      r = (long)((unsigned long)r + (unsigned long)v);
    }
  }
  printf("%ld\n", r);
  return 0;
}
