// Where --emulate looks for a --trigger function the program does not
// define: the shared libraries it links, in the dynamic linker's order, as
// its own loader resolves them (`ld.so --list PROGRAM`, what ldd prints:
// RUNPATH, LD_LIBRARY_PATH and the system directories, no guessing). The
// plugin arms such a trigger at the library's file offset wherever the
// library is mapped (plugin/filters.cpp, MapLibTriggers).
#pragma once

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

namespace ptsnap::emulate {

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
  struct Function {
    std::string name;  // demangled
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

}  // namespace ptsnap::emulate
