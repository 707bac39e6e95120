// A true leaf under -O2 -fno-omit-frame-pointer, for the frame-pointer
// mend of sampled stacks (decode/fp_mend.h; the sampled decode's live test,
// src/pipeline/decode_samples_live_test.cpp): GCC gives hot_leaf no frame
// (it calls nothing), so a sample in it finds %rbp still holding driver's
// frame and the kernel's walk skips driver: without the mend, hot_leaf
// shows under main. driver is hot_leaf's only caller and does a little
// work of its own; main calls driver only.
//
// noinline and no tail calls (-fno-optimize-sibling-calls, and driver works
// on the result); the iteration counts are volatile globals, so nothing is
// specialised into clones with other names.
#include <stdint.h>
#include <stdlib.h>

volatile uint64_t leaf_iterations = 2000000;
volatile uint64_t result;

__attribute__((noinline)) uint64_t hot_leaf(uint64_t n) {
  uint64_t x = n;
  for (uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

__attribute__((noinline)) uint64_t driver(uint64_t n) {
  uint64_t r = hot_leaf(n);
  return r ^ (r >> 7);
}

int main(int argc, char** argv) {
  uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 100;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < rounds; ++i) acc += driver(leaf_iterations);
  result = acc;
  return 0;
}
