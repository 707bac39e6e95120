// Threads for the timing tests: two pthreads each run worker(), which computes fib(10) 3 times;
// main joins them. Every fib(10) retires the same instructions in either thread.
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) void* worker(void* arg) {
  long sum = (long)arg;
  for (int i = 0; i < 3; ++i) sum += fib(10);
  return (void*)sum;
}

int main(void) {
  pthread_t threads[2];
  for (long i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, worker, (void*)i);
  long sum = 0;
  for (int i = 0; i < 2; ++i) {
    void* result;
    pthread_join(threads[i], &result);
    sum += (long)result;
  }
  printf("threads = %ld\n", sum);
  return 0;
}
