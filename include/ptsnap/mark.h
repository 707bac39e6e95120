/* ptsnap marks: put a 64-bit value on the timeline from inside the traced
 * program (a request id, a state, up to eight characters of text).
 *
 *   ptsnap_mark(request->id);
 *   ptsnap_mark_str("flush");   // "flush" -> 0x6873756c66
 *
 * Header-only: nothing to link. Usable from C (C99 and later) and C++.
 * x86-64 only; elsewhere both calls do nothing.
 *
 * Two encodings carry the value into the Intel PT trace
 * (docs/recording.md, "Marks"):
 *
 * 1. The PTWRITE instruction (`ptwrite %rax`), when the environment
 *    variable PTSNAP_PTWRITE is "1" at the first mark (read once, then
 *    cached). `ptsnap run --ptw` sets it for the program it starts, after
 *    checking that the CPU has PTWRITE (caps/ptwrite) and turning on the
 *    intel_pt event's `ptw` term. Never set it by hand on a CPU without
 *    PTWRITE: the instruction faults (SIGILL) there.
 * 2. Otherwise perf's "emulated ptwrite": a call of ptsnap_emulate_ptwrite()
 *    below, whose 64 conditional branches spell the value in PT's TNT bits.
 *    It works on every CPU with Intel PT and under `ptsnap run --emulate`,
 *    and needs no recording option. This is the default.
 *
 * Cost when nobody traces the program: a call and 64 well-predicted or
 * mispredicted branches; docs/recording.md gives the measured figures
 * (build/tests/api/mark_bench). Thread-safe; async-signal-safe after the first mark.
 *
 * Not to be confused with ptsnap_mark_start() of ptsnap/stop_indicator.h,
 * which starts a timer for ptsnap_take_snapshot_if_slower(). */
#ifndef PTSNAP_MARK_H_
#define PTSNAP_MARK_H_

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__x86_64__)

/* The emulated PTWRITE, perf's encoding (tools/perf/Documentation/
 * perf-intel-pt.txt, "Emulated PTWRITE") with one change. Its code is exactly:
 *
 *   [endbr64]                      only under -fcf-protection
 *   eb 10                          jmp .+16, over the magic
 *   0f 0b "perf,ptwrite  "         16 bytes: ud2 and perf's magic text
 *   48 89 f8                       mov %rdi,%rax (the value)
 *   64 x { 48 d1 e0                shl $1,%rax   (bit 63 first)
 *          72 01                   jc  1f        taken = 1
 *          90                      nop
 *        1: }
 *   c3                             ret
 *
 * A decoder finds the jmp and the magic at the block's address, then reads
 * the next 64 TNT bits as the value. The change from perf's documented
 * shape: there each jc targets the very next instruction, so taken and not
 * taken reach the same address; here jc jumps over a one-byte nop, so the
 * two differ, which an emulator that infers taken from the next address
 * (ptsnap's qemu-user plugin) needs. Nothing between the jmp and the last
 * jc is a call, return or other conditional branch.
 *
 * Weak and naked: one copy in the program however many translation units
 * include this header, never inlined, no prologue. The `used` attribute
 * keeps it in the binary even when only the PTWRITE path is compiled in. */
__attribute__((weak, naked, noinline, used)) void ptsnap_emulate_ptwrite(uint64_t value
                                                                         __attribute__((unused))) {
  __asm__ __volatile__(
      "jmp 1f\n\t"
      ".byte 0x0f, 0x0b\n\t"
      ".ascii \"perf,ptwrite  \"\n"
      "1:\n\t"
      "mov %rdi, %rax\n\t"
      ".rept 64\n\t"
      "shl $1, %rax\n\t"
      "jc 2f\n\t"
      "nop\n"
      "2:\n\t"
      ".endr\n\t"
      "ret\n\t");
}

/* 1: PTSNAP_PTWRITE was "1" at the first mark; 0: it was not; -1: not read
 * yet. One per translation unit (static); each reads the environment once. */
__attribute__((unused)) static int ptsnap_ptwrite_mode_ = -1;

__attribute__((unused)) static inline int ptsnap_use_ptwrite_(void) {
  int mode = __atomic_load_n(&ptsnap_ptwrite_mode_, __ATOMIC_RELAXED);
  if (mode < 0) {
    const char* env = getenv("PTSNAP_PTWRITE");
    mode = env != NULL && env[0] == '1' && env[1] == '\0';
    __atomic_store_n(&ptsnap_ptwrite_mode_, mode, __ATOMIC_RELAXED);
  }
  return mode;
}

/* Records `value` in the trace: PTWRITE when enabled (see above), else the
 * emulated encoding. */
__attribute__((unused)) static inline void ptsnap_mark(uint64_t value) {
  if (ptsnap_use_ptwrite_()) {
    /* ptwrite %rax (F3 REX.W 0F AE /4), spelled in bytes for assemblers
     * older than binutils 2.28. */
    __asm__ __volatile__(".byte 0xf3, 0x48, 0x0f, 0xae, 0xe0" : : "a"(value));
  } else {
    ptsnap_emulate_ptwrite(value);
  }
}

#else /* not x86-64: no Intel PT, nothing to record */

__attribute__((unused)) static inline void ptsnap_mark(uint64_t value) { (void)value; }

#endif

/* Up to the first 8 bytes of `s` packed little-endian into the value, the
 * rest zero, as perf prints an ASCII payload: "Hello" -> 0x6f6c6c6548.
 * NULL marks 0. */
__attribute__((unused)) static inline uint64_t ptsnap_mark_value_of_str(const char* s) {
  uint64_t v = 0;
  int i;
  if (s == NULL) return 0;
  for (i = 0; i < 8 && s[i] != '\0'; ++i) v |= (uint64_t)(unsigned char)s[i] << (8 * i);
  return v;
}

/* ptsnap_mark(ptsnap_mark_value_of_str(s)). */
__attribute__((unused)) static inline void ptsnap_mark_str(const char* s) {
  ptsnap_mark(ptsnap_mark_value_of_str(s));
}

#ifdef __cplusplus
}
#endif

#endif /* PTSNAP_MARK_H_ */
