// Recursion through a function with a cold part for the call-stack oracle: walk()'s unlikely
// branch (walk.cold) calls walk() itself, so frames of walk are on the stack at once with their
// call sites in walk.cold, and each returns into walk.cold and jumps back to walk's hot code.
#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

__attribute__((cold, noinline)) void note_rare(long x) { sink += x; }

NOINLINE long leaf(long x) { return x * 5 + sink; }

NOINLINE long walk(long n, long x) {
  long acc = leaf(x);
  if (__builtin_expect(n > 0 && (x & 1) != 0, 0)) {
    note_rare(n);
    acc += walk(n - 1, x * 3 + 1);
    acc ^= leaf(acc);
  }
  return acc + n;
}

int main(void) {
  long acc = 0;
  for (long i = 0; i < 40; ++i) acc += walk(6, i);
  print_result("cold_recursion =", acc);
  return 0;
}
