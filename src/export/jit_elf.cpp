#include "export/jit_elf.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace ptsnap::exporter {

namespace {

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof value);
}

void AlignTo(std::string* out, size_t align) {
  out->resize((out->size() + align - 1) / align * align, '\0');
}

// Section indexes, in file order.
enum : uint16_t { kNull, kText, kNote, kSymtab, kStrtab, kShstrtab, kSections };

}  // namespace

std::string JitBuildId(uint64_t addr, std::string_view code) {
  // FNV-1a, 64-bit, run with three different seeds over (addr, code): 20
  // bytes that differ when either differs. A build-id only has to tell
  // files apart in perf's tables, not resist forgery.
  std::string id;
  for (uint64_t seed : {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL}) {
    uint64_t h = seed;
    auto mix = [&h](uint8_t b) {
      h ^= b;
      h *= 0x100000001b3ULL;
    };
    for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(addr >> (8 * i)));
    for (char c : code) mix(static_cast<uint8_t>(c));
    Append(&id, h);
  }
  id.resize(kJitBuildIdSize);
  return id;
}

std::string MakeJitElf(uint64_t addr, std::string_view code,
                       std::span<const JitElfSymbol> symbols) {
  std::string out(sizeof(Elf64_Ehdr), '\0');
  Elf64_Shdr sh[kSections] = {};

  // .text: the code, at file offset and address kJitElfTextOffset.
  static_assert(sizeof(Elf64_Ehdr) == kJitElfTextOffset);
  out.append(code);
  sh[kText].sh_type = SHT_PROGBITS;
  sh[kText].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh[kText].sh_addr = kJitElfTextOffset;
  sh[kText].sh_offset = kJitElfTextOffset;
  sh[kText].sh_size = code.size();
  sh[kText].sh_addralign = 16;

  // .note.gnu.build-id: namesz 4 ("GNU\0"), descsz 20, NT_GNU_BUILD_ID.
  AlignTo(&out, 4);
  sh[kNote].sh_type = SHT_NOTE;
  sh[kNote].sh_flags = SHF_ALLOC;
  sh[kNote].sh_offset = out.size();
  Append(&out, Elf64_Nhdr{4, kJitBuildIdSize, NT_GNU_BUILD_ID});
  out.append("GNU\0", 4);
  out.append(JitBuildId(addr, code));
  sh[kNote].sh_size = out.size() - sh[kNote].sh_offset;
  sh[kNote].sh_addralign = 4;

  // .symtab and .strtab: the null symbol, then one STT_FUNC per name.
  std::string strtab(1, '\0');
  std::vector<Elf64_Sym> syms(1);
  for (const JitElfSymbol& s : symbols) {
    if (s.name.empty() || s.offset >= code.size() || s.size == 0) continue;
    Elf64_Sym e = {};
    e.st_name = static_cast<uint32_t>(strtab.size());
    e.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    e.st_shndx = kText;
    e.st_value = kJitElfTextOffset + s.offset;
    e.st_size = std::min<uint64_t>(s.size, code.size() - s.offset);
    syms.push_back(e);
    strtab.append(s.name);
    strtab.push_back('\0');
  }
  AlignTo(&out, 8);
  sh[kSymtab].sh_type = SHT_SYMTAB;
  sh[kSymtab].sh_offset = out.size();
  for (const Elf64_Sym& e : syms) Append(&out, e);
  sh[kSymtab].sh_size = out.size() - sh[kSymtab].sh_offset;
  sh[kSymtab].sh_link = kStrtab;
  sh[kSymtab].sh_info = 1;  // the first non-local symbol
  sh[kSymtab].sh_addralign = 8;
  sh[kSymtab].sh_entsize = sizeof(Elf64_Sym);
  sh[kStrtab].sh_type = SHT_STRTAB;
  sh[kStrtab].sh_offset = out.size();
  out.append(strtab);
  sh[kStrtab].sh_size = strtab.size();
  sh[kStrtab].sh_addralign = 1;

  // .shstrtab, names at the offsets noted.
  static constexpr char kNames[] = "\0.text\0.note.gnu.build-id\0.symtab\0.strtab\0.shstrtab";
  const std::string_view names(kNames, sizeof kNames);
  sh[kText].sh_name = static_cast<uint32_t>(names.find(".text"));
  sh[kNote].sh_name = static_cast<uint32_t>(names.find(".note.gnu.build-id"));
  sh[kSymtab].sh_name = static_cast<uint32_t>(names.find(".symtab"));
  sh[kStrtab].sh_name = static_cast<uint32_t>(names.find(".strtab"));
  sh[kShstrtab].sh_name = static_cast<uint32_t>(names.find(".shstrtab"));
  sh[kShstrtab].sh_type = SHT_STRTAB;
  sh[kShstrtab].sh_offset = out.size();
  out.append(names);
  sh[kShstrtab].sh_size = names.size();
  sh[kShstrtab].sh_addralign = 1;

  AlignTo(&out, 8);
  const uint64_t shoff = out.size();
  for (const Elf64_Shdr& s : sh) Append(&out, s);

  Elf64_Ehdr eh = {};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_entry = kJitElfTextOffset;
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = kSections;
  eh.e_shstrndx = kShstrtab;
  std::memcpy(out.data(), &eh, sizeof eh);
  return out;
}

}  // namespace ptsnap::exporter
