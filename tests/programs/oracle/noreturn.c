// Noreturn paths for the call-stack oracle: check() calls the noreturn fail() only on a bad
// value, so GCC moves that call into check.cold; the run ends in exit(), called by finish()
// (noreturn, cold; step.cold calls it) four frames below main (main, loop, step, finish), so those
// frames never return: the single-stepper reports them open, ptsnap closes them at the end of the
// trace.
#include <stdlib.h>

#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

__attribute__((noreturn, cold, noinline)) void fail(long x) {
  print_result("noreturn: bad value", x);
  abort();
}

__attribute__((noreturn, cold, noinline)) void finish(long x) {
  print_result("noreturn =", x);
  exit(0);
}

NOINLINE long check(long x) {
  if (__builtin_expect(x < 0, 0)) fail(x);
  return x + sink;
}

NOINLINE long step(long x, long i) {
  if (i == 50) finish(x);  // noreturn: the rest of the program never runs
  return check(x * 3 + i) % 1000003;
}

NOINLINE long loop(long x) {
  for (long i = 0;; ++i) x = step(x, i);
}

int main(void) {
  long x = loop(1);
  print_result("unreachable", x);
  return 1;
}
