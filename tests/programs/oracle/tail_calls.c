// Sibling calls for the call-stack oracle (-O2 turns on -foptimize-sibling-calls): direct tail
// calls (`jmp` to an entry), a chain of them (first -> second -> third), indirect ones through a
// table of function pointers (`jmp *`), and a tail call out of a cold part (relay.cold jumps to
// third's entry). Each chain is one frame to the single-stepper: it makes no frame for a jump.
#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

__attribute__((cold, noinline)) void note_rare(long x) { sink += x; }

NOINLINE long third(long x) { return x * 7 + sink; }
NOINLINE long second(long x) { return third(x + 1); }
NOINLINE long first(long x) { return second(x ^ 3); }

NOINLINE long square(long x) { return x * x + sink; }
NOINLINE long negate(long x) { return -x + sink; }

typedef long (*Op)(long);
static Op const kOps[] = {first, square, negate, third};

NOINLINE long through_table(long x) { return kOps[x & 3](x); }

NOINLINE long relay(long x) {
  if (__builtin_expect(x % 6 == 0, 0)) {
    note_rare(x);
    return third(x);  // a tail call from the cold part
  }
  return second(x);
}

int main(void) {
  long acc = 0;
  for (long i = 0; i < 60; ++i) acc += through_table(i) + relay(i) + first(i);
  print_result("tail_calls =", acc);
  return 0;
}
