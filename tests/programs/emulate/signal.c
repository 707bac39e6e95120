// Signal handlers: synchronous (raise) and asynchronous (an interval timer
// interrupting a busy loop).
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>

static volatile int hits;

__attribute__((noinline)) static void handler(int sig) { hits += sig > 0; }

int main(void) {
  signal(SIGUSR1, handler);
  for (int i = 0; i < 5; ++i) raise(SIGUSR1);
  signal(SIGALRM, handler);
  struct itimerval it = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_REAL, &it, NULL);
  volatile unsigned long x = 0;
  while (hits < 15) x = x * 3 + 1;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  printf("%d\n", hits >= 15);
  return 0;
}
