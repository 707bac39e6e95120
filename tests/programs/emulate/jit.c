// JIT code in its simplest form: machine code written into an mmap'd
// buffer, called, overwritten in place with other code and called again.
// `jit rwx` (default) keeps the buffer read-write-execute and rewrites it
// while it is executable (self-modifying code); `jit wx` maps it
// read-write, flips it to read-execute to run it and back to rewrite it
// (W^X, as V8 and the JVM do). Version 1 loops 1000 times and returns 1;
// version 2 has another layout (an extra branch before its return), loops
// 10 times and returns 20. Version 1 runs 3 times, then version 2 twice:
// prints 43.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static const unsigned char kVersion1[] = {
    0xb9, 0xe8, 0x03, 0x00, 0x00,  // mov ecx, 1000
    0xff, 0xc9,                    // l: dec ecx
    0x75, 0xfc,                    // jnz l
    0xb8, 0x01, 0x00, 0x00, 0x00,  // mov eax, 1
    0xc3,                          // ret
};

static const unsigned char kVersion2[] = {
    0x31, 0xc0,                    // xor eax, eax
    0xb9, 0x0a, 0x00, 0x00, 0x00,  // mov ecx, 10
    0x83, 0xc0, 0x02,              // l: add eax, 2
    0xff, 0xc9,                    // dec ecx
    0x75, 0xf9,                    // jnz l
    0x83, 0xf8, 0x14,              // cmp eax, 20
    0x74, 0x01,                    // je done
    0x90,                          // nop
    0xc3,                          // done: ret
};

typedef int (*JitFn)(void);

__attribute__((noinline)) static int CallIt(void* code) {
  JitFn fn;
  memcpy(&fn, &code, sizeof fn);  // ISO C has no object-to-function pointer cast
  return fn();
}

int main(int argc, char** argv) {
  const int wx = argc > 1 && strcmp(argv[1], "wx") == 0;
  const int rx = PROT_READ | PROT_EXEC, rw = PROT_READ | PROT_WRITE;
  unsigned char* buf =
      mmap(NULL, 4096, wx ? rw : rw | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return 2;
  memcpy(buf, kVersion1, sizeof kVersion1);
  if (wx && mprotect(buf, 4096, rx) != 0) return 3;
  int sum = 0;
  for (int i = 0; i < 3; ++i) sum += CallIt(buf);
  if (wx && mprotect(buf, 4096, rw) != 0) return 3;
  memcpy(buf, kVersion2, sizeof kVersion2);
  if (wx && mprotect(buf, 4096, rx) != 0) return 3;
  for (int i = 0; i < 2; ++i) sum += CallIt(buf);
  printf("%d\n", sum);
  return sum == 43 ? 0 : 1;
}
