// vm_spin MS [usr2]: a single-threaded program the VM suite traces. It calls
// a few functions in a loop for MS milliseconds of wall time, then exits 0.
// With "usr2" it sends its parent (ptsnap run) SIGUSR2, ptsnap's snapshot
// signal, halfway through.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long leaf(unsigned long x) { return x * 2654435761u; }
__attribute__((noinline)) static unsigned long middle(unsigned long x) {
  for (int i = 0; i < 100; i++) x = leaf(x + i);
  return x;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  double ms = argc > 1 ? atof(argv[1]) : 200;
  int usr2 = argc > 2 && strcmp(argv[2], "usr2") == 0;
  signal(SIGUSR2, SIG_IGN);  // ptsnap's handler is in ptsnap, not here
  double start = now_ms();
  int sent = 0;
  while (now_ms() - start < ms) {
    sink += middle(sink);
    if (usr2 && !sent && now_ms() - start > ms / 2) {
      sent = 1;
      kill(getppid(), SIGUSR2);
    }
  }
  printf("vm_spin done\n");
  return 0;
}
