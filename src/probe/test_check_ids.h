// Test support for the probe's tests: every check id, in report order
// (docs/probe.md lists the same).
#pragma once

#include <string>
#include <vector>

namespace ptsnap::probe::test_support {

inline const std::vector<std::string> kAllCheckIds = {"kernel.version",    "kernel.features",
                                                      "cpu.identity",      "cpu.hypervisor",
                                                      "cpu.pt_cpuid",      "cpu.tsc_ratio",
                                                      "pmu.intel_pt",      "pmu.format",
                                                      "pmu.caps",          "pmu.addr_filters",
                                                      "pmu.timing",        "pmu.timer_resolution",
                                                      "priv.user",         "priv.paranoid",
                                                      "priv.ptrace_scope", "priv.scopes",
                                                      "kcore.env",         "kcore.kernel_version",
                                                      "kcore.kallsyms",    "kcore.file",
                                                      "kcore.lockdown",    "mem.mlock",
                                                      "mem.snapshot_size", "live.dummy",
                                                      "live.breakpoint",   "live.uprobe",
                                                      "emulate.qemu",      "files",
                                                      "verdict.intel_pt",  "verdict.modes"};

}  // namespace ptsnap::probe::test_support
