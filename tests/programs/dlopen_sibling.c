/* Test program for the recorder: a sibling thread dlopen()s a library the
 * main thread never maps itself (libm: C, so nothing else pulls it in),
 * after a 300 ms pause that lets the recorder follow the new thread.
 * Exits 0 when the library loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void* Worker(void* arg) {
  (void)arg;
  usleep(300 * 1000);
  void* h = dlopen("libm.so.6", RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return (void*)1;
  }
  double (*cosine)(double) = NULL;
  *(void**)(&cosine) = dlsym(h, "cos"); /* POSIX's way past ISO C's pointer rule */
  return cosine != NULL && cosine(0.0) == 1.0 ? NULL : (void*)h;
}

int main(void) {
  pthread_t t;
  void* rc = (void*)1;
  if (pthread_create(&t, NULL, Worker, NULL) != 0) return 1;
  pthread_join(t, &rc);
  return rc == NULL ? 0 : 1;
}
