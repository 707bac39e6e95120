// ELF files through libelf: function symbols, load segments and the GNU
// build-id, for every module that reads binaries (the recorder's triggers
// and binary list, the emulator, the exporter). Pure on bytes
// (ParseFunctions, ReadBuildId: fuzzed in elf_file_fuzzer) with thin
// readers of files beside them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::elf {

struct Function {
  std::string name;
  uint64_t value = 0;  // st_value: link-time virtual address
  uint64_t size = 0;
};

struct Image {
  bool pie = false;                 // ET_DYN: loaded at a base chosen at run time
  uint64_t lowest_load_vaddr = 0;   // lowest PT_LOAD p_vaddr (page-aligned down)
  std::vector<Function> functions;  // defined STT_FUNC/STT_GNU_IFUNC, .symtab then .dynsym
  // "AddressSanitizer", "ThreadSanitizer" or "MemorySanitizer" when a symbol
  // table names that runtime's init function (__asan_init, __tsan_init,
  // __msan_init), defined or not: the program was built with -fsanitize=...
  std::string sanitizer;
  // A .symtab was read: false for a stripped file, where only the exported
  // functions (.dynsym) have names.
  bool has_symtab = false;
  // The separate debug file the .symtab came from (ReadFunctions), "" when
  // it was the file's own or there was none.
  std::string debug_file;
};

// /usr/lib/debug: where Debian's -dbgsym and -dbg packages put debug files.
inline const std::filesystem::path kSystemDebugDir = "/usr/lib/debug";

// Parses an ELF file image. Errors: not ELF, no symbol tables at all (a
// stripped binary: the message says so).
Result<Image> ParseFunctions(std::span<const std::byte> bytes);
// The same for the file at `path`, which libelf reads as it needs (errors
// name the file). A file without .symtab (stripped) takes the functions of
// its separate debug file, the first of DebugFileCandidates(`debug_dirs`)
// that is a regular file with a .symtab (and, where both have one, the same
// build-id); its .dynsym names stay. `debug_dirs` empty: /usr/lib/debug
// alone. Errors: not ELF, or no symbol table in the file nor a debug file.
Result<Image> ReadFunctions(const std::filesystem::path& path,
                            std::span<const std::filesystem::path> debug_dirs = {});

// Where the separate debug file of `path` (GNU build-id `build_id` in hex,
// `.gnu_debuglink` name `debuglink`; either may be "") may be, in gdb's
// order: for each of `dirs`, DIR/.build-id/NN/REST.debug, then
// DIR/<path's folder>/LINK and DIR/LINK; then LINK beside `path` and in
// .debug/ beside it. Pure.
std::vector<std::filesystem::path> DebugFileCandidates(const std::filesystem::path& path,
                                                       std::string_view build_id,
                                                       std::string_view debuglink,
                                                       std::span<const std::filesystem::path> dirs);

// First function named `name` (exact match), or nullptr.
const Function* FindFunction(const Image& image, std::string_view name);

// The GNU build-id (NT_GNU_BUILD_ID note) as lowercase hex, or "" when there
// is none or the bytes are not ELF.
std::string ReadBuildId(std::span<const std::byte> bytes);
// The same for the file at `path` ("" also when it cannot be read); reads
// only the note sections.
std::string ReadBuildIdOf(const std::filesystem::path& path);

}  // namespace ptsnap::elf
