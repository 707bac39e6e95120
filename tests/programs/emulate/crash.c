// Dies of a signal after some work: `crash segv` writes through a null
// pointer in crash_here(), `crash abort` calls abort() from abort_here(),
// `crash spin` spins forever in spin_here() (for --duration and Ctrl-C).
// A second argument N does fib(N) first (default 18), for a native run long
// enough to be sampled.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

volatile int* volatile null_target = 0;

__attribute__((noinline)) void crash_here(long seed) {
  // A store through a null pointer: SIGSEGV at this instruction.
  *null_target = (int)seed;
}

__attribute__((noinline)) void abort_here(void) { abort(); }

__attribute__((noinline)) void spin_here(void) {
  volatile unsigned long n = 0;
  for (;;) n = n + fib(5);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "segv";
  long r = fib(argc > 2 ? atol(argv[2]) : 18);
  printf("%ld\n", r);
  fflush(stdout);
  if (strcmp(mode, "segv") == 0) crash_here(r);
  if (strcmp(mode, "abort") == 0) abort_here();
  if (strcmp(mode, "spin") == 0) spin_here();
  return 0;
}
