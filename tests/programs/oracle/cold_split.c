// Hot/cold partitioning for the call-stack oracle (tests/oracle/oracle_test.cpp): at -O2 GCC moves
// the unlikely branches of scale() and mix() into scale.cold and mix.cold, placed far from the
// hot code. The program takes them now and then: each cold part calls functions (returns into
// the cold part) and jumps back into its function's hot code. Neither scale() nor mix() pushes
// anything before its jump, so both parts begin with a function entry's unwind rule (CFA %rsp + 8:
// the case the stripped copy cannot tell from a function, docs/decoding.md).
#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

__attribute__((cold, noinline)) void note_rare(long x) { sink += x; }

NOINLINE long twice(long x) { return sink + 2 * x; }

NOINLINE long scale(long x) {
  if (__builtin_expect(x % 5 == 0, 0)) {
    note_rare(x);
    x = twice(x) + 1;
  }
  return x * 3;
}

NOINLINE long mix(long x) {
  long acc = 0;
  for (long i = 0; i < 4; ++i) {
    acc += scale(x + i);
    if (__builtin_expect(acc % 7 == 3, 0)) {
      note_rare(acc);
      acc = twice(acc) ^ i;
    }
  }
  return acc;
}

int main(void) {
  long total = 0;
  for (long n = 0; n < 40; ++n) total += mix(n);
  print_result("cold_split =", total);
  return 0;
}
