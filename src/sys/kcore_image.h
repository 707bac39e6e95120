// Writing an ELF64 core laid out like /proc/kcore: the ELF header, one
// program header per segment, then each segment's bytes at a page-aligned
// file offset (fs/proc/kcore.c lays out its PT_LOADs the same way). The
// recorder writes the trace's kernel image with it (record/kcore_copy.h),
// and tests build fake /proc/kcore files with it; KcoreFile and
// ParseKcoreHeader (sys/kcore.h) read it back.
#pragma once

#include <elf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sys/kcore.h"

namespace ptsnap::sys {

struct CoreSegment {
  uint32_t type = PT_LOAD;  // PT_LOAD, or PT_NOTE for a note segment
  uint64_t vaddr = 0;
  uint64_t paddr = 0;
  uint32_t flags = 0;  // 0: PF_R | PF_X for a PT_LOAD, none for other types
  std::string bytes;   // p_filesz = p_memsz = bytes.size()
};

// Pure: the ELF64 little-endian ET_CORE image for `machine` (EM_X86_64 = 62)
// holding `segments` in order. When `loads` is given, appends one ElfLoad per
// PT_LOAD as written (vaddr, paddr, file offset, sizes, flags).
std::string BuildCoreImage(const std::vector<CoreSegment>& segments, uint16_t machine = EM_X86_64,
                           std::vector<ElfLoad>* loads = nullptr);

}  // namespace ptsnap::sys
