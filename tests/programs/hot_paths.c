// Known call paths with deterministic CPU work, for the sampled decode's
// real-data test (src/pipeline/decode_samples_live_test.cpp): about three
// quarters of the time in main -> outer -> hot_leaf, a quarter in
// main -> side -> cold_leaf. Built twice (tests/programs/meson.build): with
// frame pointers (callgraph fp) and without, at -O2 (callgraph dwarf).
//
// The functions stay out of line (noinline) and are no tail calls: each
// caller works on the callee's result. The loop counts come from volatile
// globals, so the compiler cannot specialise the functions (no .constprop
// clones whose names the test would not know).
#include <stdint.h>
#include <stdlib.h>

volatile uint64_t hot_iterations = 3000000;
volatile uint64_t cold_iterations = 1000000;
volatile uint64_t result;
volatile uint64_t last_leaf;

// Called by the leaves so that they are no leaves: with frame pointers a
// true leaf gets no frame (GCC 12 ignores -mno-omit-leaf-frame-pointer),
// and the kernel's frame-pointer walk would then skip its caller.
__attribute__((noinline)) void note(uint64_t x) { last_leaf = x; }

__attribute__((noinline)) uint64_t hot_leaf(uint64_t n) {
  uint64_t x = n;
  for (uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  note(x);
  return x;
}

__attribute__((noinline)) uint64_t cold_leaf(uint64_t n) {
  uint64_t x = n | 1;
  for (uint64_t i = 0; i < n; ++i) x = (x ^ (x << 13)) * 0x9e3779b97f4a7c15ull;
  note(x);
  return x;
}

__attribute__((noinline)) uint64_t outer(uint64_t n) {
  uint64_t r = hot_leaf(n);
  return r ^ (r >> 7);
}

__attribute__((noinline)) uint64_t side(uint64_t n) {
  uint64_t r = cold_leaf(n);
  return r + (r >> 3);
}

int main(int argc, char** argv) {
  uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 60;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < rounds; ++i) {
    acc += outer(hot_iterations);
    acc += side(cold_iterations);
  }
  result = acc;
  return 0;
}
