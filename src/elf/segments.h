// ELF headers without libelf: the ELF header and program headers of a file's
// first bytes (ParseElfHeader, ParseProgramHeaders: pure, every offset and
// size checked, errors naming the field), the one PT_LOAD segment type of
// the tree, and an executable's load layout.
//
// sys/kcore.h reads /proc/kcore's headers with these. ParseLoadLayout serves the emulator's plugin
// (loaded into qemu-x86_64, it links nothing but libipt and Zydis): for the main binary and the
// interpreter, which QEMU maps itself without guest mmap syscalls, it gives
// what the kernel would report as r-x file mappings (PERF_RECORD_MMAP2) once
// the file is loaded at a bias. It is pure and fuzzed (segments_fuzzer.cpp).
// Readers of whole files go through libelf (elf_file.h, symbol_file.h) and
// report their segments with the same struct.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::elf {

// The ELF64 header's fields that the readers use.
struct ElfHeader {
  uint16_t type = 0;     // e_type: ET_EXEC, ET_DYN, ET_CORE...
  uint16_t machine = 0;  // e_machine (EM_X86_64 = 62)
  uint64_t entry = 0;
  uint64_t phoff = 0;
  uint16_t phentsize = 0;
  uint16_t phnum = 0;
};

// One program header, as written.
struct ProgramHeader {
  uint64_t vaddr = 0;
  uint64_t paddr = 0;
  uint64_t offset = 0;  // file offset of the segment's bytes
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint32_t flags = 0;  // PF_R/PF_W/PF_X
  uint32_t type = 0;   // PT_LOAD, PT_NOTE, PT_INTERP...
};

// An ELF64 little-endian header from the first 64 bytes. Errors: truncated,
// bad magic, not 64-bit, not little-endian.
Result<ElfHeader> ParseElfHeader(std::span<const std::byte> bytes);

// Bytes from the file's start that hold the ELF header and every program
// header. Errors: no program headers, PN_XNUM, an entry size that is not
// Elf64_Phdr's, a table beyond 1 MiB.
Result<size_t> HeadersSize(const ElfHeader& header);

// The program headers, from `bytes` (the file's prefix of at least
// HeadersSize bytes). Errors: those of HeadersSize, a truncated table, a
// PT_LOAD whose file or address range overflows or whose p_filesz exceeds
// p_memsz.
Result<std::vector<ProgramHeader>> ParseProgramHeaders(std::span<const std::byte> bytes,
                                                       const ElfHeader& header);

struct Segment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  bool exec = false;  // PF_X
};

struct LoadLayout {
  bool pie = false;  // ET_DYN: loaded at a bias
  uint64_t entry = 0;
  std::string interp;  // PT_INTERP, "" when static
  std::vector<Segment> segments;
};

// The load layout of an x86-64 executable or shared object from the file's
// first bytes. nullopt when the bytes are not such an ELF or its headers do
// not parse.
std::optional<LoadLayout> ParseLoadLayout(std::string_view bytes);

// The lowest executable segment's vaddr, or nullopt when none.
std::optional<uint64_t> LowestExecVaddr(std::span<const Segment> segments);

// The ELF virtual address of file offset `offset`, from the segment that
// maps it (the page its file range starts in counts: a mapping's pgoff is
// page-aligned); nullopt when none does.
std::optional<uint64_t> OffsetToVaddr(std::span<const Segment> segments, uint64_t offset);

}  // namespace ptsnap::elf
