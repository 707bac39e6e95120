// Following execve (docs/emulation.md, "exec"): reading the guest's
// arguments, handing the recording over to the qemu-x86_64 that runs the
// new program (ExecCarry), and adopting it there.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

namespace {

// Guest memory: guest_base is 0 in QEMU 7.2 user mode, so guest addresses
// are host addresses. Read through process_vm_readv, so a bad pointer from
// the guest is a failed read, not a crash.
bool ReadGuest(uint64_t addr, void* out, size_t n) {
  iovec local{out, n};
  // Guest addresses are integers; process_vm_readv wants them as pointers.
  iovec remote{reinterpret_cast<void*>(addr), n};  // NOLINT(performance-no-int-to-ptr)
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

// A NUL-terminated guest string (read a page at a time: the next page may
// be unmapped); nullopt where the kernel's execve would fail with EFAULT or
// E2BIG (MAX_ARG_STRLEN, 32 pages).
std::optional<std::string> ReadGuestString(uint64_t addr) {
  constexpr size_t kPage = 4096, kMax = 32 * kPage;
  std::string out;
  char buf[kPage];
  while (out.size() < kMax) {
    const size_t n = kPage - (addr & (kPage - 1));
    if (!ReadGuest(addr, buf, n)) return std::nullopt;
    if (const void* nul = std::memchr(buf, '\0', n); nul != nullptr) {
      out.append(buf, static_cast<const char*>(nul) - buf);
      return out;
    }
    out.append(buf, n);
    addr += n;
  }
  return std::nullopt;
}

// A guest argv or envp: pointers up to a null one (a null array is empty,
// as Linux takes it).
std::optional<std::vector<std::string>> ReadGuestStrings(uint64_t array) {
  std::vector<std::string> out;
  if (array == 0) return out;
  constexpr size_t kMaxStrings = 1 << 20;  // far above what ARG_MAX lets through
  for (size_t i = 0; i < kMaxStrings; ++i) {
    uint64_t p = 0;
    if (!ReadGuest(array + i * sizeof(p), &p, sizeof(p))) return std::nullopt;
    if (p == 0) return out;
    std::optional<std::string> s = ReadGuestString(p);
    if (!s) return std::nullopt;
    out.push_back(std::move(*s));
  }
  return std::nullopt;
}

// The path of open file `fd` ("": none, such as a memfd's or a deleted
// file's).
std::string FdPath(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof(path) - 1);
  if (n <= 0 || path[0] != '/') return "";
  std::string p(path, static_cast<size_t>(n));
  return ::access(p.c_str(), F_OK) == 0 ? p : "";
}

// QEMU serves /proc/self/exe (and /proc/PID/exe of its own pid) as the
// guest's program (linux-user/syscall.c, is_proc_myself): an execve of it
// runs the program again, not QEMU.
bool IsProcSelfExe(const std::string& path) {
  return path == "/proc/self/exe" || path == "/proc/" + std::to_string(::getpid()) + "/exe";
}

// Sets or clears FD_CLOEXEC on `fd` (none: -1).
void SetCloexec(int fd, bool on) {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, on ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC));
}

}  // namespace

std::string Plugin::CarryPath() const { return opts_.out + "/exec-carry." + std::to_string(pid_); }

// `t`'s state for the image an exec starts. Caller holds mu_ (and, for
// another thread, accepts that it runs on meanwhile: the kernel kills it
// at the exec, so what it does after this copy is lost, as its packets not
// yet drained are).
CarriedThread Plugin::Carried(ThreadState* t, bool self, bool exited) {
  CarriedThread c;
  c.pid = t->pid;
  c.tid = t->tid;
  c.clock = t->clock;
  c.insns = t->insns;
  c.hash = t->hash;
  c.exited = exited;
  c.self = self;
  std::lock_guard lock(t->mu);
  c.wrapped = t->wrapped;
  for (const auto& chunk : t->ring) c.ring.push_back(chunk);
  if (opts_.full) {
    c.file = t->file;
    if (self && t->fd) c.fd = t->fd.get();
  }
  return c;
}

// Replaces this process, as execve would, with qemu-x86_64 running
// `target` with this plugin, handing the recording over (ExecCarry): the
// calling thread's stream goes on in the new image, the other threads end
// there (the kernel kills them). Returns only when that execve failed, with
// its errno; nothing has changed then.
int Plugin::FollowExec(ThreadState* self, const ExecTarget& target,
                       const std::vector<std::string>& envp) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return errno;
  const std::string qemu(exe, static_cast<size_t>(n));
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
    Publish(self);
  }
  ExecCarry carry;
  carry.clock = self != nullptr ? self->clock : Now();
  carry.ctl_ino = ctl_ino_;
  carry.slow_skipped = slow_skipped_.load();
  carry.main = main_;
  if (opts_.duration_ms > 0) {
    const int64_t since = duration_start_ns_.load();
    uint64_t left = opts_.duration_ms;
    if (since != 0) {
      const int64_t elapsed_ms = (SteadyNs() - since) / 1'000'000;
      left =
          elapsed_ms >= static_cast<int64_t>(left) ? 1 : left - static_cast<uint64_t>(elapsed_ms);
    }
    carry.duration_left_ms = left;
  }
  {
    std::lock_guard lock(mu_);
    carry.next_seq = seq_.load();
    for (Vcpu& v : vcpus_)
      if (ThreadState* t = v.thread; t != nullptr)
        carry.threads.push_back(Carried(t, t == self, false));
    for (ThreadState* t : finished_) carry.threads.push_back(Carried(t, false, true));
  }
  int jit_fd = -1;
  {
    std::lock_guard lock(jit_mu_);
    if (jit_fd_) jit_fd = jit_fd_.get();
  }
  carry.jit_fd = jit_fd;
  const std::string carry_path = CarryPath();
  {
    base::UniqueFd fd(::open(carry_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return errno;
    if (!base::WriteAll(fd.get(), FormatExecCarry(carry), "the exec hand-over file")) {
      ::unlink(carry_path.c_str());
      return EIO;
    }
  }
  std::string plugin = EscapePluginArg(plugin_path_);
  for (const std::string& a : opts_.args) plugin += "," + EscapePluginArg(a);
  plugin += ",exec=" + EscapePluginArg(carry_path);
  const std::vector<std::string> cmd = QemuExecCommand(qemu, plugin, target);
  std::vector<char*> argv, env;
  for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : envp) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  // The files the new image writes on stay open across it.
  int stream_fd = -1;
  for (const CarriedThread& t : carry.threads)
    if (t.self) stream_fd = t.fd;
  SetCloexec(stream_fd, false);
  SetCloexec(jit_fd, false);
  ::execve(qemu.c_str(), argv.data(), env.data());
  const int err = errno;
  SetCloexec(stream_fd, true);
  SetCloexec(jit_fd, true);
  ::unlink(carry_path.c_str());
  return err;
}

// The guest calls execve or execveat (before QEMU runs it). QEMU 7.2 would
// run the new program natively, untraced; an x86-64 program (or a script
// whose interpreter is one) is followed instead: FollowExec replaces the
// process with QEMU running it. What QEMU cannot run goes natively as
// before, with everything on disk first (a successful execve never returns
// and atexit never runs) and a note; an execve that will fail (execvp's
// PATH search) changes nothing.
void Plugin::OnExec(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                    uint64_t a5) {
  ThreadState* self = vcpus_[vcpu].thread;
  // execve(path, argv, envp); execveat(dirfd, path, argv, envp, flags).
  const bool at = num == __NR_execveat;
  std::optional<std::string> path = ReadGuestString(at ? a2 : a1);
  std::optional<std::vector<std::string>> argv = ReadGuestStrings(at ? a3 : a2);
  std::optional<std::vector<std::string>> envp = ReadGuestStrings(at ? a4 : a3);
  if (!path || !argv || !envp) return;  // EFAULT, E2BIG: the exec fails
  ExecTarget target;
  const auto dirfd = static_cast<int>(a1);
  if (at && path->empty() && (a5 & AT_EMPTY_PATH) != 0) {
    path = FdPath(dirfd);  // fexecve
  } else if (at && !path->empty() && (*path)[0] != '/' && dirfd != AT_FDCWD) {
    const std::string dir = FdPath(dirfd);
    path = dir.empty() ? "" : dir + "/" + *path;
  }
  if (path->empty()) {
    target.kind = ExecTarget::Kind::kNative;
    target.why = "execveat of an open file that has no path QEMU could load";
  } else {
    if (IsProcSelfExe(*path)) path = qemu_plugin_path_to_binary();
    target = ResolveExec(*path, std::move(*argv), ReadExecFile);
  }
  if (target.kind == ExecTarget::Kind::kFails) return;
  if (target.kind == ExecTarget::Kind::kFollow) {
    const int err = FollowExec(self, target, *envp);
    target.why = "starting qemu-x86_64 for it failed: " + std::string(std::strerror(err));
  }
  // If the native execve fails after all, tracing goes on and the later
  // lines supersede these.
  Report(NoteMessage{"execve: " + *path + " runs outside the emulator and is not traced (" +
                     target.why + ")"});
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
  }
  TakeSnapshot("exit", "execve", self);
  if (opts_.full) {
    std::lock_guard lock(mu_);
    for (Vcpu& v : vcpus_)
      if (v.thread != nullptr) FullStreamLine(v.thread);
  }
  Report(DoneMessage{Now()});
}

// This image was started by a followed execve (plugin argument exec=FILE):
// the recording goes on from the state the plugin in the old image handed
// over. The calling thread's stream is adopted by this image's first
// thread (StartThread); the others ended at the exec.
void Plugin::AdoptCarry(const std::string& path) {
  auto text = base::ReadFile(path, size_t{1} << 34);
  ::unlink(path.c_str());
  Result<ExecCarry> parsed =
      text ? ParseExecCarry(*text) : Result<ExecCarry>(std::move(text).error());
  if (!parsed) {
    Report(NoteMessage{"execve: the state before the exec was lost (" + parsed.error().ToString() +
                       "): the trace starts at the new program"});
    return;
  }
  ExecCarry& c = *parsed;
  seq_.store(c.next_seq);
  // The new program starts one tick after the execve retired: the exec's
  // records (COMM, the new image's MMAP2s) come strictly after the last
  // block of the old program, as the kernel's do on hardware, so a decoder
  // switching address spaces at the latest timing packet it has read
  // (the old stream's last CYC, at the execve's time) still decodes that
  // block in the old space.
  const uint64_t start = c.clock + 1;
  clock_.store(start);
  clone_clock_.store(start);
  start_time_ = start;
  slow_skipped_.store(c.slow_skipped);
  main_ = c.main;
  opts_.duration_ms = c.duration_left_ms;
  // The control pipe is the driver's only if its fd still is (the program
  // may have closed it and opened something else there).
  if (opts_.ctl_fd >= 0 && (c.ctl_ino == 0 || c.ctl_ino != ctl_ino_)) opts_.ctl_fd = -1;
  if (c.jit_fd >= 0) {
    SetCloexec(c.jit_fd, true);
    jit_fd_.reset(c.jit_fd);
  }
  for (CarriedThread& t : c.threads) {
    if (t.self) {
      SetCloexec(t.fd, true);
      adopt_ = std::move(t);
      continue;
    }
    // The kernel killed the other threads at the exec.
    auto* ts = new ThreadState(PtStreamOptions{});
    ts->pid = t.pid;
    ts->tid = t.tid;
    ts->clock = std::max(t.clock, c.clock);
    ts->insns = t.insns;
    ts->hash = t.hash;
    ts->wrapped = t.wrapped;
    ts->file = t.file;
    for (std::vector<uint8_t>& chunk : t.ring) {
      ts->ring_bytes += chunk.size();
      ts->ring.push_back(std::move(chunk));
    }
    if (!t.exited) Report(ExitMessage(ts));
    if (opts_.full) {
      if (!ts->file.empty()) FullStreamLine(ts);
      delete ts;
    } else {
      finished_.push_back(ts);
    }
  }
}

}  // namespace ptsnap::emulate
