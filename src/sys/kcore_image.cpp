#include "sys/kcore_image.h"

#include <cstring>

namespace ptsnap::sys {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t RoundUp(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

}  // namespace

std::string BuildCoreImage(const std::vector<CoreSegment>& segments, uint16_t machine,
                           std::vector<ElfLoad>* loads) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_CORE;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = static_cast<uint16_t>(segments.size());
  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  uint64_t offset = RoundUp(sizeof(Elf64_Ehdr) + segments.size() * sizeof(Elf64_Phdr));
  std::vector<uint64_t> offsets;
  for (const CoreSegment& s : segments) {
    Elf64_Phdr ph{};
    ph.p_type = s.type;
    ph.p_flags = s.flags != 0 || s.type != PT_LOAD ? s.flags : (PF_R | PF_X);
    ph.p_offset = offset;
    ph.p_vaddr = s.vaddr;
    ph.p_paddr = s.paddr;
    ph.p_filesz = ph.p_memsz = s.bytes.size();
    ph.p_align = s.type == PT_LOAD ? kPage : 4;
    out.append(reinterpret_cast<const char*>(&ph), sizeof ph);
    if (loads != nullptr && s.type == PT_LOAD) {
      loads->push_back({s.vaddr, s.paddr, offset, s.bytes.size(), s.bytes.size(), ph.p_flags});
    }
    offsets.push_back(offset);
    offset = RoundUp(offset + s.bytes.size());
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    out.resize(offsets[i], '\0');
    out += segments[i].bytes;
  }
  return out;
}

}  // namespace ptsnap::sys
