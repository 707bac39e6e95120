#include "elf/segments.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace ptsnap::elf {

namespace {

// Program headers beyond this are not plausible (a kcore has a few dozen,
// an executable a dozen); it bounds what readers allocate.
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

}  // namespace

Result<ElfHeader> ParseElfHeader(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(Elf64_Ehdr)) {
    return Error("ELF header truncated: " + std::to_string(bytes.size()) + " of " +
                 std::to_string(sizeof(Elf64_Ehdr)) + " bytes");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Error("not an ELF file (bad magic)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Error("not a 64-bit ELF file");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Error("not a little-endian ELF file");
  return ElfHeader{eh.e_type, eh.e_machine, eh.e_entry, eh.e_phoff, eh.e_phentsize, eh.e_phnum};
}

Result<size_t> HeadersSize(const ElfHeader& header) {
  if (header.phnum == 0) return Error("no program headers");
  if (header.phnum == PN_XNUM) return Error("extended program header count (PN_XNUM) unsupported");
  if (header.phentsize != sizeof(Elf64_Phdr)) {
    return Error("program header size " + std::to_string(header.phentsize) + " is not " +
                 std::to_string(sizeof(Elf64_Phdr)));
  }
  // phnum < 2^16 and entsize 56: the product cannot overflow.
  const uint64_t table = uint64_t{header.phnum} * header.phentsize;
  if (header.phoff > kMaxHeaderBytes || table > kMaxHeaderBytes - header.phoff) {
    return Error("program header table at offset " + std::to_string(header.phoff) +
                 " is beyond the plausible header size");
  }
  return std::max(static_cast<size_t>(header.phoff + table), sizeof(Elf64_Ehdr));
}

Result<std::vector<ProgramHeader>> ParseProgramHeaders(std::span<const std::byte> bytes,
                                                       const ElfHeader& header) {
  PTSNAP_ASSIGN_OR_RETURN(size_t end, HeadersSize(header));
  if (end > bytes.size()) {
    return Error("program headers truncated: need " + std::to_string(end) + " bytes, have " +
                 std::to_string(bytes.size()));
  }
  std::vector<ProgramHeader> out;
  out.reserve(header.phnum);
  for (size_t i = 0; i < header.phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + header.phoff + i * sizeof(Elf64_Phdr), sizeof ph);
    if (ph.p_type == PT_LOAD) {
      if (ph.p_offset + ph.p_filesz < ph.p_offset) {
        return Error("PT_LOAD " + std::to_string(i) + ": file range overflows");
      }
      if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr && ph.p_vaddr + ph.p_filesz != 0) {
        return Error("PT_LOAD " + std::to_string(i) + ": address range overflows");
      }
      if (ph.p_filesz > ph.p_memsz) {
        return Error("PT_LOAD " + std::to_string(i) + ": p_filesz exceeds p_memsz");
      }
    }
    out.push_back(
        {ph.p_vaddr, ph.p_paddr, ph.p_offset, ph.p_filesz, ph.p_memsz, ph.p_flags, ph.p_type});
  }
  return out;
}

std::optional<LoadLayout> ParseLoadLayout(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  auto header = ParseElfHeader(bytes);
  if (!header || header->machine != EM_X86_64) return std::nullopt;
  if (header->type != ET_EXEC && header->type != ET_DYN) return std::nullopt;
  auto phdrs = ParseProgramHeaders(bytes, *header);
  if (!phdrs) return std::nullopt;
  LoadLayout layout;
  layout.pie = header->type == ET_DYN;
  layout.entry = header->entry;
  for (const ProgramHeader& ph : *phdrs) {
    if (ph.type == PT_LOAD) {
      layout.segments.push_back({ph.vaddr, ph.offset, ph.filesz, ph.memsz, (ph.flags & PF_X) != 0});
    } else if (ph.type == PT_INTERP) {
      if (ph.offset > text.size() || text.size() - ph.offset < ph.filesz) return std::nullopt;
      std::string_view s = text.substr(ph.offset, ph.filesz);
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
