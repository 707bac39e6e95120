// Noreturn paths for the call-stack oracle. check() calls the noreturn fail() only on a bad
// value, so GCC moves that call into check.cold; step() calls the noreturn finish() from
// step.cold. Run plainly, the program ends in exit(), called by finish() four frames below main
// (main, loop, step, finish). Run as `oracle_noreturn abort`, a bad value at step 40 ends it in
// fail(), abort-like: _exit(), no exit handlers, five frames below main (main, loop, step, check,
// fail). (abort() itself is not used: under the emulator a program killed by a signal leaves an
// empty trace.) Either way the frames below never return: the single-stepper reports them open,
// ptsnap closes them at the end of the trace.
#include <stdlib.h>
#include <unistd.h>

#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;
static long bad_at = -1;  // the step whose value goes bad

__attribute__((noreturn, cold, noinline)) void fail(long x) {
  print_result("noreturn: bad value", x);
  _exit(0);
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
  return check(i == bad_at ? -x : x * 3 + i) % 1000003;
}

NOINLINE long loop(long x) {
  for (long i = 0;; ++i) x = step(x, i);
}

int main(int argc, char** argv) {
  (void)argv;
  if (argc > 1) bad_at = 40;
  long x = loop(1);
  print_result("unreachable", x);
  return 1;
}
