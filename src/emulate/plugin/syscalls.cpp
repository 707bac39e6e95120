// Syscalls: the clock's causality (futexes, clone), mappings (mmap,
// munmap), threads' ends and execve, at entry and return.
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

void Plugin::OnSyscall(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                       uint64_t a4, uint64_t a5, uint64_t a6) {
  if (vcpu >= kMaxVcpus || detached_.load(std::memory_order_relaxed)) return;
  Vcpu& v = vcpus_[vcpu];
  ThreadState* self = v.thread;
  if (self != nullptr) {
    Publish(self);
    // A snapshot that another thread takes writes this thread's ring, not
    // the bytes its encoder still holds; so a thread entering a syscall
    // (which may block it, in a join or a read, for as long as the program
    // runs) moves them into the ring first. Otherwise every snapshot taken
    // while it waits lacks its last instructions before the wait (up to a
    // PSB period: Emulate.MultiSnapshotStoresWhatEachThreadsRingGained found
    // 2,910 missing in a thread in pthread_join). The block's TIP.PGD is out
    // already: TNT holds nothing. The PSB period counts on across the drain
    // (PtStream::since_psb).
    if (!opts_.full) Drain(self);
  }
  const uint64_t clock = self != nullptr ? self->clock : Now();
  v.waiting_on[0] = v.waiting_on[1] = 0;
  switch (num) {
    case __NR_futex: {
      // futex(uaddr, op, val, timeout, uaddr2, val3); op without
      // FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME.
      switch (a2 & 0x7f) {
        case FUTEX_WAKE:
        case FUTEX_WAKE_BITSET:
        case FUTEX_UNLOCK_PI: FutexWoken(a1, clock); break;
        case FUTEX_REQUEUE:
        case FUTEX_CMP_REQUEUE:
        case FUTEX_WAKE_OP:
        case FUTEX_CMP_REQUEUE_PI:
          FutexWoken(a1, clock);
          FutexWoken(a5, clock);
          break;
        case FUTEX_WAIT:
        case FUTEX_WAIT_BITSET:
        case FUTEX_LOCK_PI:
        case FUTEX_TRYLOCK_PI: v.waiting_on[0] = a1; break;
        case FUTEX_WAIT_REQUEUE_PI:
          v.waiting_on[0] = a1;
          v.waiting_on[1] = a5;
          break;
        default: break;
      }
      break;
    }
    case __NR_clone:  // clone(flags, newsp, parent_tid, child_tid, tls)
      clone_clock_.store(clock, std::memory_order_relaxed);
      v.pending_ctid = (a1 & CLONE_CHILD_CLEARTID) ? a4 : 0;
      break;
    case __NR_fork:
    case __NR_vfork: clone_clock_.store(clock, std::memory_order_relaxed); break;
    case __NR_set_tid_address: {
      std::lock_guard lock(futex_mu_);
      clear_tid_[static_cast<pid_t>(::gettid())] = a1;
      break;
    }
    case __NR_munmap:  // munmap(addr, len)
      v.pending_unmap[0] = a1;
      v.pending_unmap[1] = a2;
      break;
    case __NR_mmap:  // mmap(addr, len, prot, flags, fd, off)
      if ((a4 & MAP_FIXED) && static_cast<int64_t>(a5) < 0) {
        v.pending_unmap[0] = a1;
        v.pending_unmap[1] = a2;
      }
      if ((a3 & PROT_EXEC) && static_cast<int64_t>(a5) >= 0) {
        v.pending_mmap[0] = a3 | (uint64_t{1} << 32);
        v.pending_mmap[1] = a5;
        v.pending_mmap[2] = a2;
        v.pending_mmap[3] = a6;
      }
      break;
    case __NR_exit:  // this thread only
      if (!(flags_.load() & kStopped) || opts_.full) EndThread(vcpu);
      break;
    case __NR_execve:
    case __NR_execveat:
      // A request not taken yet is taken first: the exec replaces the
      // thread that would have taken it.
      if (const int f = flags_.load(); f != 0 && !(f & kStopped)) HandleRequests(self, f);
      if (!(flags_.load() & kStopped)) OnExec(vcpu, num, a1, a2, a3, a4, a5);
      break;
    default: break;
  }
  // Last, so the plugin's own work above is not counted as the syscall's.
  if (opts_.waits) v.syscall_wall.Enter(MonotonicNs());
}

void Plugin::OnSyscallRet(unsigned vcpu, int64_t num, int64_t ret) {
  if (vcpu >= kMaxVcpus || detached_.load(std::memory_order_relaxed)) return;
  Vcpu& v = vcpus_[vcpu];
  ThreadState* self = v.thread;
  // --emulate-waits: the syscall took its wall time on this thread's clock
  // (before a futex wait catches up with its waker, so the later of the two
  // wins). The block after it starts with a TIP.PGE whose TSC carries it.
  if (opts_.waits) {
    const uint64_t waited = v.syscall_wall.Return(MonotonicNs());
    if (self != nullptr) self->clock += waited;
  }
  if (self != nullptr) {
    FutexCatch(self, v.waiting_on[0]);
    FutexCatch(self, v.waiting_on[1]);
  }
  v.waiting_on[0] = v.waiting_on[1] = 0;
  if (num == __NR_clone && ret > 0 && v.pending_ctid != 0) {
    std::lock_guard lock(futex_mu_);
    clear_tid_[static_cast<pid_t>(ret)] = v.pending_ctid;
  }
  const uint64_t now = self != nullptr ? self->clock : Now();
  if ((num == __NR_munmap || num == __NR_mmap) && v.pending_unmap[1] != 0) {
    const uint64_t lo = v.pending_unmap[0], len = v.pending_unmap[1];
    v.pending_unmap[0] = v.pending_unmap[1] = 0;
    if (ret >= 0) RemoveFileCode(lo, lo + ((len + 0xfff) & ~uint64_t{0xfff}));
  }
  if (num == __NR_mmap) {
    uint64_t prot = v.pending_mmap[0];
    v.pending_mmap[0] = 0;
    if (prot == 0 || ret < 0) return;
    char link[64], path[4096];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d", static_cast<int>(v.pending_mmap[1]));
    ssize_t n = ::readlink(link, path, sizeof(path) - 1);
    if (n <= 0) return;
    path[n] = '\0';
    uint64_t len = (v.pending_mmap[2] + 0xfff) & ~uint64_t{0xfff};
    EmitMmap2(now, static_cast<uint64_t>(ret), len, v.pending_mmap[3], path,
              static_cast<int>(prot & 0xffffffff), MAP_PRIVATE);
  } else if ((num == __NR_clone || num == __NR_fork || num == __NR_vfork) && ret >= 0) {
    ThreadState* t = self;
    if (ret == 0) {
      // fork/vfork/clone without CLONE_THREAD returned in the child process
      // (a new thread never returns through here in QEMU 7.2).
      pid_t parent = pid_;
      pid_t ptid = t ? t->tid : parent;
      // The control thread stayed in the parent: the driver's requests and
      // --duration are the parent's (and not a program this child execs).
      opts_.ctl_fd = -1;
      ctl_ino_ = 0;
      opts_.duration_ms = 0;
      OpenEvents();
      {
        // The child's own capture file; it knows the code its parent
        // captured (its memory is a copy).
        std::lock_guard jit_lock(jit_mu_);
        jit_fd_.reset();
      }
      std::lock_guard lock(mu_);
      for (Vcpu& v : vcpus_) v.thread = nullptr;  // the parent's threads: not ours
      finished_.clear();
      Report(TaskMessage{.exit = false,
                         .time = now,
                         .pid = U32(pid_),
                         .ppid = U32(parent),
                         .tid = U32(::gettid()),
                         .ptid = U32(ptid)});
    } else {
      Report(TaskMessage{.exit = false,
                         .time = now,
                         .pid = U32(pid_),
                         .ppid = U32(pid_),
                         .tid = static_cast<uint32_t>(ret),
                         .ptid = U32(t ? t->tid : pid_)});
    }
  }
}

}  // namespace ptsnap::emulate
