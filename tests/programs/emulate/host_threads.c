// Under qemu-x86_64, /proc/self/task lists the host threads of the QEMU
// process (QEMU fakes only a few /proc/self files). A process-directed
// signal may go to any of them that does not block it, and QEMU's signal
// handler only works on a vCPU thread. Prints how many threads other than
// this (single) guest thread leave SIGALRM unblocked; exits 1 if any do.
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return 2;
  int self = (int)gettid(), seen = 0, open_to_alarm = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    int tid = atoi(e->d_name);
    if (tid <= 0) continue;
    ++seen;
    if (tid == self) continue;
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;  // exited meanwhile
    while (fgets(line, sizeof(line), f) != NULL) {
      unsigned long long blk = 0;
      if (sscanf(line, "SigBlk: %llx", &blk) == 1) {
        if (!(blk & (1ull << (SIGALRM - 1)))) ++open_to_alarm;
        break;
      }
    }
    fclose(f);
  }
  closedir(d);
  printf("threads %d open_to_sigalrm %d\n", seen, open_to_alarm);
  return open_to_alarm == 0 && seen > 0 ? 0 : 1;
}
