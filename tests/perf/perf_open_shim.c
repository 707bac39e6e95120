/* LD_PRELOAD shim for perf_attr_agree: lets perf get past its intel_pt
 * event on a machine without Intel PT, so that it goes on to print (and
 * open) the events that follow it, its tracking dummy among them.
 *
 * perf opens every event through glibc's syscall(__NR_perf_event_open, ...)
 * (tools/perf/perf-sys.h) and prints the attr with -vv just before. Where
 * attr.type is PTSNAP_FAKE_PMU_TYPE (the fake intel_pt node's `type`), this
 * opens a software dummy event in its place (same pid, cpu, flags and
 * attr, type/config/aux_watermark changed), so the fd is real and perf's
 * next steps (ioctls, the data mmap) work; its AUX mmap then fails
 * (EOPNOTSUPP: a dummy has no AUX) and perf exits before the workload
 * runs. Nothing is recorded. Every other call goes to the real syscall(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>

long syscall(long number, ...) {
  static long (*real)(long, ...);
  /* POSIX's way to store dlsym's object pointer into a function pointer. */
  if (!real) *(void**)(&real) = dlsym(RTLD_NEXT, "syscall");
  /* x86-64 passes syscall()'s arguments in registers: reading six is safe
   * whatever the caller passed. */
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
  va_end(ap);
  const char* fake = getenv("PTSNAP_FAKE_PMU_TYPE");
  if (number == __NR_perf_event_open && fake != NULL && a[0] != 0) {
    const struct perf_event_attr* attr = (const struct perf_event_attr*)a[0];
    if (attr->type == (unsigned)atoi(fake)) {
      struct perf_event_attr dummy = *attr;
      dummy.type = PERF_TYPE_SOFTWARE;
      dummy.config = PERF_COUNT_SW_DUMMY;
      dummy.aux_watermark = 0;
      return real(number, &dummy, a[1], a[2], a[3], a[4]);
    }
  }
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
