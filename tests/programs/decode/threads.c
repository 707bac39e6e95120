// Two threads with known work: each calls work() a fixed number of times.
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline)) long work(long x) { return x * 3 + 1; }

static void* run(void* arg) {
  long n = (long)arg, s = 0;
  for (long i = 0; i < n; ++i) s += work(i);
  return (void*)s;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, run, (void*)7);
  void* r1 = run((void*)5);
  void* r2;
  pthread_join(t, &r2);
  printf("%ld\n", (long)r1 + (long)r2);
  return 0;
}
