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
 * looks the symbols up in the main executable's symbol table. */
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

#ifdef __cplusplus
}
#endif

#endif /* PTSNAP_STOP_INDICATOR_H_ */
