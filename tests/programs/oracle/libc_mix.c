// glibc's own -O2 code for the call-stack oracle: snprintf (vfprintf's computed-goto jump tables
// over the format, __printf_fp for %f), qsort with a comparator (calls back into the program from
// libc through a pointer), bsearch and strtol. snprintf writes into a string, so no stdio buffer
// is malloc'ed (see print_result.h).
#include <stdio.h>
#include <stdlib.h>

#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

NOINLINE int compare(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

int main(void) {
  long values[24];
  for (int i = 0; i < 24; ++i) values[i] = (i * 7919L) % 101 + sink;
  qsort(values, 24, sizeof values[0], compare);
  long key = values[11];
  long* found = bsearch(&key, values, 24, sizeof values[0], compare);
  char text[128];
  long total = 0;
  for (int i = 0; i < 4; ++i) {
    int n = snprintf(text, sizeof text, "%d:%5ld|%-4s|%x|%.2f", i, values[i * 5], "ab", i * 255,
                     i * 1.25);
    total += n + strtol(text + 2, NULL, 10);
  }
  print_result("libc_mix =", total + (found - values));
  return 0;
}
