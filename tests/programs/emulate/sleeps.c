// Pure computation between sleeps: --emulate-waits puts each nap's 20 ms on
// the virtual clock, and compute() lasts its instruction count either way
// (Emulate.WaitsPutSleepsOnTheClockAndKeepInstructionTime).
#include <unistd.h>

static volatile unsigned long sink;

void compute(void) {
  for (unsigned long i = 0; i < 10000; ++i) sink += i;
}

void nap(void) { usleep(20000); }

int main(void) {
  for (int i = 0; i < 5; ++i) {
    compute();
    nap();
  }
  return 0;
}
