// Starting the program of `ptsnap run` so that events can be opened on it
// before it runs a single instruction of the new image.
//
// Spawn() forks; the child sets PR_SET_PDEATHSIG (unless it is to outlive
// ptsnap: --after=detach), asks to be traced
// (PTRACE_TRACEME) and blocks reading a pipe. The parent opens its events
// (with enable_on_exec) and calls Exec(): the child execs and stops with
// SIGTRAP right after the exec, when its final mappings exist, so a PIE
// trigger address can be resolved. Resume() detaches and lets it run.
// An exec failure (command not found) comes back through a CLOEXEC pipe as
// an error naming the command; a refused PTRACE_TRACEME (Yama's
// kernel.yama.ptrace_scope 3, a seccomp filter) as probe::ExplainTracemeFailure's.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::record {

// ptsnap holds an fd or more per traced thread: the CLI raises its soft
// RLIMIT_NOFILE to the hard limit once, at its start (perf raises it when it
// runs out, rlimit__increase_nofile). The programs Spawn starts get back the
// soft limit they would have had. The library never calls it on its own: an
// agent's limits are the agent's.
void RaiseFdLimit();

// waitpid(2), retried while a signal interrupts it (EINTR: the recorder's
// handlers are installed without SA_RESTART). Returns what waitpid returns.
pid_t WaitPid(pid_t pid, int* status, int options);

class Child {
 public:
  // fork(2), injectable so tests can make it fail.
  using ForkFn = pid_t (*)();
  // Every fd Spawn creates is closed again when it fails. `inherit_fds`
  // (close-on-exec in ptsnap) stay open in the program. `die_with_parent`:
  // PR_SET_PDEATHSIG = SIGKILL, so the program dies with the thread that
  // spawned it. `env` ("NAME=VALUE" each) is added to ptsnap's environment
  // for the program, replacing a variable of the same name.
  static Result<Child> Spawn(const std::vector<std::string>& argv, ForkFn fork_fn = &::fork,
                             const std::vector<int>& inherit_fds = {}, bool die_with_parent = true,
                             const std::vector<std::string>& env = {});
  Child(Child&& o) noexcept;
  Child& operator=(Child&&) = delete;
  // Kills (SIGKILL) and reaps the child unless it was waited for.
  ~Child();

  // Lets the child exec and waits for its post-exec stop.
  Result<void> Exec();
  // PTRACE_DETACH: the program runs.
  Result<void> Resume();
  // waitpid(WNOHANG): true once the child has exited; `status` as a shell
  // reports it (exit code, or 128 + signal).
  bool Poll(int* status);
  // Blocking wait.
  int Wait();
  // Lets the program go (--after=detach): it is neither killed nor reaped
  // by this object any more; whoever is its parent then reaps it.
  void Release() { reaped_ = true; }
  void Kill();
  // The signal that killed the program once it was reaped; 0 when it exited.
  [[nodiscard]] int term_signal() const { return term_signal_; }

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  Child(pid_t pid, base::UniqueFd go, base::UniqueFd err, std::string name)
      : pid_(pid), go_(std::move(go)), err_(std::move(err)), name_(std::move(name)) {}
  pid_t pid_ = -1;
  base::UniqueFd go_, err_;
  std::string name_;
  bool reaped_ = false;
  int status_ = 0;
  int term_signal_ = 0;
};

}  // namespace ptsnap::record
