// Where `run` looks for a --trigger function the program does not define
// (natively and under --emulate): the shared libraries it links, in the
// dynamic linker's order, as its own loader resolves them (`ld.so --list
// PROGRAM`, what ldd prints: RUNPATH, LD_LIBRARY_PATH and the system
// directories, no guessing); `attach`: the libraries the process maps
// (those it links first, in that order). Before the program starts no library is mapped, so such a
// trigger is a file and a file offset: natively an entry uprobe on them
// (breakpoints.h), which fires wherever the library is mapped; under
// --emulate the plugin arms it the same way (plugin/filters.cpp,
// MapLibTriggers).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.h"
#include "elf/segments.h"
#include "ptsnap/result.h"

namespace ptsnap::record {

// The library paths in `ld.so --list` output, in its order: the right side
// of "NAME => PATH (0x...)" lines and the loader's own "PATH (0x...)" line.
// The vDSO (no path) and "NAME => not found" are left out. Pure.
std::vector<std::string> ParseLdList(std::string_view out);

// Runs `interp --list program` (interp: the program's PT_INTERP) and parses
// what it prints. Errors: the loader could not be run or refused the
// program (its exit status and first line).
Result<std::vector<std::string>> ListLinkedLibraries(const std::filesystem::path& program,
                                                     const std::filesystem::path& interp);

// The file offset of link-time address `vaddr` in PT_LOAD `segments` (the
// bytes the file holds), nullopt when none holds it. Pure.
std::optional<uint64_t> FileOffsetOf(std::span<const elf::Segment> segments, uint64_t vaddr);

// A --trigger FUNC found in a library: its canonical path and the
// functions, with their file offsets.
struct LibraryTrigger {
  std::string path;
  uint64_t lowest_load_vaddr = 0;  // the library's (elf::Image), for runtime addresses
  struct Function {
    std::string name;    // demangled
    std::string symbol;  // as in the symbol table
    uint64_t vaddr = 0, offset = 0;
  };
  std::vector<Function> functions;
};
// The first library of `program`'s (ParseLdList order) whose functions FUNC
// `typed` names (elf/symbol_match.h; DSO:NAME picks the library by file
// name), at most `max` of them (more is an error listing them, as in the
// program). nullopt: none names it, or the program is static.
Result<std::optional<LibraryTrigger>> FindTriggerInLibraries(const std::filesystem::path& program,
                                                             const std::string& typed, size_t max);

// The same over the libraries `libs`, in their order.
Result<std::optional<LibraryTrigger>> FindTriggerInFiles(std::span<const std::string> libs,
                                                         const std::string& typed, size_t max);

// The libraries `program` links (ListLinkedLibraries with its PT_INTERP);
// none for a static program.
Result<std::vector<std::string>> LinkedLibraries(const std::filesystem::path& program);

// The files other than `exe` that process `pid` maps executable
// (/proc/PID/maps), those `exe` links first in the loader's order
// (LinkedLibraries), then the rest (dlopen'ed) in the map's order.
// Errors: the map cannot be read.
Result<std::vector<std::string>> MappedLibraries(pid_t pid, const std::filesystem::path& exe);

// A --trigger NAME (elf/symbol_match.h's spellings) of `program`, whose
// functions are `image`, or of its libraries `libs` (LinkedLibraries or
// MappedLibraries; `how`: "links" or "maps", for the message). nullopt:
// the program defines NAME (MatchTriggerFunctions on `image` gives its
// functions, or names too many). Else the first library's that does
// (FindTriggerInFiles). Error (kind kTrigger) when none does: "trigger
// symbol 'NAME' not found: no function of that name in PROGRAM nor in the
// N shared libraries it links (a.so, b.so); did you mean: ..." with the
// closest names across the program and the libraries, and the spellings.
Result<std::optional<LibraryTrigger>> FindTriggerBeyondProgram(const elf::Image& image,
                                                               const std::string& program,
                                                               std::span<const std::string> libs,
                                                               const std::string& typed, size_t max,
                                                               std::string_view how = "links");

// `run`'s lookup, before the program starts (natively and under
// --emulate): nullopt when `program` (functions `image`) defines NAME,
// else FindTriggerBeyondProgram over LinkedLibraries(program) (the loader
// is asked only then). Errors: as FindTriggerBeyondProgram's, and the
// loader's (ListLinkedLibraries).
// A DSO:NAME whose DSO is a path to a library the program does not link
// (one it only dlopen()s) is looked up in that file too, after the linked
// ones: its trigger is a file offset, armed wherever and whenever the
// library is mapped.
Result<std::optional<LibraryTrigger>> FindTriggerInLinkedLibraries(
    const elf::Image& image, const std::filesystem::path& program, const std::string& typed,
    size_t max);

// Appends to `libs` the file DSO:NAME `typed` names by a path ('/' in it)
// when it is a regular file `libs` does not hold already (compared as
// canonical paths).
void AddNamedLibrary(std::string_view typed, std::vector<std::string>* libs);

}  // namespace ptsnap::record
