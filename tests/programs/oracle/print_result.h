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
