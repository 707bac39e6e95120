/* ptsnap stop indicator: call ptsnap_take_snapshot() where something
 * interesting just happened, and record with `ptsnap run --trigger . -- PROG`
 * (or `ptsnap attach -p PID --trigger .`). ptsnap puts a hardware execute
 * breakpoint on this function in every traced thread; when it is hit, the
 * Intel PT ring buffer is snapshotted, so the trace ends here.
 *
 * Cost: an empty call when nobody traces the program; about ten
 * microseconds when ptsnap takes a snapshot on it.
 *
 * magic-trace's name, magic_trace_stop_indicator(start_tsc, arg), is defined
 * too, so programs written for magic-trace work unchanged.
 *
 * Usable from C and C++. The functions are weak, so including the header in
 * many translation units leaves exactly one definition of each in the
 * program; noinline and the empty asm keep the call (and the symbol) from
 * being optimised away. Include it in the executable itself: `--trigger .`
 * looks the symbols up in the main executable's symbol table.
 *
 * Snapshot only when the work was slow (magic-trace's Min_duration idea):
 *
 *   ptsnap_mark_start();
 *   handle(request);
 *   ptsnap_take_snapshot_if_slower(2000000);  // 2 ms
 *
 * ptsnap_take_snapshot_if_slower(ns) calls ptsnap_take_snapshot() only when
 * at least `ns` nanoseconds of CLOCK_MONOTONIC passed since this thread's
 * last ptsnap_mark_start() (each thread has its own mark); without a mark
 * it does nothing. Record with `--trigger .` as usual. Under --emulate the
 * clock is the host's: a call slowed by the emulator is slower there too.
 * (For a function of a program that cannot be changed, `--trigger FUNC
 * --slower-than 2ms` times it from outside.)
 *
 * Compiles alone under -std=c99, -std=c11 (no GNU extensions or feature
 * macros needed) and C++11 and later. */
#ifndef PTSNAP_STOP_INDICATOR_H_
#define PTSNAP_STOP_INDICATOR_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Asks a ptsnap recording for a snapshot. `arg` is kept with the trigger hit. */
__attribute__((weak, noinline, used)) void ptsnap_take_snapshot(uint64_t arg) {
  __asm__ __volatile__("" : : "r"(arg) : "memory");
}

/* magic-trace's stop indicator; same effect. */
__attribute__((weak, noinline, used)) void magic_trace_stop_indicator(uint64_t start_tsc,
                                                                      uint64_t arg) {
  __asm__ __volatile__("" : : "r"(start_tsc), "r"(arg) : "memory");
}

/* This thread's mark, in CLOCK_MONOTONIC nanoseconds; 0: none. One per
 * translation unit that includes the header (static), which is what a
 * mark and its check in the same function need. */
#if defined(__cplusplus)
#define PTSNAP_THREAD_LOCAL_ thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PTSNAP_THREAD_LOCAL_ _Thread_local
#else
#define PTSNAP_THREAD_LOCAL_ __thread /* C99: GCC's and clang's spelling */
#endif
__attribute__((unused)) static PTSNAP_THREAD_LOCAL_ uint64_t ptsnap_mark_ns_ = 0;

/* clock_gettime(CLOCK_MONOTONIC), declared here under its own name: <time.h>
 * declares clock_gettime and CLOCK_MONOTONIC only with POSIX feature macros
 * (_POSIX_C_SOURCE >= 199309L, or the GNU default), which a strict
 * -std=c99/c11 build lacks, and defining them here would come too late
 * when the program included a libc header first. The asm label binds the
 * declaration to libc's clock_gettime symbol (the vDSO-backed one), whose
 * struct timespec is two longs and whose CLOCK_MONOTONIC is 1 on Linux
 * (uapi linux/time.h). */
struct ptsnap_timespec_ {
  long tv_sec;
  long tv_nsec;
};
extern int ptsnap_clock_gettime_(int clock_id,
                                 struct ptsnap_timespec_* ts) __asm__("clock_gettime");
#define PTSNAP_CLOCK_MONOTONIC_ 1

__attribute__((unused)) static inline uint64_t ptsnap_now_ns_(void) {
  struct ptsnap_timespec_ ts;
  ptsnap_clock_gettime_(PTSNAP_CLOCK_MONOTONIC_, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Marks the start of the work this thread may want a snapshot of. */
__attribute__((unused)) static inline void ptsnap_mark_start(void) {
  ptsnap_mark_ns_ = ptsnap_now_ns_();
}

/* Calls ptsnap_take_snapshot(elapsed ns) when at least `ns` nanoseconds
 * passed since this thread's ptsnap_mark_start(); returns 1 then, else 0.
 * The mark stays (call ptsnap_mark_start() again for the next piece of work). */
__attribute__((unused)) static inline int ptsnap_take_snapshot_if_slower(uint64_t ns) {
  if (ptsnap_mark_ns_ == 0) return 0;
  const uint64_t elapsed = ptsnap_now_ns_() - ptsnap_mark_ns_;
  if (elapsed < ns) return 0;
  ptsnap_take_snapshot(elapsed);
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* PTSNAP_STOP_INDICATOR_H_ */
