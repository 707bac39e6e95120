// ptsnap's QEMU TCG plugin: turns the guest's executed translation blocks
// into genuine Intel PT streams (one per guest thread) plus the sideband
// events the kernel would have reported. Loaded by qemu-x86_64 via
// `-plugin libptsnap_qemu.so,out=DIR,...`; the driver (emulate.cpp) builds
// the trace directory from what it leaves in DIR:
//   events.<pid>            one message per line (plugin_protocol.h)
//   pt-<pid>-<tid>-<seq>.pt stream bytes (seq 0: full-execution stream)
//   jit-code.<pid>          code run from memory no file backs (trace/jit_code.h)
//   exec-carry.<pid>        briefly: the recording's state across a followed
//                           execve, for the plugin in the new image (exec_follow.h)
//
// Only per-TB exec callbacks are registered. A block's exit (fall-through,
// conditional, direct, indirect, return, far) is classified at translation
// time; the outcome is inferred when the thread's next block starts.
// Virtual clock (docs/emulation.md, "Time"): each guest thread runs on its
// own virtual core at one instruction per tick (ThreadState::clock, one add
// per block), and threads synchronise where one waits for another, like
// Lamport clocks: a new thread starts at its creator's clone time, and a
// futex wait that returns moves the waiter's clock up to the latest time a
// thread woke that futex (a thread's exit wakes its clear_child_tid, which
// pthread_join waits on). So every call lasts exactly the instructions it
// retires, a syscall takes no time unless it waited for another thread, and
// what one thread caused another to see comes earlier in time. The perf
// clock is the same count in nanoseconds; sideband records take the time of
// the thread that caused them. With waits=1 (--emulate-waits) a syscall
// that returns also adds the wall time it took to its thread's clock
//
// The plugin is one object, `g_plugin` (class Plugin, plugin.h), whose
// member functions are split by job; the C callbacks below are trampolines
// into it. Which file holds what:
//   plugin.h        the Plugin object, its per-thread (ThreadState) and
//                   per-vCPU (Vcpu) state, TbInfo, Options
//   plugin.cpp      qemu_plugin_install, the QEMU callbacks (trampolines)
//   options.cpp     the plugin's key=value arguments (ParseOptions)
//   clock.cpp       the virtual clock: publishing, futex causality
//   threads.cpp     a guest thread's start and end
//   streams.cpp     rings, stream files, snapshots
//   sideband.cpp    the event log, work files, the images QEMU loaded
//   jit.cpp         JIT code capture
//   filters.cpp     --filter ranges and leaving them
//   shadow_stack.cpp  the shadow return stack: --slower-than, --only-in
//   translate.cpp   a block's translation (exit kind, flags)
//   tb_exec.cpp     the hot path: a block's execution into packets
//   exec.cpp        following execve into a new qemu-x86_64
//   syscalls.cpp    syscall entry and return
//   control.cpp     the control pipe, detaching, the end, fatal signals
// The PSB+ placement rule is emulate/psb_placement.h (unit-tested there).
#include <dlfcn.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "emulate/plugin/plugin.h"
#include "emulate/plugin/qemu_plugin_api.h"

extern "C" {
__attribute__((visibility("default"))) int qemu_plugin_version = PTSNAP_QEMU_PLUGIN_API_VERSION;
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t* info, int argc,
                                                               char** argv);
}

namespace ptsnap::emulate {

Plugin g_plugin;

void Plugin::Install(qemu_plugin_id_t id, Options opts, std::string plugin_path) {
  opts_ = std::move(opts);
  if (opts_.null) flags_.store(kStopped);  // benchmark baseline: every callback returns at once
  id_ = id;
  plugin_path_ = std::move(plugin_path);
  if (opts_.ctl_fd >= 0) {
    struct stat st {};
    if (::fstat(opts_.ctl_fd, &st) == 0) ctl_ino_ = st.st_ino;
  }
  OpenEvents();
  if (!opts_.carry_path.empty()) AdoptCarry(opts_.carry_path);
}

// QEMU's callbacks: trampolines into g_plugin.
void OnTbExecCallback(unsigned vcpu, void* udata) {
  g_plugin.OnTbExec(vcpu, static_cast<const TbInfo*>(udata));
}

namespace {

void OnTbTransCallback(qemu_plugin_id_t, qemu_plugin_tb* tb) { g_plugin.OnTbTrans(tb); }

void OnSyscallCallback(qemu_plugin_id_t, unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t, uint64_t) {
  g_plugin.OnSyscall(vcpu, num, a1, a2, a3, a4, a5, a6);
}

void OnSyscallRetCallback(qemu_plugin_id_t, unsigned vcpu, int64_t num, int64_t ret) {
  g_plugin.OnSyscallRet(vcpu, num, ret);
}

void OnExitCallback(qemu_plugin_id_t, void*) { g_plugin.OnExit(); }

}  // namespace
}  // namespace ptsnap::emulate

using namespace ptsnap::emulate;

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
  if (info->version.cur != PTSNAP_QEMU_PLUGIN_API_VERSION || info->system_emulation ||
      std::strcmp(info->target_name, "x86_64") != 0) {
    std::fprintf(stderr,
                 "ptsnap: unsupported QEMU (plugin API version %d, target %s): --emulate needs "
                 "qemu-x86_64 user mode with plugin API version %d (QEMU 7.x, Debian 12's "
                 "qemu-user)\n",
                 info->version.cur, info->target_name, PTSNAP_QEMU_PLUGIN_API_VERSION);
    return -1;
  }
  ptsnap::Result<Options> opts = ParseOptions(argc, argv);
  if (!opts) {
    std::fprintf(stderr, "ptsnap: %s\n", opts.error().message().c_str());
    return -1;
  }
  std::string plugin_path;
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&qemu_plugin_install), &self) != 0 &&
      self.dli_fname != nullptr)
    plugin_path = self.dli_fname;
  g_plugin.Install(id, std::move(*opts), std::move(plugin_path));
  qemu_plugin_register_vcpu_tb_trans_cb(id, OnTbTransCallback);
  qemu_plugin_register_vcpu_syscall_cb(id, OnSyscallCallback);
  qemu_plugin_register_vcpu_syscall_ret_cb(id, OnSyscallRetCallback);
  qemu_plugin_register_atexit_cb(id, OnExitCallback, nullptr);
  if (!HookQemuKill())
    std::fprintf(stderr,
                 "ptsnap: warning: qemu-x86_64 has no `kill` import to watch: a program killed by "
                 "a signal ends the recording without a snapshot\n");
  if (g_plugin.opts().ctl_fd >= 0 || g_plugin.opts().duration_ms > 0) {
    // The control thread must never take a signal. A process-directed
    // signal (the guest's SIGALRM from setitimer, a SIGCHLD, a kill from
    // outside) goes to any thread that does not block it; the kernel picks
    // a thread other than the main one when that one is off-CPU with a
    // signal already pending, which a loaded machine makes likely. QEMU's
    // host_signal_handler assumes a vCPU thread (thread_cpu->env_ptr) and
    // dies with SIGSEGV on this one, which has no vCPU. QEMU blocks all
    // signals in its own helper threads (RCU) for the same reason. The new
    // thread inherits the creator's mask, so block everything around the
    // creation: no window in which it could be chosen.
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread([] { g_plugin.ControlThread(); }).detach();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  return 0;
}
