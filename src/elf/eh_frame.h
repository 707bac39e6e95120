// Function ranges from .eh_frame: every function a compiler emits unwind
// information for has an FDE (Frame Description Entry), stripped or not, so
// FDEs bound code that no symbol names (static functions of a stripped
// binary) and tell a function's entry from a part split off it (GCC's
// `foo.cold`: hot/cold partitioning).
//
// An FDE starts at a function's entry when the unwind rule there is the
// CIE's initial one unchanged: the CFA is %rsp + 8, only the return address
// on the stack (x86-64 psABI 3.7; GCC and clang emit no instructions before
// the first advance_loc for a function entry). A split part begins inside
// its function's frame, so its FDE sets the CFA (DW_CFA_def_cfa_offset N)
// before the first advance (or, where it begins with a landing pad, after
// a one-byte `nop`). Reference: LSB 5.0 "Exception Frames" (.eh_frame
// layout, augmentation strings, DW_EH_PE pointer encodings) and DWARF 4,
// 6.4.2 (call frame instructions).
//
// ParseEhFrame is pure and fuzzed (eh_frame_fuzzer.cpp): bad input yields
// fewer entries, never a crash or an abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ptsnap::elf {

struct FdeRange {
  uint64_t start = 0, end = 0;  // [start, end) in the file's virtual addresses
  // The CFA at `start` is %rsp + 8: the code is entered by a call (a
  // function's entry), not inside a frame (a split-off part).
  bool entry = false;
};

// The FDEs of a .eh_frame section whose bytes are `bytes`, loaded at virtual
// address `section_vaddr` (pc-relative pointers are relative to it). Sorted
// by start; empty ranges, ranges that wrap and entries whose pointers use an
// encoding that needs other sections (datarel, textrel, funcrel, indirect)
// are skipped. Reading stops at a zero terminator or at the first record
// that does not fit.
std::vector<FdeRange> ParseEhFrame(std::span<const std::byte> bytes, uint64_t section_vaddr);

}  // namespace ptsnap::elf
