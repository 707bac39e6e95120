// Reading the executable PT_LOAD segments of an ELF file: what the kernel
// would report as r-x file mappings (PERF_RECORD_MMAP2) once the file is
// loaded at a given bias. Used by the plugin for the main binary and the
// interpreter, which QEMU loads itself (no guest mmap syscalls to observe).
// ParseElfSegments is pure and fuzzed (elf_segments_fuzzer.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptsnap::emulate {

struct ElfSegment {
  uint64_t vaddr = 0, memsz = 0, offset = 0;
  bool exec = false;
};

struct ElfImage {
  bool pie = false;  // ET_DYN: loaded at a bias
  uint64_t entry = 0;
  std::string interp;  // PT_INTERP, "" when static
  std::vector<ElfSegment> loads;
};

// Parses an ELF64 little-endian x86-64 header and program headers from the
// file's first bytes. nullopt when the bytes are not such an ELF or a header
// lies outside them.
std::optional<ElfImage> ParseElfSegments(std::string_view bytes);

// The lowest executable PT_LOAD vaddr, or nullopt when none.
std::optional<uint64_t> LowestExecVaddr(const ElfImage& img);

}  // namespace ptsnap::emulate
