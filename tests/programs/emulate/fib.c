// Recursion and calls: fib(N) with N from argv (default 20), plus a 150-deep
// recursion that overflows the decoder's 64-entry return stack.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) long deep(int n) {
  if (n == 0) return 0;
  return 1 + deep(n - 1) * 1;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 20;
  long r = fib(n) + deep(150);
  printf("%ld\n", r);
  return 0;
}
