// The in-app form of --slower-than (include/ptsnap/stop_indicator.h):
//   emu_slow_marks CALLS SLOW FAST_UNITS SLOW_UNITS THRESHOLD_NS
// marks the start of each of CALLS pieces of work and asks for a snapshot
// when one took THRESHOLD_NS or more (host CLOCK_MONOTONIC); the piece with
// index SLOW does SLOW_UNITS units of work, the others FAST_UNITS.
#include <stdio.h>
#include <stdlib.h>

#include "ptsnap/stop_indicator.h"

__attribute__((noinline)) long work(long units) {
  long s = 0;
  for (long i = 0; i < units; ++i) s += i ^ (s >> 3);
  return s;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s CALLS SLOW FAST_UNITS SLOW_UNITS THRESHOLD_NS\n", argv[0]);
    return 2;
  }
  const int calls = atoi(argv[1]), slow = atoi(argv[2]);
  const long fast_units = atol(argv[3]), slow_units = atol(argv[4]);
  const uint64_t threshold = strtoull(argv[5], NULL, 10);
  long r = 0;
  int taken = 0;
  for (int i = 0; i < calls; ++i) {
    ptsnap_mark_start();
    r += work(i == slow ? slow_units : fast_units);
    taken += ptsnap_take_snapshot_if_slower(threshold);
  }
  printf("%ld %d\n", r, taken);
  return 0;
}
