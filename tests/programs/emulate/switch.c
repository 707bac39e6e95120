// A switch compiled to a jump table (indirect jmp through a table).
#include <stdio.h>

__attribute__((noinline)) int step(int op, int acc) {
  switch (op) {
    case 0: return acc + 3;
    case 1: return acc * 5;
    case 2: return acc - 7;
    case 3: return acc ^ 0x55;
    case 4: return acc << 1;
    case 5: return acc >> 1;
    case 6: return acc | 9;
    case 7: return acc & 0xffff;
    default: return acc;
  }
}

int main(void) {
  int acc = 1;
  for (int i = 0; i < 10000; ++i) acc = step(i % 9, acc);
  printf("%d\n", acc);
  return 0;
}
