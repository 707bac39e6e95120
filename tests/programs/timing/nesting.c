// Nesting for the timing tests: main calls outer() 4 times; each outer() calls middle() twice,
// each middle() calls inner() 3 times, each inner() loops 5 times. The loop bounds are constants
// (inner's comes as an argument, else GCC unrolls its loop completely), so every call of a
// function retires the same instructions.
#include <stdio.h>

__attribute__((noinline)) int inner(int x, int iterations) {
  int sum = 0;
  for (int i = 0; i < iterations; ++i) sum += x ^ i;
  return sum;
}

__attribute__((noinline)) int middle(int x) {
  int sum = 0;
  for (int i = 0; i < 3; ++i) sum += inner(x + i, 5);
  return sum;
}

__attribute__((noinline)) int outer(int x) {
  int sum = 0;
  for (int i = 0; i < 2; ++i) sum += middle(x * 2 + i);
  return sum;
}

int main(void) {
  int sum = 0;
  for (int i = 0; i < 4; ++i) sum += outer(i);
  printf("nesting = %d\n", sum);
  return 0;
}
