// Shell commands for integration tests that drive external tools (perf,
// objdump, the ptsnap binary): exit code and captured output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace ptsnap::testing {

struct ShellRun {
  int status = -1;  // exit code; -1 when the command did not exit normally
  std::string out;  // what the command wrote (its own redirections decide which streams)
};

// `cmd` through /bin/sh exactly as given.
inline ShellRun RunShellRaw(const std::string& cmd) {
  ShellRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// `cmd` with stderr merged into the captured output.
inline ShellRun RunShell(const std::string& cmd) { return RunShellRaw(cmd + " 2>&1"); }

// The variable's value, "" when unset.
inline std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The value of a variable meson sets for the test; a failure when unset
// (a lost `env:` line must not turn checks into skips).
inline std::string RequiredEnv(const char* name) {
  const char* v = std::getenv(name);
  EXPECT_NE(v, nullptr) << name << " must be set (by meson test)";
  return v ? v : "";
}

// Debian installs perf as perf_<version> with a `perf` wrapper.
inline bool HavePerf() { return RunShell("command -v perf || command -v perf_6.1").status == 0; }

}  // namespace ptsnap::testing
