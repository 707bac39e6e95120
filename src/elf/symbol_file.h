// Naming code: symbol tables with nearest-below lookup, and the ELF files
// the decoder symbolises against (SymbolFile: functions and code labels,
// synthesised PLT names, PT_LOAD layout, build-id, debug link), with C++
// demangling. The decoder's kallsyms and JIT-map tables are SymbolTables
// too (decode/symbols.h).
//
// Nothing here throws or aborts on bad input: a file that is not ELF yields
// an error, a symbol table that is corrupt yields fewer symbols.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/eh_frame.h"
#include "elf/segments.h"
#include "ptsnap/result.h"

namespace ptsnap::elf {

// One function-like symbol: [start, start + size). size 0 means "up to the
// next symbol".
struct Symbol {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;  // demangled
  // A part split off a function (GCC's `foo.cold`, or an FDE that begins
  // inside a frame: eh_frame.h): code its function jumps into, not a
  // function of its own.
  bool split = false;
  // No symbol names it: its range is an FDE's and its name "FILE+0xVADDR".
  bool unnamed = false;
  // The ELF binding, and whether the name is an old (hidden) symbol
  // version: they pick the name among aliases (SymbolTable::Finish).
  enum class Binding : uint8_t { kGlobal, kWeak, kLocal } binding = Binding::kGlobal;
  bool old_version = false;
};

// A sorted, non-owning-free table with nearest-below lookup.
class SymbolTable {
 public:
  void Add(Symbol s) { symbols_.push_back(std::move(s)); }
  // Drops the Symbol::unnamed entries (call Finish after adding).
  void DropUnnamed() {
    std::erase_if(symbols_, [](const Symbol& s) { return s.unnamed; });
  }
  // Sorts, drops duplicates (prefers sized, global-looking names) and
  // computes sizes of zero-sized entries from their successor.
  void Finish();
  // The symbol containing `addr`, or nullptr.
  [[nodiscard]] const Symbol* Find(uint64_t addr) const;
  [[nodiscard]] size_t size() const { return symbols_.size(); }
  [[nodiscard]] const std::vector<Symbol>& symbols() const { return symbols_; }

 private:
  std::vector<Symbol> symbols_;
};

// What the decoder needs from one ELF file to name code.
class SymbolFile {
 public:
  // Reads `path` with libelf: .symtab (or .dynsym, and MiniDebugInfo's
  // .symtab: ParseMiniDebugInfo), synthesised `name@plt`
  // entries for .plt/.plt.sec stubs from .rela.plt, PT_LOAD segments, the
  // NT_GNU_BUILD_ID note and .gnu_debuglink, and .eh_frame's FDEs: code
  // that no symbol covers but an FDE bounds is a function named
  // "FILE+0xVADDR" (Symbol::unnamed), so a stripped binary's static
  // functions have ranges. Errors: unreadable, not ELF.
  static Result<SymbolFile> Open(const std::filesystem::path& path);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] const std::string& build_id() const { return build_id_; }  // hex, "" if none
  [[nodiscard]] const std::string& debuglink() const { return debuglink_; }
  [[nodiscard]] const std::vector<Segment>& segments() const { return segments_; }
  [[nodiscard]] const SymbolTable& symbols() const { return symbols_; }
  [[nodiscard]] bool has_symtab() const { return has_symtab_; }
  // Adds symbols from a separate debug file (same layout) when this file has
  // no .symtab; the FDE-bounded names give way to the debug file's.
  void MergeSymbols(const SymbolFile& debug);
  // The .eh_frame FDEs (eh_frame.h), sorted by start.
  [[nodiscard]] const std::vector<FdeRange>& fdes() const { return fdes_; }

  // The ELF virtual address for a file offset, using the PT_LOAD that holds
  // it; nullopt when none does.
  [[nodiscard]] std::optional<uint64_t> OffsetToVaddr(uint64_t offset) const {
    return elf::OffsetToVaddr(segments_, offset);
  }

 private:
  std::filesystem::path path_;
  std::string build_id_, debuglink_;
  std::vector<Segment> segments_;
  SymbolTable symbols_;
  std::vector<FdeRange> fdes_;
  bool has_symtab_ = false;
  // Adds an unnamed function per FDE that no symbol covers (after dropping
  // earlier ones), then Finish()es the table.
  void AddFdeFunctions();
};

// The frame rules of `path`'s .eh_frame (eh_frame.h), read on demand: the
// sampled decoder wants them for the few files its samples land in, the PT
// decoder never. An empty table when the file has no .eh_frame. Errors:
// unreadable, not ELF.
Result<CfaTable> ReadCfaTable(const std::filesystem::path& path);

// The functions of a MiniDebugInfo section (`.gnu_debugdata`: an
// xz-compressed ELF whose .symtab names the functions .dynsym lacks, as
// Fedora, CentOS and others ship): empty when the bytes are not xz, do not
// decompress (at most 256 MiB), or hold no ELF with a .symtab.
SymbolTable ParseMiniDebugInfo(std::span<const std::byte> xz);

// "START SIZE NAME" lines of a perf JIT map (/tmp/perf-PID.map: hex, with
// or without 0x; names demangled); lines that do not parse are skipped.
SymbolTable ParsePerfMap(std::string_view text);

// Whether `name` (raw, not demangled) is GCC's name for a part split off a
// function: `foo.cold`, `foo.cold.N`.
bool IsSplitPartName(std::string_view name);

// abi::__cxa_demangle for names starting with _Z, else the name unchanged.
std::string Demangle(std::string_view name);

}  // namespace ptsnap::elf
