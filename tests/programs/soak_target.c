// The long-running target of tools/soak and tools/bounds: the main thread
// calls soak_work -> soak_leaf in a loop (with a short sleep every round,
// so it also blocks) for SECONDS (0: until killed); LIVE threads stay alive
// doing the same at a slower pace; with CHURN > 0 one more thread creates
// and joins short-lived threads, CHURN at a time, as fast as it can.
// Prints "ready PID" once every LIVE thread has started. Small thread
// stacks (64 KiB), so thousands of threads are cheap.
//   soak_target SECONDS [LIVE [CHURN]]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int stop;
static volatile unsigned long churned;
static pthread_attr_t attr;

__attribute__((noinline)) void soak_leaf(unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) sink += i ^ (i >> 3);
}

__attribute__((noinline)) void soak_work(unsigned long n) {
  for (int i = 0; i < 8; ++i) soak_leaf(n);
}

static void Nap(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static pthread_mutex_t ready_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static int started;

static void* Live(void* arg) {
  (void)arg;
  pthread_mutex_lock(&ready_mu);
  ++started;
  pthread_cond_signal(&ready_cv);
  pthread_mutex_unlock(&ready_mu);
  while (!stop) {
    soak_work(200);
    Nap(20000);
  }
  return NULL;
}

static void* Short(void* arg) {
  (void)arg;
  soak_work(50);
  return NULL;
}

static void* Churn(void* arg) {
  int n = (int)(long)arg;
  pthread_t* t = calloc((size_t)n, sizeof *t);
  while (!stop) {
    int made = 0;
    for (int i = 0; i < n; ++i)
      if (pthread_create(&t[made], &attr, Short, NULL) == 0) ++made;
    for (int i = 0; i < made; ++i) pthread_join(t[i], NULL);
    churned += (unsigned long)made;
  }
  free(t);
  return NULL;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0;
  const int live = argc > 2 ? atoi(argv[2]) : 0;
  const int churn = argc > 3 ? atoi(argv[3]) : 0;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t* t = calloc((size_t)(live > 0 ? live : 1), sizeof *t);
  int made = 0;
  for (int i = 0; i < live; ++i)
    if (pthread_create(&t[made], &attr, Live, NULL) == 0) ++made;
  pthread_mutex_lock(&ready_mu);
  while (started < made) pthread_cond_wait(&ready_cv, &ready_mu);
  pthread_mutex_unlock(&ready_mu);
  pthread_t churner;
  const int churning = churn > 0 && pthread_create(&churner, &attr, Churn, (void*)(long)churn) == 0;
  printf("ready %d threads %d\n", (int)getpid(), made + 1 + churning);
  fflush(stdout);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    soak_work(2000);
    Nap(1000);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (seconds > 0 &&
        (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
      break;
  }
  stop = 1;
  for (int i = 0; i < made; ++i) pthread_join(t[i], NULL);
  if (churning) pthread_join(churner, NULL);
  printf("done threads-churned %lu\n", churned);
  free(t);
  return 0;
}
