// Calls ptsnap_take_snapshot() (the stop indicator) after some work, once or
// argv[1] times.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

// The stop indicator ptsnap looks for (declared here until
// include/ptsnap/stop_indicator.h exists).
__attribute__((noinline)) void ptsnap_take_snapshot(void) { __asm__ volatile(""); }

__attribute__((noinline)) void marker(void) { __asm__ volatile(""); }

int main(int argc, char** argv) {
  int times = argc > 1 ? atoi(argv[1]) : 1;
  long r = fib(15);
  for (int i = 0; i < times; ++i) {
    ptsnap_take_snapshot();
    r += fib(10);
  }
  marker();
  printf("%ld\n", r);
  return 0;
}
