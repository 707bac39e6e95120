// Resolving a trigger (`--trigger SYMBOL|addr:HEX|.`) to the address where
// the hardware breakpoint goes, with the function tables of elf/elf_file.h.
//
// RuntimeAddress() and LowestMappingStart() are pure (fuzzed in
// elf_symbols_fuzzer); only ResolveTrigger() and CheckTriggerInFile() read
// files.
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
#include "elf/symbol_match.h"
#include "ptsnap/result.h"

namespace ptsnap::record {

// The stop indicator's names (include/ptsnap/stop_indicator.h).
inline constexpr std::string_view kStopIndicatorSymbols[] = {"ptsnap_take_snapshot",
                                                             "magic_trace_stop_indicator"};

// Where the function's first instruction is in the running process.
// `lowest_mapping_start` is the lowest start address of the process's
// mappings of this file (/proc/PID/maps); it only matters for PIE.
uint64_t RuntimeAddress(const elf::Image& image, const elf::Function& fn,
                        uint64_t lowest_mapping_start);

// Lowest start of a mapping of `path` in /proc/PID/maps text, or nullopt.
// Paths compare after resolving both with weakly_canonical.
std::optional<uint64_t> LowestMappingStart(std::string_view maps_text,
                                           const std::filesystem::path& path);

struct TriggerPoint {
  std::string description;  // "main.do_work @ 0x55d0c0de1139", "addr:0x401000"
  std::string symbol;       // "" for addr:
  uint64_t address = 0;     // 0: not mapped yet (a library function of `run`)
  // A shared library's function: the library and the function's file
  // offset, where an entry uprobe goes (breakpoints.h). With address 0 the
  // trigger can only be that uprobe: it fires wherever the library is
  // mapped, before or after the trigger is armed.
  std::string file;
  uint64_t file_offset = 0;
};

// Where ResolveTrigger looks for a NAME the executable does not define.
enum class TriggerLibraries {
  kNone,
  kLinked,  // run: the libraries it links (linked_libraries.h), not mapped yet
  kMapped,  // attach: the libraries the process maps
};

// At most this many functions for one --trigger NAME: x86 has four debug
// registers, one execute breakpoint each.
inline constexpr size_t kMaxTriggerFunctions = 4;

// The functions of `image` (read from `file`) that a --trigger NAME names,
// in any spelling of elf/symbol_match.h (risky(int), risky, _Z5riskyi,
// thr:risky, '*risk*'), one per address. Errors (kind kTrigger): none
// matches (the message lists the closest names and the spellings), or more
// than `max` do (it lists them; `max` 1 is --slower-than's, which times one
// function).
Result<std::vector<const elf::Function*>> MatchTriggerFunctions(const elf::Image& image,
                                                                std::string_view name,
                                                                const std::string& file,
                                                                size_t max = kMaxTriggerFunctions);

// The error for a --trigger NAME that names no function in `where` ("FILE",
// or "FILE nor in the N shared libraries it links (...)"): the `closest`
// names, the stripped hint when `image` (the program `file`) has no
// .symtab, the spellings. Kind kTrigger.
Error TriggerNotFound(std::string_view name, const std::string& where,
                      std::span<const std::string> closest, const elf::Image& image,
                      const std::string& file);

// `--trigger ?`'s menu: the demangled names of `image`'s functions, each
// once, sorted. Each is a --trigger NAME that names that function (or all
// the functions sharing the name); `dso` not empty (a library's file name):
// each as DSO:NAME.
std::vector<std::string> TriggerChoices(const elf::Image& image, std::string_view dso = "");

// The answer to `--trigger ?`'s prompt: "N" picks choices[N-1], anything
// else is taken as a NAME (checked later like any --trigger). Error: a
// number out of range, an empty answer.
Result<std::string> ParseTriggerChoice(std::string_view answer,
                                       const std::vector<std::string>& choices);

// Resolves `selector` against the executable of process `pid`
// (/proc/PID/exe, PIE base from /proc/PID/maps):
//   "addr:HEX"  -> that address, unchanged;
//   "."         -> every stop-indicator symbol present (at least one);
//   NAME        -> the functions NAME names (MatchTriggerFunctions); when
//                  the executable defines none and `libs` is not kNone,
//                  those of the first library that does
//                  (linked_libraries.h): kLinked gives file offsets only
//                  (address 0), kMapped runtime addresses and file offsets.
// Errors name the symbol and the executable (and the libraries searched),
// and list the closest names ("trigger symbol 'foo' not found: ...; did
// you mean: foo(int)").
Result<std::vector<TriggerPoint>> ResolveTrigger(std::string_view selector, pid_t pid,
                                                 size_t max = kMaxTriggerFunctions,
                                                 TriggerLibraries libs = TriggerLibraries::kNone);

// Before anything runs: checks that `selector` names a function of the
// executable file `exe` or of a shared library it links (as `run`'s
// ResolveTrigger with kLinked finds it; "addr:" selectors always pass).
// Same errors, so a typo fails before the program is started. `max`: as
// MatchTriggerFunctions'.
// A script (`#!` first) is checked in its interpreter, which execve runs
// and ResolveTrigger later finds at /proc/PID/exe; its errors then say so.
Result<void> CheckTriggerInFile(std::string_view selector, const std::filesystem::path& exe,
                                size_t max = kMaxTriggerFunctions);

// `err` (a trigger not found in the program `interpreter`, which runs the
// script `script`), ending "; SCRIPT is a script, run by INTERPRETER: ...";
// its kind kept.
Error InScript(const Error& err, const std::filesystem::path& script,
               const std::filesystem::path& interpreter);

// `name` as execvp would find it: itself when it contains a '/', else the
// first executable match in $PATH. Errors: "command not found".
Result<std::filesystem::path> FindExecutable(std::string_view name);

}  // namespace ptsnap::record
