// Symbolisation for decoded addresses: ELF symbol tables (libelf), PLT stubs,
// kallsyms for the kernel, JIT maps (/tmp/perf-PID.map), C++ demangling.
//
// Parsing is split from I/O: ParseKallsyms/ParsePerfMap take text, ElfFile
// reads a file once and keeps only what lookup needs (sorted symbols, the
// PT_LOAD layout, the build-id). Nothing here throws or aborts on bad input:
// a file that is not ELF yields an error, a symbol table that is corrupt
// yields fewer symbols.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decode/source_lines.h"
#include "ptsnap/result.h"

namespace ptsnap::decode {

// One function-like symbol: [start, start + size). size 0 means "up to the
// next symbol".
struct Symbol {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;  // demangled
};

// A sorted, non-owning-free table with nearest-below lookup.
class SymbolTable {
 public:
  void Add(Symbol s) { symbols_.push_back(std::move(s)); }
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

struct LoadSegment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  bool exec = false;
};

// What ptsnap needs from one ELF file.
class ElfFile {
 public:
  // Reads `path` with libelf: .symtab (or .dynsym), synthesised `name@plt`
  // entries for .plt/.plt.sec stubs from .rela.plt, PT_LOAD segments, the
  // NT_GNU_BUILD_ID note and .gnu_debuglink. Errors: unreadable, not ELF.
  static Result<ElfFile> Open(const std::filesystem::path& path);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] const std::string& build_id() const { return build_id_; }  // hex, "" if none
  [[nodiscard]] const std::string& debuglink() const { return debuglink_; }
  [[nodiscard]] const std::vector<LoadSegment>& segments() const { return segments_; }
  [[nodiscard]] const SymbolTable& symbols() const { return symbols_; }
  [[nodiscard]] bool has_symtab() const { return has_symtab_; }
  // Adds symbols from a separate debug file (same layout) when this file has
  // no .symtab.
  void MergeSymbols(const ElfFile& debug);

  // The ELF virtual address for a file offset, using the PT_LOAD that holds
  // it; nullopt when none does.
  [[nodiscard]] std::optional<uint64_t> OffsetToVaddr(uint64_t offset) const;

 private:
  std::filesystem::path path_;
  std::string build_id_, debuglink_;
  std::vector<LoadSegment> segments_;
  SymbolTable symbols_;
  bool has_symtab_ = false;
};

// "ffffffff81000000 T _stext [module]" lines; only text symbols (t/T/w/W).
SymbolTable ParseKallsyms(std::string_view text);
// "START SIZE NAME" lines of a perf JIT map (hex, with or without 0x).
SymbolTable ParsePerfMap(std::string_view text);
// abi::__cxa_demangle for names starting with _Z, else the name unchanged.
std::string Demangle(std::string_view name);

// A resolved address.
struct Resolved {
  uint32_t function_id = 0;           // stable per (dso, symbol); 0 never used
  uint64_t start = 0, end = 0;        // function range in the process's address space
  const std::string* name = nullptr;  // display name, owned by the Symbolizer
  const std::string* dso = nullptr;
  bool known = false;  // false: "[unknown @ 0xADDR (dso)]"
};

// Per-process address -> function. Mappings are added in time order; a later
// mapping over the same range replaces the earlier one. Lookups are cached.
class ProcessSymbols;

// Owns ELF files (shared across processes by path), kallsyms and names.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Search path for separate debug info: DIR/.build-id/xx/yyyy.debug and
  // DIR/<debuglink>. Default: /usr/lib/debug.
  void SetDebugDirs(std::vector<std::filesystem::path> dirs) { debug_dirs_ = std::move(dirs); }
  void SetKernelSymbols(SymbolTable kallsyms, uint64_t kernel_start);

  // Loads (once) and returns the ELF at `path`, or nullptr when unreadable.
  const ElfFile* LoadElf(const std::filesystem::path& path);

  // Registers a mapping of `file` (the path on this machine; `dso` the name
  // shown) at [addr, addr+len) with file offset pgoff for `pid`.
  void AddMapping(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                  const std::filesystem::path& file, const std::string& dso);
  // JIT symbols for `pid` (from /tmp/perf-PID.map).
  void AddPerfMap(int32_t pid, SymbolTable table);
  // Forgets a process's mappings (exec).
  void ResetProcess(int32_t pid);
  // Copies the parent's mappings (fork).
  void ForkProcess(int32_t parent, int32_t child);

  // Never fails: unknown code resolves to an "[unknown @ 0x...]" pseudo
  // function covering just `addr`.
  Resolved Resolve(int32_t pid, uint64_t addr);

  // Source file and line of the function entry `addr` in `pid` (a
  // Slice::address), from DWARF in the mapped ELF or its separate debug file
  // (build-id, .gnu_debuglink). Lazy and cached per (ELF, address): call it
  // for functions being written out, not per branch. nullptr when unknown
  // (no DWARF, kernel, JIT, anonymous memory); the pointer stays valid as
  // long as the Symbolizer.
  const SourceLocation* SourceLine(int32_t pid, uint64_t addr);

  // Interns a name (pseudo frames, markers) and returns a stable pointer.
  const std::string* Intern(std::string_view s);

 private:
  ProcessSymbols& Process(int32_t pid);
  uint32_t FunctionId(const std::string* dso, uint64_t start, const std::string* name);

  std::vector<std::filesystem::path> debug_dirs_{"/usr/lib/debug"};
  std::map<std::string, std::unique_ptr<ElfFile>> elves_;  // by path; null = unreadable
  std::vector<std::filesystem::path> DebugCandidates(const std::filesystem::path& path,
                                                     const ElfFile& elf) const;
  // By ELF path: the DWARF of the file or its debug file; null = none.
  std::map<std::string, std::unique_ptr<DwarfFile>> dwarves_;
  std::unordered_map<int32_t, std::unique_ptr<ProcessSymbols>> processes_;
  std::unordered_map<std::string, std::unique_ptr<std::string>> strings_;
  std::map<std::pair<const std::string*, uint64_t>, uint32_t> function_ids_;
  SymbolTable kallsyms_;
  uint64_t kernel_start_ = 0;
  int32_t last_pid_ = 0;  // one-entry cache in front of processes_
  ProcessSymbols* last_process_ = nullptr;
  friend class ProcessSymbols;
};

// Kernel addresses are the upper half of the canonical address space.
inline bool IsKernelAddress(uint64_t addr) { return (addr >> 63) != 0; }

}  // namespace ptsnap::decode
