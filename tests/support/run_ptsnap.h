// Runs the built `ptsnap` binary the way a user would, for CLI tests.
// meson passes the binary's path in PTSNAP_BIN (see src/cli/meson.build).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

}  // namespace ptsnap::testing
