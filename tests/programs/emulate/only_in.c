// A function called many times among other work, for --only-in: each of
// CALLS iterations runs other_work(OTHER) and then hot(HOT), which calls
// hot_leaf every 16th unit. `--only-in hot` must trace hot's calls and
// hot_leaf's (called from inside it) and nothing of main or other_work, so
// a ring of a given size holds many more calls of hot than without it.
//   emu_only_in [CALLS [OTHER [HOT]]]   (default 1000 5000 100)
#include <stdio.h>
#include <stdlib.h>

// Kept as separate, unspecialised functions (GCC's noipa; clang, which
// builds this only for the fuzz tree, has no such attribute).
#ifdef __clang__
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif

KEEP long hot_leaf(long x) { return x * 7 + 3; }

KEEP long hot(long units) {
  unsigned long s = 0;  // wraps by design
  for (long i = 0; i < units; ++i) {
    s += (unsigned long)i ^ (s >> 2);
    if ((i & 15) == 0) s += (unsigned long)hot_leaf(i);
  }
  return (long)s;
}

KEEP long other_work(long units) {
  unsigned long s = 0;  // wraps by design
  for (long i = 0; i < units; ++i) s += (unsigned long)i ^ (s << 1);
  return (long)s;
}

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 1000;
  const long other = argc > 2 ? atol(argv[2]) : 5000;
  const long units = argc > 3 ? atol(argv[3]) : 100;
  unsigned long r = 0;  // wraps by design
  for (long i = 0; i < calls; ++i) {
    r += (unsigned long)other_work(other);
    r += (unsigned long)hot(units);
  }
  printf("%lu\n", r & 0xff);
  return 0;
}
