// From DWARF (libdw): the source file and line of a function's entry
// address, and the calls inlined into a function (DW_TAG_inlined_subroutine).
//
// Used lazily: source lines by the output writers, only for functions that
// appear in the output, once per (ELF file, entry address); inline tables
// by the call-stack model, once per function. Missing or unreadable DWARF
// means "no location" and "nothing inlined", never an error.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptsnap::decode {

struct SourceLocation {
  std::string file;  // as the line table names it (usually absolute)
  uint32_t line = 0;
};

// One call inlined into a function: a DW_TAG_inlined_subroutine.
struct InlineScope {
  std::string name;  // the inlined function: demangled DW_AT_linkage_name, else DW_AT_name
  const InlineScope* parent = nullptr;  // the inlined call it lies in; nullptr: the real function
  uint64_t entry = 0;                   // ELF vaddr: DW_AT_entry_pc, else its lowest address
  uint32_t call_line = 0;               // DW_AT_call_line: where it was inlined
  uint32_t depth = 1;                   // 1: inlined directly into the real function
  // "name (inlined)", interned by the Symbolizer when first used.
  const std::string* display = nullptr;
};

// The inlined calls of one function (a DW_TAG_subprogram with all its
// address ranges): address intervals, each with the innermost inlined call
// that covers it.
struct InlineTable {
  struct Interval {
    uint64_t lo = 0, hi = 0;  // [lo, hi), ELF vaddrs
    InlineScope* leaf = nullptr;
  };
  std::vector<Interval> intervals;  // sorted, disjoint; gaps are the function's own code
  std::deque<InlineScope> scopes;   // stable addresses
  bool named = false;               // every scope's `display` is set

  // The first interval ending after `vaddr` (intervals.end(): none).
  [[nodiscard]] std::vector<Interval>::const_iterator From(uint64_t vaddr) const;
};

// Builds the intervals from each scope's ranges (pure; for tests too):
// deeper scopes win where ranges overlap; adjacent pieces of one scope merge.
void BuildInlineIntervals(
    InlineTable& table,
    const std::vector<std::pair<InlineScope*, std::pair<uint64_t, uint64_t>>>& ranges);

// One ELF (or separate debug) file opened with libdw.
class DwarfFile {
 public:
  // nullptr when the file cannot be read or has no DWARF.
  static std::unique_ptr<DwarfFile> Open(const std::filesystem::path& path);
  ~DwarfFile();
  DwarfFile(const DwarfFile&) = delete;
  DwarfFile& operator=(const DwarfFile&) = delete;

  // The line-table row for ELF virtual address `vaddr` (the function's entry
  // address), cached; the pointer stays valid as long as this object.
  // nullptr when no compilation unit covers it.
  const SourceLocation* Lookup(uint64_t vaddr);

  // The calls inlined into the function whose code holds ELF virtual
  // address `fn_vaddr` (a function symbol's start), from its
  // DW_TAG_subprogram and every DW_TAG_inlined_subroutine below it. Built
  // once per function and cached; the pointer stays valid as long as this
  // object. nullptr when no DWARF covers it or nothing is inlined into it.
  InlineTable* Inlines(uint64_t fn_vaddr);

 private:
  DwarfFile() = default;
  int fd_ = -1;
  void* dwarf_ = nullptr;  // Dwarf*
  std::unordered_map<uint64_t, std::optional<SourceLocation>> cache_;
  std::unordered_map<uint64_t, InlineTable*> inline_by_vaddr_;
  std::map<uint64_t, std::unique_ptr<InlineTable>> inline_by_die_;  // by subprogram DIE offset
};

}  // namespace ptsnap::decode
