/* What a ptsnap_mark() costs when nobody traces the program (the emulated
 * encoding: PTSNAP_PTWRITE unset), in ns per call:
 *   build/tests/api/mark_bench [CALLS]    (default 10000000 per case)
 * Cases: an empty noinline call (the floor), one value repeated (its 64
 * branches predicted), random values (about half of them mispredicted),
 * a value that changes slowly (a request counter), ptsnap_mark_str. Each
 * case runs 5 times; the fastest run is printed. Built, not run as a test. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ptsnap/mark.h"

#define RANDOM_VALUES 65536 /* a power of two */

static uint64_t values[RANDOM_VALUES];

__attribute__((noinline)) static void empty_call(uint64_t v) {
  __asm__ __volatile__("" : : "r"(v));
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum which { kEmpty, kRepeated, kRandom, kCounter, kString };

static double run_once(enum which w, long calls) {
  const double t0 = now_ns();
  long i;
  for (i = 0; i < calls; ++i) {
    switch (w) {
      case kEmpty: empty_call((uint64_t)i); break;
      case kRepeated: ptsnap_mark(0x123456789abcdef0u); break;
      case kRandom: ptsnap_mark(values[i & (RANDOM_VALUES - 1)]); break;
      case kCounter: ptsnap_mark((uint64_t)i); break;
      case kString: ptsnap_mark_str("request"); break;
    }
  }
  return (now_ns() - t0) / (double)calls;
}

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 10000000;
  static const char* const names[] = {"empty noinline call", "ptsnap_mark, one value repeated",
                                      "ptsnap_mark, random values", "ptsnap_mark, a counter",
                                      "ptsnap_mark_str(\"request\")"};
  uint64_t x = 88172645463325252u;
  int w, r;
  for (r = 0; r < RANDOM_VALUES; ++r) { /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values[r] = x;
  }
  if (getenv("PTSNAP_PTWRITE") != NULL)
    fprintf(stderr,
            "mark_bench: PTSNAP_PTWRITE is set; these figures are for the emulated "
            "encoding, unset it\n");
  printf("%-36s %10s   (%ld calls, best of 5)\n", "case", "ns/call", calls);
  for (w = kEmpty; w <= kString; ++w) {
    double best = 1e30;
    for (r = 0; r < 5; ++r) {
      const double ns = run_once((enum which)w, calls);
      if (ns < best) best = ns;
    }
    printf("%-36s %10.2f\n", names[w], best);
  }
  return 0;
}
