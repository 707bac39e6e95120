// vm_threads N SECONDS: N threads besides main, each calling a function in a
// loop, for SECONDS; prints "ready PID" once every thread runs, so a test can
// `ptsnap attach -p PID` to a multi-threaded process.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int stop;

__attribute__((noinline)) static void work(void) {
  for (int i = 0; i < 1000; i++) sink += i;
}

static void* worker(void* arg) {
  (void)arg;
  while (!stop) work();
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  int seconds = argc > 2 ? atoi(argv[2]) : 5;
  pthread_t t[64];
  if (n > 64) n = 64;
  for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
  printf("ready %d\n", getpid());
  fflush(stdout);
  time_t end = time(NULL) + seconds;
  while (time(NULL) < end) work();
  stop = 1;
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}
