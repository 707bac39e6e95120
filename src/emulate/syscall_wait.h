// --emulate-waits (docs/emulation.md, "Waits"): the wall time a guest
// thread spends in each syscall, which the plugin adds to that thread's
// virtual clock when the syscall returns, so sleeps, I/O and futex waits
// show on the timeline while instructions still take one tick each.
//
// What counts is the host's CLOCK_MONOTONIC from the end of the plugin's
// syscall callback (QEMU's qemu_plugin_register_vcpu_syscall_cb, after the
// plugin's own work there) to the start of its syscall-return callback:
// the host syscall and QEMU's translation of it (linux-user/syscall.c,
// do_syscall), for every syscall that returns. exit, exit_group and an
// execve that succeeds never return, so they add nothing. One tick is one
// ns (virtual_cpu.h), so the wall ns are the ticks.
//
// Pure: the caller reads the clock. One SyscallWall per guest thread
// (vCPU), used by that thread only.
#pragma once

#include <cstdint>

namespace ptsnap::emulate {

class SyscallWall {
 public:
  // The thread enters a syscall at `now_ns` (monotonic wall clock).
  void Enter(uint64_t now_ns) {
    entered_ns_ = now_ns;
    in_flight_ = true;
  }
  // The syscall returns at `now_ns`: the ticks to add to the thread's
  // clock: 0 when no entry is pending or the clock did not move forward.
  // A fork's child returns from the entry its parent made (its memory is a
  // copy), so both add the time the fork took.
  [[nodiscard]] uint64_t Return(uint64_t now_ns) {
    if (!in_flight_) return 0;
    in_flight_ = false;
    return now_ns > entered_ns_ ? now_ns - entered_ns_ : 0;
  }
  [[nodiscard]] bool in_flight() const { return in_flight_; }

 private:
  uint64_t entered_ns_ = 0;
  bool in_flight_ = false;
};

}  // namespace ptsnap::emulate
