// ptsnap::Probe(): can this machine record Intel PT, in which scopes, with
// kernel images; and if not, why not and what to do. The same facts as
// `ptsnap probe` (docs/probe.md lists every check id and the JSON schema).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptsnap/export.h"

namespace ptsnap {

struct ProbeCheck {
  std::string id;      // stable, dotted: "pmu.intel_pt"
  std::string title;   // short human label
  std::string status;  // "ok", "warn", "fail" or "info"
  std::string value;   // what was found
  std::string fix;     // one line: what to do; empty when nothing to do
};

struct ProbeResult {
  // The verdict: hardware recording possible for at least the user scope.
  bool pt_available = false;
  std::string pt_reason;  // why not, when !pt_available
  // Stable names: "intel_pt-user", "intel_pt-kernel",
  // "intel_pt-system-wide", "kcore", "emulated".
  std::vector<std::string> modes;
  bool user_scope = false, kernel_scope = false, system_wide = false;
  bool kcore_usable = false;            // kernel images can be snapshotted
  uint64_t default_snapshot_bytes = 0;  // per traced thread or CPU
  std::vector<ProbeCheck> checks;       // in docs/probe.md's order
  std::vector<std::string> warnings;    // files that existed but could not be read
  std::string json;                     // exactly what `ptsnap probe --json` prints
};

// Reads /sys, /proc and CPUID and opens a few software perf events on this
// process (closed again). Never fails: every problem is a check.
PTSNAP_API ProbeResult Probe();

// The library's version, "0.1.0" (PTSNAP_VERSION_STRING in ptsnap/version.h
// is the headers').
PTSNAP_API const char* Version();

}  // namespace ptsnap
