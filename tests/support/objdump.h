// objdump's listing of a stretch of code, for tests that check instruction
// counts against an independent disassembler.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/shell.h"

namespace ptsnap::testing {

struct ObjdumpInsn {
  uint64_t addr = 0;  // ELF vaddr
  std::string text;   // "mov    %eax,%ecx"
};

// The instructions objdump lists in [lo, hi) of the ELF file `path`, in
// address order; empty when objdump fails.
inline std::vector<ObjdumpInsn> ObjdumpInstructions(const std::string& path, uint64_t lo,
                                                    uint64_t hi) {
  char range[96];
  std::snprintf(range, sizeof range, " --start-address=0x%llx --stop-address=0x%llx ",
                static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi));
  const ShellRun r = RunShellRaw("objdump -d --no-show-raw-insn" + std::string(range) + path);
  std::vector<ObjdumpInsn> insns;
  if (r.status != 0) return insns;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    // "    11ad:\tmov    %eax,%ecx"
    const size_t colon = line.find(":\t");
    if (line.rfind("  ", 0) != 0 || colon == std::string::npos) continue;
    insns.push_back({std::stoull(line.substr(0, colon), nullptr, 16), line.substr(colon + 2)});
  }
  return insns;
}

}  // namespace ptsnap::testing
