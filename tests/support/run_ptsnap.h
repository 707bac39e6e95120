// Runs the built `ptsnap` binary the way a user would, for CLI tests.
// meson passes the binary's path in PTSNAP_BIN (see src/cli/meson.build).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/shell.h"

namespace ptsnap::testing {

struct PtsnapRun {
  int rc = -1;      // exit code; -1 when it did not exit normally
  std::string out;  // stdout, and stderr unless stdout_only
};

struct PtsnapRunOptions {
  std::string cwd;  // "" = the test's own
  bool stdout_only = false;
};

// `ptsnap ARGS` through the shell (ARGS is shell words, quote paths).
inline PtsnapRun RunPtsnap(const std::string& args, const PtsnapRunOptions& opts = {}) {
  const char* bin = std::getenv("PTSNAP_BIN");
  EXPECT_NE(bin, nullptr) << "PTSNAP_BIN must name the ptsnap binary (set by meson test)";
  PtsnapRun r;
  if (bin == nullptr) return r;
  std::string cmd;
  if (!opts.cwd.empty()) cmd = "cd '" + opts.cwd + "' && ";
  cmd += std::string("'") + bin + "' " + args + (opts.stdout_only ? " 2>/dev/null" : " 2>&1");
  const ShellRun run = RunShellRaw(cmd);
  r.rc = run.status;
  r.out = run.out;
  return r;
}

// `ptsnap ARGS...` without a shell, stdin and stdout on /dev/null, in `cwd`
// ("" = the test's own). Returns the exit code (128+N for signal N) and stderr.
inline PtsnapRun RunPtsnapArgv(std::vector<std::string> args, const std::string& cwd = "") {
  const char* bin = std::getenv("PTSNAP_BIN");
  EXPECT_NE(bin, nullptr) << "PTSNAP_BIN must name the ptsnap binary (set by meson test)";
  PtsnapRun r;
  if (bin == nullptr) return r;
  int errp[2];
  if (pipe(errp) != 0) return r;
  std::vector<char*> argv{const_cast<char*>(bin)};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    dup2(errp[1], 2);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    execv(bin, argv.data());
    _exit(127);
  }
  close(errp[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(errp[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  close(errp[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace ptsnap::testing
