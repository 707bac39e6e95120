// Small ELF files holding one piece of JIT code, the way `perf inject
// --jit` writes its jitted-PID-N.so (tools/perf/util/genelf.c): the export
// (exporter.h) writes one per code load beside the perf.data file and maps
// it with a PERF_RECORD_MMAP2 at the load's address and time, so perf's
// Intel PT decoder reads the JIT code's bytes and names from it.
//
// Layout, as perf expects it from its own jitted files: an x86-64 ET_DYN
// file with no program headers; the code directly after the ELF header at
// file offset and address kJitElfTextOffset (so the MMAP2's pgoff is that
// offset and perf's map_ip gives a file offset and a symbol address at
// once); a .symtab of STT_FUNC symbols over the code; a GNU build-id note.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ptsnap::exporter {

// Where the code lies in the file and in the ELF's address space: right
// after the 64-byte ELF header (genelf.h's GEN_ELF_TEXT_OFFSET).
inline constexpr uint64_t kJitElfTextOffset = 64;
inline constexpr size_t kJitBuildIdSize = 20;

// A function in the code: [offset, offset + size) of the code bytes.
struct JitElfSymbol {
  uint64_t offset = 0, size = 0;
  std::string name;
};

// A 20-byte build-id for `code` loaded at `addr` (a hash of both: the same
// bytes at another address are another file). Not cryptographic.
std::string JitBuildId(uint64_t addr, std::string_view code);

// The file's bytes. Symbols outside the code are clipped to it; empty
// names are skipped. Pure.
std::string MakeJitElf(uint64_t addr, std::string_view code, std::span<const JitElfSymbol> symbols);

}  // namespace ptsnap::exporter
