// Runs ptsnap-stepcount (tests/support/stepcount.cpp, the native
// single-step instruction counter) and reads its `call` lines, or with
// --all-calls its `frame` and `open` lines, for the tests that compare with
// it (timing, perf interop, the call-stack oracle).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::testing {

// `call NAME DEPTH BEGIN DURATION THREAD`: THREAD 0 is the main thread,
// then in order of creation; DEPTH counts the tracked frames below.
struct SteppedCall {
  std::string name;
  uint64_t depth = 0, begin = 0, duration = 0;
  int thread = 0;
};

// Single-steps `command` (a program and its arguments, as shell words) to
// its exit, tracking `funcs`. The program's own output is discarded; a
// failed run is a test failure.
inline std::vector<SteppedCall> RunStepcount(const std::string& stepcount_bin,
                                             const std::string& command,
                                             const std::vector<std::string>& funcs) {
  TempDir tmp;
  const std::string out = (tmp.path() / "steps.txt").string();
  std::string cmd = "'" + stepcount_bin + "'";
  for (const auto& f : funcs) cmd += " --func " + f;
  cmd += " -o '" + out + "' -- " + command + " >/dev/null 2>&1";
  ShellRun r = RunShellRaw(cmd);
  EXPECT_EQ(r.status, 0) << cmd;
  std::vector<SteppedCall> calls;
  std::ifstream in(out);
  std::string word;
  while (in >> word) {
    if (word != "call") {
      std::getline(in, word);
      continue;
    }
    SteppedCall c;
    in >> c.name >> c.depth >> c.begin >> c.duration >> c.thread;
    calls.push_back(c);
  }
  return calls;
}

// --all-calls: `frame BEGIN DURATION DEPTH THREAD TARGET SITE`, or
// `open BEGIN DEPTH THREAD TARGET SITE` for a frame its thread exited in.
struct SteppedFrame {
  uint64_t begin = 0, duration = 0, depth = 0;
  int thread = 0;
  uint64_t target = 0, site = 0;  // callee entry, call instruction
  bool open = false;
};

// Single-steps `command` with --all-calls: a frame per call instruction,
// in order of entry per thread.
inline std::vector<SteppedFrame> RunStepcountAllCalls(const std::string& stepcount_bin,
                                                      const std::string& command) {
  TempDir tmp;
  const std::string out = (tmp.path() / "frames.txt").string();
  const std::string cmd =
      "'" + stepcount_bin + "' --all-calls -o '" + out + "' -- " + command + " >/dev/null 2>&1";
  ShellRun r = RunShellRaw(cmd);
  EXPECT_EQ(r.status, 0) << cmd;
  std::vector<SteppedFrame> frames;
  std::ifstream in(out);
  std::string word, target, site;
  while (in >> word) {
    SteppedFrame f;
    if (word == "frame") {
      in >> f.begin >> f.duration >> f.depth >> f.thread >> target >> site;
    } else if (word == "open") {
      f.open = true;
      in >> f.begin >> f.depth >> f.thread >> target >> site;
    } else {
      std::getline(in, word);
      continue;
    }
    f.target = std::stoull(target, nullptr, 16);
    f.site = std::stoull(site, nullptr, 16);
    frames.push_back(f);
  }
  return frames;
}

}  // namespace ptsnap::testing
