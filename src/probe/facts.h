// What `ptsnap probe` learns about a machine before it judges anything.
//
// GatherFacts() does all of the probe's I/O: it reads the /sys and /proc
// trees under ProbeEnv::root, asks CPUID, looks up the environment and PATH,
// and (with live_syscalls) tries perf_event_open on this process. It keeps
// what it found in a ProbeFacts, a plain struct with no open files: the
// checks (checks.h) are pure functions of it, so tests build one by hand.
// GatherFacts never fails; a read that failed is kept as its Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probe/probe.h"
#include "ptsnap/result.h"
#include "sys/cpuid.h"
#include "sys/kallsyms.h"
#include "sys/kcore.h"
#include "sys/kernel_version.h"
#include "sys/pmu.h"
#include "sys/privileges.h"

namespace ptsnap::probe {

// /proc/kcore, as far as the probe got with it. Each step is tried only when
// the one before it succeeded.
struct KcoreFacts {
  bool exists = false;
  // st_mode & 07777; nullopt when the file could not be stat'ed.
  std::optional<unsigned> mode;
  // Opening it and parsing its ELF headers: tried when it exists and
  // KcoreRefusals() (checks.h) finds nothing that refuses this process.
  Result<sys::KcoreHeader> header = Error("not opened");
  // Reading 16 bytes at _stext: tried when the header parsed, kallsyms gave
  // the kernel text range (KernelTextRange) and a PT_LOAD covers it.
  Result<void> text_read = Error("not read");
};

// The uprobe the live checks try on ptsnap_probe_target (probe's own code).
struct UprobeFacts {
  // /sys/bus/event_source/devices/uprobe/type could be read...
  bool type_readable = false;
  // ...and holds a decimal number that fits perf_event_attr.type.
  std::optional<uint32_t> type;
  // Set when /proc/self/maps could not be read.
  std::optional<Error> maps_error;
  // The file whose mapping holds the target, and the target's offset in it;
  // path empty when no file-backed mapping holds it.
  std::string path;
  uint64_t offset = 0;
  // perf_event_open of the uprobe: tried when every step above succeeded.
  Result<void> open = Error("not tried");
};

// perf_event_open tries on this process (ProbeEnv::live_syscalls).
struct LiveFacts {
  Result<void> dummy = Error("not tried");  // a software dummy event
  uint64_t breakpoint_addr = 0;             // where the execute breakpoint went
  Result<void> breakpoint = Error("not tried");
  UprobeFacts uprobe;
};

// Everything the checks look at, in the report's section order.
struct ProbeFacts {
  // Kernel: /proc/sys/kernel/osrelease parsed, and whether the file exists
  // (an existing file that does not parse is a `files` warning).
  Result<sys::KernelVersion> kernel = Error("not read");
  bool osrelease_exists = false;

  // CPU: cpuid_read is false when ProbeEnv had no CPUID source (--root
  // trees); cpu.available is false when CPUID did not answer.
  bool cpuid_read = false;
  sys::CpuInfo cpu;

  // The intel_pt PMU (its unreadable files are in pmu.warnings).
  sys::PmuInfo pmu;

  // Privileges, sysctls and lockdown (unreadable files in priv.warnings).
  sys::Privileges priv;

  // The kcore gate: the two environment switches (nullopt when unset),
  // /proc/kallsyms (summary only, no symbols kept) and /proc/kcore.
  std::optional<std::string> ptsnap_no_kcore;            // PTSNAP_NO_KCORE
  std::optional<std::string> magic_trace_perf_no_kcore;  // MAGIC_TRACE_PERF_NO_KCORE
  Result<sys::Kallsyms> kallsyms = Error("not read");
  KcoreFacts kcore;

  // Memory: /sys/devices/system/cpu/online parsed, and whether it exists.
  Result<std::vector<int>> online_cpus = Error("not read");
  bool online_cpus_exists = false;

  // Live perf_event_open tries; nullopt when live syscalls are off.
  std::optional<LiveFacts> live;

  // The first executable qemu-x86_64 in $PATH.
  std::optional<std::string> qemu;
};

// Reads everything the checks need from `env` (see the top of this file).
ProbeFacts GatherFacts(const ProbeEnv& env);

}  // namespace ptsnap::probe
