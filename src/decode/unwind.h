// DWARF unwinding of sampled user stacks (callgraph "dwarf"): the registers
// and the stack copy of a sample (PERF_SAMPLE_REGS_USER, STACK_USER) are
// unwound with elfutils' libdwfl over the CFI of the process's mapped files,
// as perf's unwind-libdw.c does. docs/decoding.md, "Sampled traces".
//
// One Dwfl per address space (a process's mapping set: CodeMapping lists
// do not change once the sideband is applied), created on first use and
// kept, so the modules' CFI is read once. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "decode/address_spaces.h"
#include "decode/samples.h"
#include "decode/symbols.h"

namespace ptsnap::decode {

struct UnwindResult {
  std::vector<StackFrame> frames;  // innermost first: the user IP, then return addresses
  // The unwind stopped before the outermost frame: an error (no CFI for a
  // pc, a read outside the stack copy) or the depth cap. `frames` holds what
  // was found up to there.
  bool truncated = false;
  std::string error;  // libdwfl's message when it stopped on an error
};

class UserUnwinder {
 public:
  // `mappings(space)` lists the code mappings of an address space (the
  // PtDecoder's CodeMappings); `symbolizer` loads the ELF files (for their
  // load segments). Both outlive this.
  using MappingsFn = std::function<std::vector<CodeMapping>(int32_t space)>;
  UserUnwinder(MappingsFn mappings, Symbolizer* symbolizer);
  ~UserUnwinder();
  UserUnwinder(const UserUnwinder&) = delete;
  UserUnwinder& operator=(const UserUnwinder&) = delete;

  // Unwinds `s` (which must have regs_abi != 0 and IP, SP in regs_mask) in
  // address space `space`, at most `max_depth` frames. Never fails: a sample
  // with no registers or no modules yields no frames and `truncated`.
  UnwindResult Unwind(int32_t space, const Sample& s, size_t max_depth);

  // One space's Dwfl and what its callbacks read (public for the C callbacks).
  struct Space;

 private:
  Space* GetSpace(int32_t space);

  MappingsFn mappings_;
  Symbolizer* symbolizer_;
  std::map<int32_t, std::unique_ptr<Space>> spaces_;
  std::map<std::string, base::UniqueFd> files_;  // for reads of code outside the stack copy
};

}  // namespace ptsnap::decode
