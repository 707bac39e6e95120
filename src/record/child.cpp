#include "record/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ptsnap::record {
namespace {

int ShellStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

Result<Child> Child::Spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error("no command to run (usage: ptsnap run [options] -- CMD ARGS...)");
  int go[2], err[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return Error::FromErrno("pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(go[0]);
    ::close(go[1]);
    return Error::FromErrno("pipe");
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Error::FromErrno("fork");
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    ::close(go[1]);
    ::close(err[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(127);
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
      int e = errno;
      [[maybe_unused]] auto n = ::write(err[1], &e, sizeof(e));
      ::_exit(127);
    }
    ::execvp(args[0], args.data());
    int e = errno;
    [[maybe_unused]] auto n = ::write(err[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(go[0]);
  ::close(err[1]);
  return Child(pid, base::UniqueFd(go[1]), base::UniqueFd(err[0]), argv[0]);
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      go_(std::move(o.go_)),
      err_(std::move(o.err_)),
      name_(std::move(o.name_)),
      reaped_(o.reaped_),
      status_(o.status_) {}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

void Child::Kill() {
  if (pid_ > 0 && !reaped_) ::kill(pid_, SIGKILL);
}

Result<void> Child::Exec() {
  if (::write(go_.get(), "g", 1) != 1) return Error::FromErrno("starting " + name_);
  go_.reset();
  int e = 0;
  ssize_t n;
  do {
    n = ::read(err_.get(), &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  err_.reset();
  if (n == static_cast<ssize_t>(sizeof(e))) {
    int st;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    return Error::FromErrno("cannot run '" + name_ + "'", e);
  }
  // The exec succeeded: wait for the SIGTRAP stop PTRACE_TRACEME causes.
  int st = 0;
  if (::waitpid(pid_, &st, 0) < 0) return Error::FromErrno("waiting for " + name_);
  if (!WIFSTOPPED(st)) {
    reaped_ = true;
    status_ = ShellStatus(st);
    return Error("'" + name_ + "' exited before it could be traced");
  }
  return Ok();
}

Result<void> Child::Resume() {
  if (::ptrace(PTRACE_DETACH, pid_, nullptr, nullptr) != 0)
    return Error::FromErrno("detaching from " + name_);
  return Ok();
}

bool Child::Poll(int* status) {
  if (reaped_) {
    *status = status_;
    return true;
  }
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
    reaped_ = true;
    status_ = ShellStatus(st);
    *status = status_;
    return true;
  }
  return false;
}

int Child::Wait() {
  while (!reaped_) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, 0);
    if (r < 0 && errno != EINTR) break;
    if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
      reaped_ = true;
      status_ = ShellStatus(st);
    }
  }
  return status_;
}

}  // namespace ptsnap::record
