// Symbolisation for decoded addresses: per process, which mapping holds an
// address and which function of it; the kernel's functions from kallsyms;
// JIT maps (/tmp/perf-PID.map text). Code in a "[jit]" mapping with no
// name is "[jit @ 0xADDR]". JIT code's source lines come from the
// runtime's jitdump (SetJitLines); kernel code outside kallsyms that comes
// and goes (BPF programs) is named over time from PERF_RECORD_KSYMBOL
// (AddKernelSymbol). The ELF files themselves are read by
// elf::SymbolFile (elf/symbol_file.h), kallsyms text by sys::ParseKallsyms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_region.h"
#include "decode/source_lines.h"
#include "elf/symbol_file.h"
#include "ptsnap/result.h"
#include "sys/kallsyms.h"

namespace ptsnap::decode {

// The kernel's text symbols (t/T/w/W) with a non-zero address, named
// "name [module]" for modules.
elf::SymbolTable KernelSymbols(const sys::Kallsyms& kallsyms);
// "START SIZE NAME" lines of a perf JIT map (elf/symbol_file.h).
using elf::ParsePerfMap;

// A resolved address.
struct Resolved {
  uint32_t function_id = 0;           // stable per (dso, symbol); 0 never used
  uint64_t start = 0, end = 0;        // function range in the process's address space
  const std::string* name = nullptr;  // display name, owned by the Symbolizer
  const std::string* dso = nullptr;
  // false: "[unknown @ FILE+0xVADDR]" in an ELF file (its link-time
  // address), else "[unknown @ 0xADDR (dso)]"
  bool known = false;
  // A part split off a function (elf::Symbol::split): code its function
  // jumps into, which starts no frame (docs/decoding.md, "Call stacks on
  // optimized code").
  bool split = false;
  // Named by a PERF_RECORD_KSYMBOL live at the time asked (a BPF program,
  // trampoline or dispatcher, out-of-line kernel code): AddKernelSymbol.
  bool ksymbol = false;
  // When !known: every address in [unknown_lo, unknown_hi) resolves
  // unknown too, in the same mapping (`dso`): no symbol (and no JIT map)
  // covers any of it. Empty when not computed (kernel, JIT maps, no dso).
  uint64_t unknown_lo = 0, unknown_hi = 0;
};

// Where the inlined calls change along a straight run of code: from
// `addr` on, `leaf` is the innermost inlined call (nullptr: the function's
// own code); its parents are the calls it is inlined in.
struct InlineRun {
  uint64_t addr = 0;
  const InlineScope* leaf = nullptr;
  uint32_t insn = 0;  // the block's instructions before this run's first (when insns != 0)
};
struct InlineRuns {
  int64_t bias = 0;  // process address - ELF vaddr (InlineScope::entry is a vaddr)
  // The block's instructions, counted in the mapped file's code (Zydis,
  // 64-bit); 0 when its bytes could not be read, or did not decode to an
  // instruction at the block's last address.
  uint32_t insns = 0;
  std::vector<InlineRun> runs;
};

// The source lines of one piece of JIT code (a jitdump's
// JIT_CODE_DEBUG_INFO): from `offsets[i]` bytes past the code's start on,
// the code is `lines[i]`. Offsets ascending, one location per offset.
struct JitLines {
  std::vector<uint64_t> offsets;
  std::vector<SourceLocation> lines;
};

// Per-process address -> function. Mappings are added in time order; a later
// mapping over the same range replaces the earlier one. Lookups are cached.
class ProcessSymbols;
struct Mapping;

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
  void SetKernelSymbols(elf::SymbolTable kallsyms, uint64_t kernel_start);

  // Loads (once) and returns the ELF at `path`, or nullptr when unreadable.
  const elf::SymbolFile* LoadElf(const std::filesystem::path& path);

  // Registers a mapping of `file` (the path on this machine; `dso` the name
  // shown) at [addr, addr+len) with file offset pgoff for `pid`.
  void AddMapping(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                  const std::filesystem::path& file, const std::string& dso);
  // JIT symbols for `pid` (a perf-PID.map: the trace's jit/ copy, trace_dir.h).
  void AddPerfMap(int32_t pid, elf::SymbolTable table);
  // The same table for each of `pids` (every address space of one process).
  void AddPerfMap(std::span<const int32_t> pids, elf::SymbolTable table);
  // Keeps `lines` as long as the Symbolizer: the pointer SetJitLines takes.
  const JitLines* KeepJitLines(JitLines lines);
  // From now on the JIT code at [addr, addr+len) in `pid` has the source
  // lines `lines` (kept by KeepJitLines; nullptr: none), replacing what
  // was set over any part of that range. Copied by ForkProcess, like
  // mappings: code reused at the same address later in a new address
  // space does not change the lines of the earlier space.
  void SetJitLines(int32_t pid, uint64_t addr, uint64_t len, const JitLines* lines);
  // Kernel code that comes and goes (PERF_RECORD_KSYMBOL of a BPF program,
  // a BPF trampoline or dispatcher, out-of-line kernel code): from perf
  // time `time` on, [addr, addr+len) is the function `name` (in `dso`),
  // in every process. Symbols that KSYMBOL names are looked up by time
  // before kallsyms: a program loaded later over addresses another used
  // earlier does not rename the earlier one's code.
  void AddKernelSymbol(uint64_t time, uint64_t addr, uint64_t len, std::string_view name,
                       std::string_view dso);
  // The symbol at `addr` is gone from `time` on (a KSYMBOL with the
  // unregister flag). One that was never added (loaded before the
  // recording began) is `name` until then.
  void RemoveKernelSymbol(uint64_t time, uint64_t addr, uint64_t len, std::string_view name,
                          std::string_view dso);
  // Forgets a process's mappings (exec).
  void ResetProcess(int32_t pid);
  // Copies the parent's mappings (fork).
  void ForkProcess(int32_t parent, int32_t child);

  // Never fails: unknown code resolves to an "[unknown @ 0x...]" pseudo
  // function covering just `addr`. `time` (perf clock ns) picks the
  // version of a KSYMBOL-named kernel symbol; 0 (no timing): the latest
  // one registered at that address.
  Resolved Resolve(int32_t pid, uint64_t addr, uint64_t time = 0);

  // Source file and line of the function entry `addr` in `pid` (a
  // Slice::address), from DWARF in the mapped ELF or its separate debug file
  // (build-id, .gnu_debuglink). Lazy and cached per (ELF, address): call it
  // for functions being written out, not per branch. JIT code: the line of
  // the greatest debug entry at or below `addr` in the code SetJitLines
  // covers it with. nullptr when unknown (no DWARF, kernel, JIT code
  // without debug info, anonymous memory); the pointer stays valid as
  // long as the Symbolizer.
  const SourceLocation* SourceLine(int32_t pid, uint64_t addr);

  // The inlined calls along the straight-line code [start, end] (a decoded
  // block; `end` is its last instruction's address) of the function that
  // starts at `fn_start` in `pid`, from DWARF (DwarfFile::Inlines): the
  // first run starts at `start`. A piece of code of the function's own
  // lying between two pieces of one inlined call within the block (the
  // compiler interleaved them) counts as that call's. The block's
  // instructions are counted in the mapped file (InlineRuns::insns, each
  // run's `insn`) for the model to time the runs by. Cached per (pid,
  // start, end); every scope's `display` is set. nullptr when no inlined
  // code lies in it (or no DWARF covers it). Valid until the next call.
  const InlineRuns* Inlines(int32_t pid, uint64_t fn_start, uint64_t start, uint64_t end);
  // Whether DWARF has any inlined call in the function that starts at
  // `fn_start` in `pid`: when false, Inlines(pid, fn_start, ...) is
  // nullptr for every block of it. Cached per (pid, fn_start).
  bool HasInlines(int32_t pid, uint64_t fn_start);

  // Interns a name (pseudo frames, markers) and returns a stable pointer.
  const std::string* Intern(std::string_view s);

 private:
  ProcessSymbols& Process(int32_t pid);
  // The DWARF of a mapping's ELF or its debug file (opened once); nullptr: none.
  DwarfFile* Dwarf(const Mapping& m);
  // The bytes of a mapping's ELF file (mapped once, read-only; empty when
  // unreadable).
  std::span<const std::byte> FileBytes(const Mapping& m);
  // Fills `r`'s instruction counts for the block [start, end] of `m`.
  void CountInstructions(const Mapping& m, uint64_t start, uint64_t end, InlineRuns* r);
  uint32_t FunctionId(const std::string* dso, uint64_t start, const std::string* name);
  // The KSYMBOL-named kernel symbol covering `addr` at `time` (see
  // Resolve); false when no KSYMBOL ever covered `addr`. `r` is filled in
  // (unknown when none was alive at `time`).
  bool ResolveKernelSymbol(uint64_t addr, uint64_t time, Resolved& r);

  std::vector<std::filesystem::path> debug_dirs_{"/usr/lib/debug"};
  std::map<std::string, std::unique_ptr<elf::SymbolFile>> elves_;  // by path; null = unreadable
  std::vector<std::filesystem::path> DebugCandidates(const std::filesystem::path& path,
                                                     const elf::SymbolFile& elf) const;
  // By ELF path: the DWARF of the file or its debug file; null = none.
  std::map<std::string, std::unique_ptr<DwarfFile>> dwarves_;
  // The bytes of each file in elves_ (FileBytes); empty = unreadable.
  std::unordered_map<const elf::SymbolFile*, base::MappedRegion> files_;
  std::unordered_map<int32_t, std::unique_ptr<ProcessSymbols>> processes_;
  std::unordered_map<std::string, std::unique_ptr<std::string>> strings_;
  std::map<std::pair<const std::string*, uint64_t>, uint32_t> function_ids_;
  elf::SymbolTable kallsyms_;
  uint64_t kernel_start_ = 0;
  std::vector<std::unique_ptr<JitLines>> jit_lines_;
  // KSYMBOL-named kernel symbols by start address, each address's
  // versions in the order they were registered.
  struct KernelSymbolVersion {
    uint64_t end = 0;                       // address
    uint64_t from = 0, until = UINT64_MAX;  // perf time
    const std::string* name = nullptr;
    const std::string* dso = nullptr;
  };
  std::map<uint64_t, std::vector<KernelSymbolVersion>> ksymbols_;
  uint64_t ksymbol_max_len_ = 0;
  int32_t last_pid_ = 0;  // one-entry cache in front of processes_
  ProcessSymbols* last_process_ = nullptr;
  friend class ProcessSymbols;
};

// Kernel addresses are the upper half of the canonical address space.
inline bool IsKernelAddress(uint64_t addr) { return (addr >> 63) != 0; }

}  // namespace ptsnap::decode
