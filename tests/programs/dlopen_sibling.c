/* Test program for the recorder: a sibling thread dlopen()s the library
 * named by argv[1] (tests/programs/dlopen_probe_lib.c, which nothing else
 * maps), after a 300 ms pause that lets the recorder follow the new thread.
 * Exits 0 when the library loaded and its function answered. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void* Worker(void* arg) {
  usleep(300 * 1000);
  void* h = dlopen((const char*)arg, RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return (void*)1;
  }
  int (*probe)(int) = NULL;
  *(void**)(&probe) = dlsym(h, "ptsnap_dlopen_probe"); /* POSIX's way past ISO C's rule */
  return probe != NULL && probe(41) == 42 ? NULL : h;
}

int main(int argc, char** argv) {
  pthread_t t;
  void* rc = (void*)1;
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_sibling LIBRARY.so\n");
    return 2;
  }
  if (pthread_create(&t, NULL, Worker, argv[1]) != 0) return 1;
  pthread_join(t, &rc);
  return rc == NULL ? 0 : 1;
}
