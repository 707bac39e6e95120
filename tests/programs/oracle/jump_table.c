// Switch statements compiled to jump tables (`jmp *TABLE(,%rax,8)`) for the call-stack oracle:
// dispatch()'s cases call functions, and some of them end in a tail call (`jmp` to an entry) out of
// the middle of the switch. An indirect jump inside a function changes no frame.
#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

NOINLINE long op_add(long a, long b) { return a + b + sink; }
NOINLINE long op_sub(long a, long b) { return a - b + sink; }
NOINLINE long op_mul(long a, long b) { return a * b + sink; }
NOINLINE long op_xor(long a, long b) { return (a ^ b) + sink; }

NOINLINE long dispatch(int code, long a, long b) {
  switch (code) {
    case 0: return op_add(a, b) + 1;
    case 1: return op_sub(a, b);  // a tail call
    case 2: return op_mul(a, b) * 2;
    case 3: return op_xor(a, b);  // a tail call
    case 4: return op_add(b, a) - op_sub(b, a);
    case 5: return op_mul(a, a);  // a tail call
    case 6: return a + b;
    case 7: return op_xor(b, a) + op_add(a, 1);
    default: return 0;
  }
}

NOINLINE long run(long n) {
  long acc = 0;
  for (long i = 0; i < n; ++i) acc += dispatch((int)(i * 5 % 9), i, acc & 0xff);
  return acc;
}

int main(void) {
  print_result("jump_table =", run(300));
  return 0;
}
