// What the user asked `ptsnap run` / `ptsnap attach` to record. Filled by the
// CLI (src/cli/cmd_record.cpp), consumed by the hardware recorder
// (src/record) and the emulated source (src/emulate). Plain data, no I/O.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ptsnap::record {

enum class TraceScope { kUser, kUserKernel, kKernelOnly };

struct TimerResolution {
  // "low", "normal", "high" or "custom"; custom uses the fields below.
  std::string preset = "normal";
  std::optional<bool> cyc, noretcomp;
  std::optional<uint32_t> cyc_thresh, mtc_period, psb_period;
  std::optional<bool> mtc;
};

struct RecordOptions {
  std::vector<std::string> command;  // run: argv
  std::vector<pid_t> pids;           // attach
  std::filesystem::path output;      // decoded output; "" = trace.fxt.gz
  std::filesystem::path trace_dir;   // raw recording; "" = beside output
  std::string trigger;               // "", symbol, "addr:HEX", or "." (stop indicator)
  bool multi_snapshot = false;
  bool multi_thread = false;
  bool full_execution = false;
  uint64_t snapshot_size = 0;  // bytes; 0 = the probe's default
  TraceScope scope = TraceScope::kUser;
  TimerResolution timer;
  std::optional<std::chrono::milliseconds> duration;
  bool copy_binaries = false;
  bool emulate = false;
  bool no_decode = false;
};

}  // namespace ptsnap::record
