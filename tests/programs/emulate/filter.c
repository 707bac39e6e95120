// Two pieces of work for --filter: main calls work_a, work_b, then work_a
// again; each loops, calling its own leaf. `--filter work_a` must show
// work_a's two calls (and the calls it makes to leaf_a, whose code lies
// outside the range) and nothing of work_b or main.
//   emu_filter [UNITS]   (default 2000 iterations per call)
#include <stdio.h>
#include <stdlib.h>

// Kept as separate, unspecialised functions (GCC's noipa; clang, which
// builds this only for the fuzz tree, has no such attribute).
#ifdef __clang__
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif

KEEP long leaf_a(long x) { return x * 3 + 1; }
KEEP long leaf_b(long x) { return x * 5 + 2; }

KEEP long work_a(long units) {
  long s = 0;
  for (long i = 0; i < units; ++i) {
    s += i ^ (s >> 3);
    if ((i & 63) == 0) s += leaf_a(i);
  }
  return s;
}

KEEP long work_b(long units) {
  long s = 0;
  for (long i = 0; i < units; ++i) {
    s += i ^ (s << 1);
    if ((i & 63) == 0) s += leaf_b(i);
  }
  return s;
}

int main(int argc, char** argv) {
  long units = argc > 1 ? atol(argv[1]) : 2000;
  long r = work_a(units);
  r += work_b(units);
  r += work_a(units + 64);
  printf("%ld\n", r & 0xff);
  return 0;
}
