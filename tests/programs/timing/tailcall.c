// Tail calls for the timing tests, built with -O2 so that GCC emits sibling calls: even() and
// odd() end in `jmp odd` / `jmp even`, and both end in `jmp leaf` when n reaches 0 (checked with
// objdump -d: even and odd contain no call instruction, only these jmps). start() calls even()
// with a real call, as it adds to the result. noclone keeps IPA from renaming the functions
// (even.constprop.0 and the like), so the symbols the tests look up are the code that runs.
#include <stdio.h>

#if defined(__clang__)  // no IPA cloning to prevent; clang has no noclone
#define TIMED __attribute__((noinline))
#else
#define TIMED __attribute__((noinline, noclone))
#endif

TIMED long leaf(long acc) { return acc * 3 + 1; }

TIMED long odd(long n, long acc);

TIMED long even(long n, long acc) {
  if (n == 0) return leaf(acc);
  return odd(n - 1, acc + 2);
}

TIMED long odd(long n, long acc) {
  if (n == 0) return leaf(acc + 1);
  return even(n - 1, acc + 1);
}

TIMED long start(long n) { return even(n, n) + 1; }

int main(void) {
  long sum = 0;
  for (long n = 3; n < 6; ++n) sum += start(n);
  printf("tailcall = %ld\n", sum);
  return 0;
}
