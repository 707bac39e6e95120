// perf_try SCOPE [PMU]: what the kernel allows the caller, the oracle for
// `ptsnap probe`'s scopes. SCOPE: user (this thread, exclude_kernel), kernel
// (this thread, kernel too), cpu (CPU 0, all tasks). PMU: a name under
// /sys/bus/event_source/devices (default: software cpu-clock). Prints "ok" or
// "errno N (text)" and exits 0 either way; 2 on bad usage.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: perf_try user|kernel|cpu [PMU]\n");
    return 2;
  }
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.disabled = 1;
  if (argc > 2) {
    char path[256];
    snprintf(path, sizeof path, "/sys/bus/event_source/devices/%s/type", argv[2]);
    FILE* f = fopen(path, "r");
    if (!f || fscanf(f, "%u", &a.type) != 1) {
      printf("no PMU %s\n", argv[2]);
      return 0;
    }
    fclose(f);
    a.config = 0;
  }
  int pid = 0, cpu = -1;
  if (strcmp(argv[1], "user") == 0) {
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
  } else if (strcmp(argv[1], "kernel") == 0) {
  } else if (strcmp(argv[1], "cpu") == 0) {
    pid = -1;
    cpu = 0;
  } else {
    fprintf(stderr, "perf_try: unknown scope %s\n", argv[1]);
    return 2;
  }
  int fd = syscall(SYS_perf_event_open, &a, pid, cpu, -1, 0);
  if (fd < 0)
    printf("errno %d (%s)\n", errno, strerror(errno));
  else
    printf("ok\n");
  return 0;
}
