// Control: the driver's requests (control pipe, --duration), detaching, the
// end of the emulation (QEMU's atexit) and a fatal signal (the `kill` hook).
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>

#include "base/string_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

void Plugin::Detach() {
  detached_.store(true);
  flags_.store(kStopped);
}

namespace {
void Reset(qemu_plugin_id_t /*id*/) {}
}  // namespace

// On a vCPU thread: the first one after the detach asks for the reset.
void Plugin::ResetIfDetached() {
  if (detached_.load(std::memory_order_relaxed) && !reset_asked_.exchange(true))
    qemu_plugin_reset(id_, Reset);
}

void Plugin::HandleRequests(ThreadState* self, int flags) {
  if (flags & kStopped) return;
  int expected = flags;
  if (!flags_.compare_exchange_strong(expected, kStopped)) return;  // another thread took it
  if (!opts_.full) {
    const bool asked = (flags & (kReqCtrlC | kReqDuration)) == 0;
    TakeSnapshot((flags & kReqCtrlC) ? "ctrl-c" : asked ? "signal" : "duration", "", self);
    if (asked || (opts_.multi && !(flags & kReqCtrlC))) flags_.store(0);
  } else if ((flags & (kReqCtrlC | kReqDuration)) == 0) {
    flags_.store(0);  // full execution: everything is recorded anyway
  }
  // Ctrl-C was meant for the program too: QEMU delivers it to the guest.
  if (flags & kReqCtrlC) ::kill(::getpid(), SIGINT);
}

// What every end of the emulation writes last: the note about skipped slow
// calls, each thread's exit (and its full-execution stream), the done line.
void Plugin::ReportEnd() {
  if (const uint64_t skipped = slow_skipped_.load(); skipped != 0)
    Report(NoteMessage{std::to_string(skipped) + " slow call(s) of " + opts_.slow_name +
                       " were not snapshotted: --multi-snapshot takes at most one slow-call "
                       "snapshot per thread every " +
                       base::FormatDuration(std::max<uint64_t>(opts_.slow_ns, 10'000'000)) +
                       " (virtual time)"});
  std::lock_guard lock(mu_);
  for (Vcpu& v : vcpus_)
    if (ThreadState* t = v.thread; t != nullptr) {
      Report(ExitMessage(t));
      FinishFullStream(t);
    }
  Report(DoneMessage{Now()});
}

void Plugin::OnExit() {
  if (detached_.load()) return;
  int f = flags_.exchange(kStopped);
  bool ctrl_c = false;
  if (opts_.ctl_fd >= 0) {
    char c = 0;
    int fl = ::fcntl(opts_.ctl_fd, F_GETFL);
    ::fcntl(opts_.ctl_fd, F_SETFL, fl | O_NONBLOCK);
    ctrl_c = ::read(opts_.ctl_fd, &c, 1) == 1 && c == 'c';
  }
  DrainEveryThread();
  if (!(f & kStopped)) {
    // A request the guest threads never got to (blocked in a syscall).
    const char* reason = (ctrl_c || (f & kReqCtrlC)) ? "ctrl-c"
                         : (f & kReqDuration)        ? "duration"
                                                     : "exit";
    TakeSnapshot(reason, "", nullptr);
  }
  ReportEnd();
}

// The guest dies of `sig` on the calling thread: its stream ends where it
// stopped, and the snapshot (unless recording stopped already) and the end
// are written as at an exit.
void Plugin::OnFatalSignal(int sig) {
  const int f = flags_.exchange(kStopped);
  const auto tid = static_cast<pid_t>(::gettid());
  ThreadState* self = nullptr;
  {
    std::lock_guard lock(mu_);
    for (Vcpu& v : vcpus_)
      if (v.thread != nullptr && v.thread->tid == tid) self = v.thread;
  }
  if (self != nullptr && self->enabled && self->prev != nullptr) {
    // A fault (SIGSEGV, SIGILL, SIGFPE, SIGBUS) stops the guest inside the
    // block that began last, and QEMU 7.2's plugin API cannot say at which
    // of its instructions: the stream ends at the block's last one (FUP,
    // TIP.PGD, as at an asynchronous event), so the decode runs the block
    // up to there, in the function that faulted, which a block never
    // leaves but by its last instruction. A signal raised by a syscall
    // (abort's tgkill) found tracing off already.
    self->pt.SetTime(self->clock - 1);
    self->pt.AsyncDisable(self->prev->last_ip);
    self->enabled = false;
  }
  DrainEveryThread();
  if (!(f & kStopped)) {
    // A Ctrl-C or --duration request the guest threads never got to (all
    // blocked in syscalls) ended the program: ptsnap's SIGTERM after the
    // stop grace killed it, so the snapshot is the request's, as at an exit
    // (#41: it said "fatal-signal SIGTERM", which reads as a crash).
    if (f & (kReqCtrlC | kReqDuration))
      TakeSnapshot((f & kReqCtrlC) ? "ctrl-c" : "duration", "", self);
    else
      TakeSnapshot("fatal-signal", base::SignalName(sig), self);
  }
  ReportEnd();
}

namespace {

// A fatal signal (docs/emulation.md, "A program killed by a signal"). QEMU
// 7.2 runs no plugin callback when the guest dies of a signal: for a signal
// whose guest action is the default one, linux-user/signal.c's
// dump_core_and_abort() sets the host action to SIG_DFL, sends the signal
// to its own process with kill(2) and waits in sigsuspend, so QEMU dies of
// it and the atexit callbacks (OnExit) never run. That kill() is QEMU's
// only call of libc's kill (a guest's kill, tkill and tgkill go through
// safe_syscall), so the plugin puts its own function in the GOT slot of
// qemu-x86_64's `kill` import: it sees the signal on the dying thread,
// before anything is lost, snapshots, and then lets the kill happen.
// Whether kill(getpid(), sig) ends the process: the host action is SIG_DFL
// (QEMU installs its handler for every other signal while it runs) and
// that default is to terminate (signal(7)).
bool KillsSelf(pid_t pid, int sig) {
  if (pid != ::getpid() || sig <= 0) return false;
  switch (sig) {
    case SIGCHLD:
    case SIGURG:
    case SIGWINCH:
    case SIGCONT:
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU: return false;
    default: break;
  }
  struct sigaction sa {};
  return ::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL;
}

int KillHook(pid_t pid, int sig) {
  if (!g_plugin.detached() && KillsSelf(pid, sig)) g_plugin.OnFatalSignal(sig);
  return ::kill(pid, sig);  // libc's, as the plugin binds it
}

}  // namespace

// Points qemu-x86_64's GOT slot of `kill` at KillHook. Returns false when
// it found none (a QEMU that links libc statically or calls it otherwise):
// a fatal signal then ends the recording without a snapshot, as before.
bool HookQemuKill() {
  struct Found {
    uint64_t* slot = nullptr;
  } found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        // The first object is the executable: qemu-x86_64.
        auto* out = static_cast<Found*>(data);
        const ElfW(Addr) base = info->dlpi_addr;
        const ElfW(Dyn)* dyn = nullptr;
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr);
        if (dyn == nullptr) return 1;
        // ld.so has relocated these d_ptr values in place (absolute
        // addresses); an unrelocated one is an offset from the base.
        auto at = [base](ElfW(Addr) p) { return p >= base ? p : base + p; };
        ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
        size_t jmprel_size = 0, rela_size = 0;
        for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
          switch (d->d_tag) {
            case DT_SYMTAB: symtab = at(d->d_un.d_ptr); break;
            case DT_STRTAB: strtab = at(d->d_un.d_ptr); break;
            case DT_JMPREL: jmprel = at(d->d_un.d_ptr); break;
            case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
            case DT_RELA: rela = at(d->d_un.d_ptr); break;
            case DT_RELASZ: rela_size = d->d_un.d_val; break;
            default: break;
          }
        }
        if (symtab == 0 || strtab == 0) return 1;
        for (auto [table, size] : {std::pair{jmprel, jmprel_size}, {rela, rela_size}}) {
          if (table == 0) continue;
          // NOLINTNEXTLINE(performance-no-int-to-ptr)
          const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
          for (size_t n = size / sizeof(ElfW(Rela)), i = 0; i < n; ++i) {
            const auto type = ELF64_R_TYPE(r[i].r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            const auto* sym = reinterpret_cast<const ElfW(Sym)*>(symtab) + ELF64_R_SYM(r[i].r_info);
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            if (std::strcmp(reinterpret_cast<const char*>(strtab) + sym->st_name, "kill") != 0)
              continue;
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            out->slot = reinterpret_cast<uint64_t*>(base + r[i].r_offset);
            return 1;
          }
        }
        return 1;
      },
      &found);
  if (found.slot == nullptr) return false;
  // The GOT is read-only after relocation (RELRO, as Debian builds QEMU).
  const long page = ::sysconf(_SC_PAGESIZE);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the page of a pointer, for mprotect
  auto* first = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(found.slot) &
                                        ~static_cast<uintptr_t>(page - 1));
  // Left writable: without BIND_NOW, lazy binding still writes its page.
  if (::mprotect(first, static_cast<size_t>(page), PROT_READ | PROT_WRITE) != 0) return false;
  *found.slot = reinterpret_cast<uint64_t>(&KillHook);
  return true;
}

void Plugin::ControlThread() {
  // --duration counts from when the guest starts running (its first
  // translated block), not from QEMU's own start-up.
  std::chrono::steady_clock::time_point start;
  bool started = false;
  for (;;) {
    int timeout = -1;
    if (opts_.duration_ms > 0) {
      if (!started && images_done_.load()) {
        start = std::chrono::steady_clock::now();
        started = true;
        duration_start_ns_.store(SteadyNs());
      }
      if (!started) {
        timeout = 2;  // look again soon
      } else {
        auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
        timeout = elapsed >= static_cast<int64_t>(opts_.duration_ms)
                      ? 0
                      : static_cast<int>(opts_.duration_ms - elapsed);
      }
    }
    pollfd p{opts_.ctl_fd, POLLIN, 0};
    int r = ::poll(&p, opts_.ctl_fd >= 0 ? 1 : 0, timeout);
    if (r == 0) {
      if (!started) continue;
      flags_.fetch_or(kReqDuration);
      opts_.duration_ms = 0;
      if (opts_.ctl_fd < 0) return;
      continue;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    char c = 0;
    const ssize_t n = ::read(opts_.ctl_fd, &c, 1);
    if (n == 0) {
      // End of file: the driver went away (a detach; had it died, QEMU
      // would have died with it) unless the program put another file at
      // the pipe's fd.
      struct stat st {};
      if (::fstat(opts_.ctl_fd, &st) == 0 && st.st_ino == ctl_ino_) Detach();
      return;
    }
    if (n != 1) return;  // the program closed the fd
    if (c == 'c') flags_.fetch_or(kReqCtrlC);
    if (c == 's') flags_.fetch_or(kReqSnapshot);
    if (c == 'd') {  // --after=detach: the driver leaves the program running
      Detach();
      return;
    }
  }
}

}  // namespace ptsnap::emulate
