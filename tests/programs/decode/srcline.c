// DWARF test program: source_lines tests expect srcline_target's entry
// address on line 5 and main's on line 9 of this file. Keep them there.
#include <stdlib.h>

__attribute__((noinline)) int srcline_target(int x) { return x * 3 + 1; }

// A second function, a few lines further down.

int main(int argc, char** argv) {
  (void)argv;
  return srcline_target(argc) == 4 ? 0 : 1;
}
