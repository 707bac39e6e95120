#include "elf/segments.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace ptsnap::elf {

std::optional<LoadLayout> ParseLoadLayout(std::string_view bytes) {
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof(eh)) return std::nullopt;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64)
    return std::nullopt;
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) return std::nullopt;
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return std::nullopt;
  LoadLayout layout;
  layout.pie = eh.e_type == ET_DYN;
  layout.entry = eh.e_entry;
  for (uint32_t i = 0; i < eh.e_phnum; ++i) {
    const uint64_t off = eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr);
    if (off < eh.e_phoff || off > bytes.size() || bytes.size() - off < sizeof(Elf64_Phdr))
      return std::nullopt;
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + off, sizeof(ph));
    if (ph.p_type == PT_LOAD) {
      layout.segments.push_back(
          {ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
    } else if (ph.p_type == PT_INTERP) {
      if (ph.p_offset > bytes.size() || bytes.size() - ph.p_offset < ph.p_filesz)
        return std::nullopt;
      std::string_view s = bytes.substr(ph.p_offset, ph.p_filesz);
      layout.interp = std::string(s.substr(0, s.find('\0')));
    }
  }
  return layout;
}

std::optional<uint64_t> LowestExecVaddr(std::span<const Segment> segments) {
  std::optional<uint64_t> lo;
  for (const auto& s : segments)
    if (s.exec && (!lo || s.vaddr < *lo)) lo = s.vaddr;
  return lo;
}

std::optional<uint64_t> OffsetToVaddr(std::span<const Segment> segments, uint64_t offset) {
  for (const auto& seg : segments) {
    const uint64_t start = seg.offset & ~uint64_t{0xfff};
    if (offset >= start && offset < seg.offset + std::max(seg.filesz, uint64_t{1})) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  return std::nullopt;
}

}  // namespace ptsnap::elf
