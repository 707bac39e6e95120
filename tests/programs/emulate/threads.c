// Two worker threads plus the main thread, each running fib, then a third
// worker once the first two are gone.
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void* worker(void* arg) {
  long n = (long)arg;
  return (void*)fib(n);
}

int main(void) {
  pthread_t t[2];
  for (long i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, (void*)(15 + i));
  long sum = fib(14);
  for (int i = 0; i < 2; ++i) {
    void* r;
    pthread_join(t[i], &r);
    sum += (long)r;
  }
  // A third thread after the first two exited: QEMU reuses a vCPU index.
  pthread_t late;
  pthread_create(&late, NULL, worker, (void*)13L);
  void* r;
  pthread_join(late, &r);
  sum += (long)r;
  printf("%ld\n", sum);
  return 0;
}
