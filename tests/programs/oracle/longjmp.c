// longjmp for the call-stack oracle: catcher() calls setjmp, then descend(), which recurses to
// a depth and calls raise_error() (noreturn, cold, called from descend.cold) on every third
// value: raise_error's longjmp jumps into the middle of catcher(), ending every frame above it
// at once. The other values return normally.
#include <setjmp.h>

#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static jmp_buf env;
static volatile long sink;

__attribute__((noreturn, cold, noinline)) void raise_error(long code) { longjmp(env, (int)code); }

NOINLINE long descend(long x, int depth) {
  if (depth == 0) {
    if (__builtin_expect(x % 3 == 0, 0)) raise_error(x + 1);
    return x + sink;
  }
  return descend(x + depth, depth - 1) * 2 + sink;
}

NOINLINE long catcher(long x) {
  volatile long result;
  int code = setjmp(env);
  if (code == 0) {
    result = descend(x, (int)(x % 4));
  } else {
    result = -code;
  }
  return result;
}

int main(void) {
  long acc = 0;
  for (long i = 0; i < 30; ++i) acc += catcher(i);
  print_result("longjmp =", acc);
  return 0;
}
