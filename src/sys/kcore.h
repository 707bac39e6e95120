// /proc/kcore: an ELF64 core file (CONFIG_PROC_KCORE) with one PT_LOAD per
// kernel memory region, p_vaddr = kernel virtual address, p_offset = file
// offset. Opening it needs CAP_SYS_RAWIO and is refused under lockdown
// (fs/proc/kcore.c open_kcore). The file cannot be mmapped and reports a huge
// st_size, so everything here uses pread().
//
// ParseKcoreHeader() is pure and validates every offset and size against the
// bytes it is given, with elf/segments.h's header readers (no libelf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "base/unique_fd.h"
#include "elf/segments.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

// A PT_LOAD of the core file.
using ElfLoad = elf::ProgramHeader;

struct KcoreHeader {
  uint16_t machine = 0;  // e_machine (EM_X86_64 = 62)
  uint16_t phnum = 0;
  size_t note_count = 0;  // PT_NOTE headers
  std::vector<ElfLoad> loads;
};

// Bytes needed to hold the ELF header and all program headers, computed from
// the first 64 bytes (an ELF64 header). Fails on a bad or truncated header.
Result<size_t> KcoreHeaderSize(std::span<const std::byte> ehdr_bytes);

// Pure: parses an ELF64 little-endian ET_CORE header and its program headers
// from `bytes` (the file's prefix). Fails with a message naming the bad field.
Result<KcoreHeader> ParseKcoreHeader(std::span<const std::byte> bytes);

// The PT_LOAD whose [vaddr, vaddr + filesz) contains [addr, addr + size), or
// nullptr.
const ElfLoad* FindLoadCovering(const KcoreHeader& header, uint64_t addr, uint64_t size = 1);

// An open /proc/kcore (or any ELF core laid out the same way).
class KcoreFile {
 public:
  // Opens root/proc/kcore read-only and parses its headers. Errors carry errno
  // (EPERM without CAP_SYS_RAWIO or under lockdown, ENOENT without
  // CONFIG_PROC_KCORE).
  static Result<KcoreFile> Open(const base::RootPath& root);
  static Result<KcoreFile> OpenPath(const std::string& path);

  [[nodiscard]] const KcoreHeader& header() const { return header_; }

  // Reads out.size() bytes of kernel memory at virtual address `vaddr`. Fails
  // when no PT_LOAD covers the whole range or the read comes up short.
  Result<void> ReadAt(uint64_t vaddr, std::span<std::byte> out) const;

 private:
  KcoreFile(base::UniqueFd fd, KcoreHeader header, std::string path)
      : fd_(std::move(fd)), header_(std::move(header)), path_(std::move(path)) {}
  base::UniqueFd fd_;
  KcoreHeader header_;
  std::string path_;
};

}  // namespace ptsnap::sys
