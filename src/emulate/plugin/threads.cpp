// Guest threads: a thread's state (its encoder, clock, ring or stream file)
// made at its first block, and its end at exit.
#include <fcntl.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "emulate/plugin/plugin.h"
#include "emulate/virtual_cpu.h"

namespace ptsnap::emulate {

ThreadState* Plugin::StartThread(unsigned vcpu) {
  PtStreamOptions o;
  o.ret_compression = opts_.retcomp;
  o.buffer_size = opts_.psb_period + (64 << 10);
  o.mtc = opts_.mtc;
  o.mtc_freq = static_cast<uint32_t>(opts_.mtc_freq);
  o.cyc = opts_.cyc;
  o.cyc_thresh = static_cast<uint32_t>(opts_.cyc_thresh);
  o.tsc_per_ctc = kTscPerCtc;
  o.cbr = kCoreBusRatio;
  auto* t = new ThreadState(o);
  t->pid = pid_;
  t->tid = static_cast<pid_t>(::gettid());
  // A new thread (or a forked child) starts when its creator's clone did.
  t->clock = clone_clock_.load(std::memory_order_relaxed);
  // The thread that called a followed execve runs on here: its stream goes
  // on (its ring, or its open full-execution file) and is not started anew.
  std::optional<CarriedThread> adopted = std::exchange(adopt_, std::nullopt);
  if (adopted) {
    // The new encoder's cycle counter starts at the exec, not at 0: its
    // first PSB would otherwise follow the old stream's last packet with a
    // CYC of the whole run so far, which perf adds to the time it had there
    // (it then ignores the PSB's TSC as going backwards: every time after
    // the exec came out 115 us late in perf_interop's exec case).
    t->pt.RestartCycles(t->clock);
    t->insns = adopted->insns;
    t->hash = adopted->hash;
    t->wrapped = adopted->wrapped;
    for (std::vector<uint8_t>& chunk : adopted->ring) {
      t->ring_bytes += chunk.size();
      t->ring.push_back(std::move(chunk));
    }
    if (opts_.full && adopted->fd >= 0) {
      t->fd.reset(adopted->fd);
      t->file = adopted->file;
      FullStreamLine(t);
    }
  }
  if (opts_.full && !t->fd) {
    t->file = StreamFile(t->tid, 0);
    std::string path = opts_.out + "/" + t->file;
    t->fd = OpenWorkFile(path, O_TRUNC);
    // Described now and again when the thread ends (the last description
    // wins): a stream cut short by a full disk or a kill is still listed.
    FullStreamLine(t);
  }
  if (!adopted) Report(ItraceMessage{.time = t->clock, .pid = U32(t->pid), .tid = U32(t->tid)});
  std::lock_guard lock(mu_);
  vcpus_[vcpu].thread = t;
  return t;
}

// The thread left user mode at a far transfer and will not come back (exit):
// its stream is complete.
void Plugin::EndThread(unsigned vcpu) {
  std::lock_guard lock(mu_);
  ThreadState* t = vcpus_[vcpu].thread;
  if (t == nullptr) return;
  vcpus_[vcpu].thread = nullptr;
  t->pt.FlushTnt();
  Drain(t);
  Publish(t);
  FutexWoken(ClearChildTid(t->tid), t->clock);  // the kernel wakes it at exit
  Report(ExitMessage(t));
  if (opts_.full) {
    FinishFullStream(t);
  } else {
    finished_.push_back(t);
  }
}

}  // namespace ptsnap::emulate
