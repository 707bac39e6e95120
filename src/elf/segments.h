// PT_LOAD segments: the one segment type of the tree, and a reader of an
// ELF's load layout from its first bytes without libelf.
//
// ParseLoadLayout serves the emulator's plugin (loaded into qemu-x86_64, it
// links nothing but libipt and Zydis): for the main binary and the
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

namespace ptsnap::elf {

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

// Parses an ELF64 little-endian x86-64 header and program headers from the
// file's first bytes. nullopt when the bytes are not such an ELF or a header
// lies outside them.
std::optional<LoadLayout> ParseLoadLayout(std::string_view bytes);

// The lowest executable segment's vaddr, or nullopt when none.
std::optional<uint64_t> LowestExecVaddr(std::span<const Segment> segments);

// The ELF virtual address of file offset `offset`, from the segment that
// maps it (the page its file range starts in counts: a mapping's pgoff is
// page-aligned); nullopt when none does.
std::optional<uint64_t> OffsetToVaddr(std::span<const Segment> segments, uint64_t offset);

}  // namespace ptsnap::elf
