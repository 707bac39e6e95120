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
// The same FDEs, run to the end, give the frame rule at every instruction
// (CfaTable): where the CFA is (the caller's %rsp before its call) and where
// the return address lies. The sampled decoder reads it to mend frame-pointer
// call chains at instructions where %rbp does not (yet, or any more) hold
// the current function's frame (docs/decoding.md, "Sampled traces").
//
// ParseEhFrame and ParseCfaTable are pure and fuzzed (eh_frame_fuzzer.cpp):
// bad input yields fewer entries, never a crash or an abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// x86-64 DWARF register numbers (psABI, figure 3.36) a frame rule names.
inline constexpr uint16_t kDwarfRbp = 6, kDwarfRsp = 7;

// How to find the caller's frame at one instruction (DWARF 4, 6.4.1: the
// CFA column and the return-address column of the row).
struct FrameRule {
  // CFA = DWARF register `cfa_reg` + `cfa_offset` (kDwarfRsp in a function
  // without a frame, in a prologue before `mov %rsp,%rbp` and after the
  // epilogue's `pop %rbp`; kDwarfRbp inside the frame). False: the CFA is a
  // DWARF expression (PLT stubs, stack realignment) this reader does not
  // evaluate.
  bool cfa_known = false;
  uint16_t cfa_reg = 0;
  int64_t cfa_offset = 0;
  // The return address: saved at CFA + `ra_offset` (-8 on x86-64);
  // undefined (the outermost frame: _start, a new thread's entry, or no
  // rule given); or another rule (same value, a register, an expression).
  enum class Ra : uint8_t { kSaved, kUndefined, kOther };
  Ra ra = Ra::kOther;
  int64_t ra_offset = 0;
  friend bool operator==(const FrameRule&, const FrameRule&) = default;
};

// The frame rules of one .eh_frame, as ranges of code with one rule each.
class CfaTable {
 public:
  // The rule at `vaddr` (the file's virtual address of an instruction);
  // nullopt when no FDE covers it, or its instructions stop being readable
  // before it (an opcode this reader does not know, DW_CFA_set_loc, a
  // restore_state without a remember_state).
  [[nodiscard]] std::optional<FrameRule> Find(uint64_t vaddr) const;
  [[nodiscard]] size_t rows() const { return rows_.size(); }

  struct Row {
    uint64_t start = 0, end = 0;  // [start, end), sorted, not overlapping
    FrameRule rule;
  };
  [[nodiscard]] const std::vector<Row>& row_list() const { return rows_; }

 private:
  friend CfaTable ParseCfaTable(std::span<const std::byte> bytes, uint64_t section_vaddr);
  std::vector<Row> rows_;
};

// Every FDE of the section run to its end (as ParseEhFrame finds them):
// one row per stretch of code with one rule, neighbours with the same rule
// merged. An FDE that overlaps an earlier one is left out.
CfaTable ParseCfaTable(std::span<const std::byte> bytes, uint64_t section_vaddr);

}  // namespace ptsnap::elf
