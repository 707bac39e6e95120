// Recursion for the timing tests: work() computes fib(12), 465 calls of fib, 233 of them leaves
// (n < 2) that all retire the same instructions.
#include <stdio.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) long work(void) { return fib(12); }

int main(void) {
  long result = work();
  printf("fib(12) = %ld\n", result);
  return 0;
}
