// The oracle programs' one line of output, written with write(2): stdio's
// first printf mallocs its buffer, and malloc's first sbrk finds another heap
// address under QEMU than natively, so its instruction counts would differ
// from stepcount's for reasons that have nothing to do with call stacks.
#pragma once

#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void print_result(const char* label, long value) {
  char buf[64];
  size_t n = strlen(label);
  memcpy(buf, label, n);
  buf[n++] = ' ';
  unsigned long v = value < 0 ? 0UL - (unsigned long)value : (unsigned long)value;
  if (value < 0) buf[n++] = '-';
  char digits[24];
  size_t d = 0;
  do {
    digits[d++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (d > 0) buf[n++] = digits[--d];
  buf[n++] = '\n';
  if (write(1, buf, n) < 0) _exit(2);
}

// The stack pointer at one offset in a page for everything main calls after
// it, in every run. The kernel starts a process's stack at a random 16-byte
// step (ASLR) and QEMU at a fixed one; glibc's memset and memcpy loop over
// aligned blocks, so the unwinder's memsets of its frame state took one or
// two instructions more or fewer in some runs than in the other, and the
// stacks disagreed from there on (exception.cpp, in one CI run).
#define ORACLE_SAME_STACK_OFFSET()                                  \
  do {                                                              \
    volatile char* pad_ = (volatile char*)__builtin_alloca(         \
        16 + ((unsigned long)__builtin_frame_address(0) & 4095UL)); \
    pad_[0] = 0;                                                    \
  } while (0)
