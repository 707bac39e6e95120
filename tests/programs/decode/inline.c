// Inlining test program (docs/decoding.md, "Inline frames"), built -O2 -g:
// loop_caller calls leaf_call, a real function, then runs inl_step, forced
// inline, N times (argv[1], default 10). Tests expect N calls of
// "inl_step (inlined)" nested in loop_caller, N of leaf_call, and the
// inlined call on line 27: keep it there.
#include <stdlib.h>

static volatile int sink;

static inline __attribute__((always_inline)) int inl_step(int x) {
  int r = x;
  r = r * 31 + sink;
  r = r * 37 + sink;
  r = r * 41 + sink;
  return r;
}

__attribute__((noinline)) int leaf_call(int x) {
  sink = x;
  return x + 1;
}

__attribute__((noinline)) int loop_caller(int n) {
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    acc = leaf_call(acc);
    acc += inl_step(i);
  }
  return acc;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  return loop_caller(n) == 12345 ? 1 : 0;
}
