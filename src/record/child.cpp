#include "record/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "base/file_util.h"
#include "base/root_path.h"
#include "probe/explain.h"
#include "sys/privileges.h"

namespace ptsnap::record {
namespace {

int ShellStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// What the child reports through the error pipe before it _exits: which step
// failed and its errno.
enum class Step : int { kTraceme = 1, kExec = 2 };
struct ChildFailure {
  Step step;
  int errnum;
};

// The soft RLIMIT_NOFILE before RaiseFdLimit, for the programs ptsnap
// starts; unset while it was not raised.
std::optional<rlimit> g_fd_limit_before;

}  // namespace

void RaiseFdLimit() {
  rlimit lim{};
  if (g_fd_limit_before || ::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max)
    return;
  const rlimit before = lim;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) g_fd_limit_before = before;
}

pid_t WaitPid(pid_t pid, int* status, int options) {
  pid_t r;
  do {
    r = ::waitpid(pid, status, options);
  } while (r < 0 && errno == EINTR);
  return r;
}

Result<Child> Child::Spawn(const std::vector<std::string>& argv, ForkFn fork_fn,
                           const std::vector<int>& inherit_fds, bool die_with_parent,
                           const std::vector<std::string>& env) {
  if (argv.empty()) return Error("no command to run (usage: ptsnap run [options] -- CMD ARGS...)");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error::FromErrno("pipe");
  base::UniqueFd go_read(fds[0]), go_write(fds[1]);
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error::FromErrno("pipe");
  base::UniqueFd err_read(fds[0]), err_write(fds[1]);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The program's environment, built before the fork: only
  // async-signal-safe calls may follow it in the child.
  std::vector<char*> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view var(*e);
    const std::string_view name = var.substr(0, var.find('='));
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& o) {
      return o.size() > name.size() && o.compare(0, name.size(), name) == 0 &&
             o[name.size()] == '=';
    });
    if (!replaced) envp.push_back(*e);
  }
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = fork_fn();
  if (pid < 0) return Error::FromErrno("fork");  // the UniqueFds close all four
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    const int go = go_read.get(), err = err_write.get();
    ::close(go_write.get());
    ::close(err_read.get());
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    char c;
    if (::read(go, &c, 1) != 1) ::_exit(127);
    for (int fd : inherit_fds) ::fcntl(fd, F_SETFD, 0);
    if (g_fd_limit_before) ::setrlimit(RLIMIT_NOFILE, &*g_fd_limit_before);
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
      const ChildFailure f{Step::kTraceme, errno};
      [[maybe_unused]] auto n = ::write(err, &f, sizeof(f));
      ::_exit(127);
    }
    ::execvpe(args[0], args.data(), envp.data());
    const ChildFailure f{Step::kExec, errno};
    [[maybe_unused]] auto n = ::write(err, &f, sizeof(f));
    ::_exit(127);
  }
  go_read.reset();
  err_write.reset();
  return Child(pid, std::move(go_write), std::move(err_read), argv[0]);
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
    WaitPid(pid_, &st, 0);
  }
}

void Child::Kill() {
  if (pid_ > 0 && !reaped_) ::kill(pid_, SIGKILL);
}

Result<void> Child::Exec() {
  if (base::WriteToPipe(go_.get(), "g", 1) != 1) return Error::FromErrno("starting " + name_);
  go_.reset();
  ChildFailure f{};
  ssize_t n;
  do {
    n = ::read(err_.get(), &f, sizeof(f));
  } while (n < 0 && errno == EINTR);
  err_.reset();
  if (n == static_cast<ssize_t>(sizeof(f))) {
    int st;
    WaitPid(pid_, &st, 0);
    reaped_ = true;
    if (f.step == Step::kTraceme)
      return Error(probe::ExplainTracemeFailure(
                       f.errnum, sys::ReadPrivileges(base::RootPath()).ptrace_scope, name_),
                   f.errnum);
    return Error::FromErrno("cannot run '" + name_ + "'", f.errnum);
  }
  // The exec succeeded: wait for the SIGTRAP stop PTRACE_TRACEME causes.
  int st = 0;
  if (WaitPid(pid_, &st, 0) < 0) return Error::FromErrno("waiting for " + name_);
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
  pid_t r = WaitPid(pid_, &st, WNOHANG);
  if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
    reaped_ = true;
    status_ = ShellStatus(st);
    term_signal_ = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    *status = status_;
    return true;
  }
  return false;
}

int Child::Wait() {
  while (!reaped_) {
    int st = 0;
    pid_t r = WaitPid(pid_, &st, 0);
    if (r < 0) break;
    if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
      reaped_ = true;
      status_ = ShellStatus(st);
      term_signal_ = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
  }
  return status_;
}

}  // namespace ptsnap::record
