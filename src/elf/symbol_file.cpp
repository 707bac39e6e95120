#include "elf/symbol_file.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <lzma.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/libelf_util.h"

namespace ptsnap::elf {

namespace {

size_t LeadingUnderscores(const std::string& name) {
  const size_t n = name.find_first_not_of('_');
  return n == std::string::npos ? name.size() : n;
}

// Among symbols at one address, the one that names it: the name users
// type. A sized symbol; then one of the current version (not libc's
// `cfree@GLIBC_2.2.5`); then an exported one (global or weak) before a
// local alias (a debug file's `__GI___libc_write`); then the fewest leading
// underscores (`printf`, not `_IO_printf`; `write`, not `__write`); then a
// global before a weak one; else the first read (.symtab before .dynsym).
// perf's choose_best_symbol ranks binding before underscores and so shows
// `__GI___libc_write`; tools/perf-agree compares by alias, so both agree.
bool NamesItBetter(const Symbol& a, const Symbol& b) {
  if ((a.size != 0) != (b.size != 0)) return a.size != 0;
  if (a.old_version != b.old_version) return b.old_version;
  using B = Symbol::Binding;
  if ((a.binding == B::kLocal) != (b.binding == B::kLocal)) return b.binding == B::kLocal;
  const size_t ua = LeadingUnderscores(a.name), ub = LeadingUnderscores(b.name);
  if (ua != ub) return ua < ub;
  if ((a.binding == B::kWeak) != (b.binding == B::kWeak)) return b.binding == B::kWeak;
  return false;
}

}  // namespace

void SymbolTable::Finish() {
  std::stable_sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) {
    if (a.start != b.start) return a.start < b.start;
    return NamesItBetter(a, b);
  });
  std::vector<Symbol> out;
  out.reserve(symbols_.size());
  for (auto& s : symbols_) {
    if (!out.empty() && out.back().start == s.start) continue;  // alias: keep the first
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].size == 0 && i + 1 < out.size()) out[i].size = out[i + 1].start - out[i].start;
  }
  symbols_ = std::move(out);
}

const Symbol* SymbolTable::Find(uint64_t addr) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.start; });
  if (it == symbols_.begin()) return nullptr;
  --it;
  // A zero size (the last symbol) covers up to 64 KiB: kallsyms' last entry.
  uint64_t size = it->size != 0 ? it->size : 0x10000;
  if (addr - it->start < size) return &*it;
  return nullptr;
}

std::string Demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string copy(name);
  int status = 0;
  char* out = abi::__cxa_demangle(copy.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return copy;
  std::string result(out);
  std::free(out);
  return result;
}

// C++: `_Z3fooi.cold`.
bool IsSplitPartName(std::string_view name) {
  for (size_t at = name.find(".cold"); at != std::string_view::npos;
       at = name.find(".cold", at + 1)) {
    const size_t after = at + 5;
    if (after == name.size() || name[after] == '.') return true;
  }
  return false;
}

namespace {

bool SectionIsCode(Elf* elf, size_t index) {
  GElf_Shdr shdr;
  Elf_Scn* scn = elf_getscn(elf, index);
  return scn != nullptr && gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_EXECINSTR);
}

// The .eh_frame section's bytes and virtual address; no bytes when there is
// none (or a separate debug file's NOBITS copy).
struct EhFrameSection {
  std::span<const std::byte> bytes;
  uint64_t vaddr = 0;
};
EhFrameSection FindEhFrame(Elf* elf, size_t shstrndx) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type == SHT_NOBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (name == nullptr || std::strcmp(name, ".eh_frame") != 0) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) return {};
    return {{static_cast<const std::byte*>(data->d_buf), data->d_size}, shdr.sh_addr};
  }
  return {};
}

// The .eh_frame section's FDEs; empty when there is none.
std::vector<FdeRange> ReadEhFrame(Elf* elf, size_t shstrndx) {
  const EhFrameSection section = FindEhFrame(elf, shstrndx);
  if (section.bytes.empty()) return {};
  return ParseEhFrame(section.bytes, section.vaddr);
}

// The bytes of the section named `name`, empty when none.
std::span<const std::byte> SectionBytes(Elf* elf, size_t shstrndx, const char* name) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type == SHT_NOBITS) continue;
    const char* n = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (n == nullptr || std::strcmp(n, name) != 0) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) return {};
    return {static_cast<const std::byte*>(data->d_buf), data->d_size};
  }
  return {};
}

// Functions, plus code labels that no function covers: assembly entry
// points such as ld.so's _start and _dl_start_user are untyped symbols in an
// executable section, and perf names that code by them too. A label inside
// a function (a local jump target) is not a function of its own.
// The .gnu.version entries of the dynamic symbol table `dynsym` (by symbol
// index); none for other tables or when the file has no versions.
const Elf_Data* VersionsOf(Elf* elf, Elf_Scn* dynsym) {
  const size_t want = elf_ndxscn(dynsym);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_GNU_versym &&
        shdr.sh_link == want)
      return elf_getdata(scn, nullptr);
  }
  return nullptr;
}

void ReadSymbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, SymbolTable* table) {
  std::vector<std::pair<uint64_t, uint64_t>> functions;  // [start, end)
  std::vector<Symbol> labels;
  const Elf_Data* versions = shdr.sh_type == SHT_DYNSYM ? VersionsOf(elf, scn) : nullptr;
  internal::ForEachNamedSymbol(
      elf, scn, shdr, [&](const GElf_Sym& sym, const char* name, size_t index) {
        const int type = GELF_ST_TYPE(sym.st_info);
        const bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
        if (!function && type != STT_NOTYPE) return;
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE || sym.st_value == 0) return;
        if (!function && !SectionIsCode(elf, sym.st_shndx)) return;
        if (function) {
          functions.emplace_back(sym.st_value, sym.st_value + sym.st_size);
          // A .symtab (a debug file's, say) spells versions into names:
          // `memcpy@@GLIBC_2.14` (the default version), `cfree@GLIBC_2.2.5`
          // (an old one). The function is `memcpy` as users type it; the
          // single `@` marks an old version, as .gnu.version's hidden bit.
          std::string_view bare(name);
          bool old_version = false;
          if (const size_t at = bare.find('@'); at != std::string_view::npos && at > 0) {
            old_version = bare.substr(at, 2) != "@@";
            bare = bare.substr(0, at);
          }
          Symbol s{sym.st_value, sym.st_size, Demangle(bare), IsSplitPartName(bare)};
          const int bind = GELF_ST_BIND(sym.st_info);
          s.binding = bind == STB_WEAK    ? Symbol::Binding::kWeak
                      : bind == STB_LOCAL ? Symbol::Binding::kLocal
                                          : Symbol::Binding::kGlobal;
          // A hidden version (libc's `cfree@GLIBC_2.2.5`, kept for old
          // binaries): no program links to it by that name today.
          GElf_Versym v = 0;
          if (versions != nullptr &&
              gelf_getversym(const_cast<Elf_Data*>(versions), static_cast<int>(index), &v) !=
                  nullptr &&
              (v & 0x8000) != 0)
            old_version = true;
          s.old_version = old_version;
          table->Add(std::move(s));
        } else if (name[0] != '.') {  // .L local labels never name code
          labels.push_back(Symbol{sym.st_value, 0, name});
        }
      });
  std::sort(functions.begin(), functions.end());
  for (auto& label : labels) {
    auto it = std::upper_bound(functions.begin(), functions.end(),
                               std::make_pair(label.start, UINT64_MAX));
    bool inside = it != functions.begin() && label.start < std::prev(it)->second;
    if (!inside) table->Add(std::move(label));
  }
}

// The dynamic symbol name of relocation `r` (in a section linked to .dynsym).
const char* RelocSymbolName(Elf* elf, Elf_Data* symdata, const GElf_Shdr& dynsym_hdr,
                            const GElf_Rela& r) {
  GElf_Sym sym;
  if (gelf_getsym(symdata, static_cast<int>(GELF_R_SYM(r.r_info)), &sym) == nullptr) return nullptr;
  const char* name = elf_strptr(elf, dynsym_hdr.sh_link, sym.st_name);
  return (name != nullptr && *name != '\0') ? name : nullptr;
}

// .plt.got entries (`jmp *slot(%rip)`, after an endbr64 with IBT) call
// functions bound at load time: the slot's GLOB_DAT relocation in .rela.dyn
// names them (objdump and perf >= 6.3 show "__cxa_finalize@plt").
void ReadPltGot(Elf* elf, Elf_Scn* plt_got, const GElf_Shdr& plt_got_hdr, Elf_Scn* rela_dyn,
                const GElf_Shdr& rela_dyn_hdr, SymbolTable* table) {
  Elf_Data* code = elf_getdata(plt_got, nullptr);
  Elf_Data* data = elf_getdata(rela_dyn, nullptr);
  Elf_Scn* dynsym = elf_getscn(elf, rela_dyn_hdr.sh_link);
  GElf_Shdr dynsym_hdr;
  if (code == nullptr || code->d_buf == nullptr || data == nullptr || dynsym == nullptr ||
      gelf_getshdr(dynsym, &dynsym_hdr) == nullptr || rela_dyn_hdr.sh_entsize == 0) {
    return;
  }
  Elf_Data* symdata = elf_getdata(dynsym, nullptr);
  if (symdata == nullptr) return;
  const auto* bytes = static_cast<const unsigned char*>(code->d_buf);
  const uint64_t entsize = plt_got_hdr.sh_entsize >= 8 ? plt_got_hdr.sh_entsize : 8;
  const size_t nrela = rela_dyn_hdr.sh_size / rela_dyn_hdr.sh_entsize;
  for (uint64_t off = 0; off + entsize <= code->d_size; off += entsize) {
    uint64_t i = off;
    if (entsize >= 16 && std::memcmp(bytes + i, "\xf3\x0f\x1e\xfa", 4) == 0) i += 4;  // endbr64
    if (bytes[i] != 0xff || bytes[i + 1] != 0x25) continue;  // jmp *disp32(%rip)
    int32_t disp;
    std::memcpy(&disp, bytes + i + 2, 4);
    uint64_t slot = plt_got_hdr.sh_addr + i + 6 + static_cast<int64_t>(disp);
    for (size_t k = 0; k < nrela; ++k) {
      GElf_Rela r;
      if (gelf_getrela(data, static_cast<int>(k), &r) == nullptr) break;
      if (r.r_offset != slot) continue;
      if (const char* name = RelocSymbolName(elf, symdata, dynsym_hdr, r)) {
        table->Add(Symbol{plt_got_hdr.sh_addr + off, entsize, Demangle(name) + "@plt"});
      }
      break;
    }
  }
}

// PLT stubs of .plt.sec (or .plt): each jumps through a GOT slot, and the
// .rela.plt entry for that slot names it: "sym@plt", as objdump shows them;
// an IRELATIVE entry names the IFUNC ("memset@plt", where objdump prints
// "*ABS*+0x9c840@plt"). The 16-byte header (PLT0, the lazy-binding
// trampoline) is named ".plt", as perf >= 6.3 does: it bounds the symbol
// before it, so a zero-size `_init` in .init is not stretched over .plt
// (perf 6.1 names PLT0 and every stub "_init+0x..." for that reason).
void ReadPlt(Elf* elf, size_t shstrndx, SymbolTable* table) {
  Elf_Scn* plt = nullptr;
  Elf_Scn* plt_sec = nullptr;
  Elf_Scn* plt_got = nullptr;
  Elf_Scn* rela = nullptr;
  Elf_Scn* rela_dyn = nullptr;
  GElf_Shdr plt_hdr{}, plt_sec_hdr{}, plt_got_hdr{}, rela_hdr{}, rela_dyn_hdr{};
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (name == nullptr) continue;
    if (std::strcmp(name, ".plt") == 0) plt = scn, plt_hdr = shdr;
    if (std::strcmp(name, ".plt.sec") == 0) plt_sec = scn, plt_sec_hdr = shdr;
    if (std::strcmp(name, ".plt.got") == 0) plt_got = scn, plt_got_hdr = shdr;
    if (std::strcmp(name, ".rela.plt") == 0) rela = scn, rela_hdr = shdr;
    if (std::strcmp(name, ".rela.dyn") == 0) rela_dyn = scn, rela_dyn_hdr = shdr;
  }
  if (plt_got != nullptr && rela_dyn != nullptr && plt_got_hdr.sh_type == SHT_PROGBITS &&
      rela_dyn_hdr.sh_type == SHT_RELA) {
    ReadPltGot(elf, plt_got, plt_got_hdr, rela_dyn, rela_dyn_hdr, table);
  }
  if (plt != nullptr && plt_hdr.sh_type == SHT_PROGBITS && plt_hdr.sh_size >= 16) {
    // PLT0 starts with `push GOT+8(%rip)` (ff 35); static binaries' .plt
    // (IFUNC stubs only) has no header.
    Elf_Data* code = elf_getdata(plt, nullptr);
    const auto* c = code != nullptr ? static_cast<const unsigned char*>(code->d_buf) : nullptr;
    if (c != nullptr && code->d_size >= 16 && c[0] == 0xff && c[1] == 0x35) {
      table->Add(Symbol{plt_hdr.sh_addr, 16, ".plt"});
    }
  }
  if (rela == nullptr || (plt == nullptr && plt_sec == nullptr)) return;
  Elf_Data* data = elf_getdata(rela, nullptr);
  if (data == nullptr || rela_hdr.sh_entsize == 0) return;
  // IRELATIVE relocations name no symbol: their addend is the IFUNC's
  // resolver, which the symbol tables name (memset, strlen...).
  std::unordered_map<uint64_t, std::string> ifuncs;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    if (shdr.sh_type != SHT_DYNSYM && shdr.sh_type != SHT_SYMTAB) continue;
    internal::ForEachNamedSymbol(elf, scn, shdr, [&](const GElf_Sym& sym, const char* name) {
      if (GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC && sym.st_value != 0)
        ifuncs.emplace(sym.st_value, name);
    });
  }
  // Each stub jumps through the GOT slot its relocation fills: name stubs
  // by slot, not by position. Their order need not follow .rela.plt's:
  // libc's IRELATIVE entries come last there, their stubs first.
  Elf_Scn* dynsym = elf_getscn(elf, rela_hdr.sh_link);
  GElf_Shdr dynsym_hdr{};
  Elf_Data* symdata = nullptr;
  if (dynsym != nullptr && gelf_getshdr(dynsym, &dynsym_hdr) != nullptr &&
      dynsym_hdr.sh_type == SHT_DYNSYM) {
    symdata = elf_getdata(dynsym, nullptr);
  }
  std::unordered_map<uint64_t, std::string> by_slot;
  for (size_t i = 0; i < rela_hdr.sh_size / rela_hdr.sh_entsize; ++i) {
    GElf_Rela r;
    if (gelf_getrela(data, static_cast<int>(i), &r) == nullptr) break;
    const char* name = nullptr;
    if (GELF_R_TYPE(r.r_info) == R_X86_64_IRELATIVE) {
      auto it = ifuncs.find(static_cast<uint64_t>(r.r_addend));
      if (it != ifuncs.end()) name = it->second.c_str();
    } else if (symdata != nullptr) {
      name = RelocSymbolName(elf, symdata, dynsym_hdr, r);
    }
    if (name != nullptr) by_slot.emplace(r.r_offset, Demangle(name) + "@plt");
  }
  Elf_Scn* stubs = plt_sec != nullptr ? plt_sec : plt;
  const GElf_Shdr& stubs_hdr = plt_sec != nullptr ? plt_sec_hdr : plt_hdr;
  Elf_Data* code = elf_getdata(stubs, nullptr);
  if (code == nullptr || code->d_buf == nullptr) return;
  const auto* c = static_cast<const unsigned char*>(code->d_buf);
  // 16-byte stubs, or 8 (`jmp *slot; xchg %ax,%ax`) in static binaries'
  // IFUNC-only .plt, whose sh_entsize is 0.
  const size_t nrela = rela_hdr.sh_size / rela_hdr.sh_entsize;
  const uint64_t kStub = stubs_hdr.sh_entsize == 8 || stubs_hdr.sh_entsize == 16
                             ? stubs_hdr.sh_entsize
                             : (nrela != 0 && code->d_size == nrela * 8 ? 8 : 16);
  for (uint64_t off = 0; off + kStub <= code->d_size; off += kStub) {
    // `jmp *disp(%rip)` (ff 25), maybe as `bnd jmp` (f2 ff 25), maybe after
    // an endbr64 (f3 0f 1e fa); PLT0 (ff 35 ...) matches none.
    for (uint64_t at : {uint64_t{0}, uint64_t{4}}) {
      if (off + at + 6 > code->d_size) break;
      const unsigned char* e = c + off + at;
      const uint64_t op = e[0] == 0xf2 ? 1 : 0;
      if (off + at + op + 6 > code->d_size) break;
      if (e[op] != 0xff || e[op + 1] != 0x25) continue;
      int32_t disp;
      std::memcpy(&disp, e + op + 2, sizeof disp);
      const uint64_t slot = stubs_hdr.sh_addr + off + at + op + 6 + static_cast<int64_t>(disp);
      if (auto it = by_slot.find(slot); it != by_slot.end()) {
        table->Add(Symbol{stubs_hdr.sh_addr + off, kStub, it->second});
      }
      break;
    }
  }
}

// An ELF file opened for libelf (the handle before the fd it reads: it is
// destroyed first).
struct OpenedElf {
  base::UniqueFd fd;
  internal::ElfHandle elf;
};

Result<OpenedElf> OpenElf(const std::filesystem::path& path) {
  OpenedElf o;
  o.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!o.fd) return Error::FromErrno("opening " + path.string());
  elf_version(EV_CURRENT);
  o.elf.reset(elf_begin(o.fd.get(), ELF_C_READ_MMAP, nullptr));
  if (o.elf == nullptr || elf_kind(o.elf.get()) != ELF_K_ELF) {
    return Error(path.string() + " is not an ELF file");
  }
  return o;
}

}  // namespace

Result<SymbolFile> SymbolFile::Open(const std::filesystem::path& path) {
  PTSNAP_ASSIGN_OR_RETURN(OpenedElf opened, OpenElf(path));
  const internal::ElfHandle& elf = opened.elf;
  SymbolFile out;
  out.path_ = path;
  out.segments_ = internal::LoadSegments(elf.get());
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) shstrndx = 0;
  Elf_Scn* dynsym = nullptr;
  GElf_Shdr dynsym_hdr{};
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn != nullptr;
       scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    if (shdr.sh_type == SHT_SYMTAB) {
      ReadSymbols(elf.get(), scn, shdr, &out.symbols_);
      out.has_symtab_ = true;
    } else if (shdr.sh_type == SHT_DYNSYM) {
      dynsym = scn;
      dynsym_hdr = shdr;
    }
  }
  out.debuglink_ = internal::DebugLink(elf.get());
  // .dynsym adds exported names that a stripped .symtab lacks; duplicates
  // by address are dropped in Finish().
  if (dynsym != nullptr) ReadSymbols(elf.get(), dynsym, dynsym_hdr, &out.symbols_);
  if (shstrndx != 0) ReadPlt(elf.get(), shstrndx, &out.symbols_);
  if (shstrndx != 0 && !out.has_symtab_) {
    const SymbolTable mini =
        ParseMiniDebugInfo(SectionBytes(elf.get(), shstrndx, ".gnu_debugdata"));
    for (const Symbol& s : mini.symbols()) out.symbols_.Add(s);
  }
  out.build_id_ = internal::BuildIdNote(elf.get());
  if (shstrndx != 0) out.fdes_ = ReadEhFrame(elf.get(), shstrndx);
  out.symbols_.Finish();
  out.AddFdeFunctions();
  return out;
}

void SymbolFile::MergeSymbols(const SymbolFile& debug) {
  symbols_.DropUnnamed();
  for (const auto& s : debug.symbols_.symbols()) {
    if (!s.unnamed) symbols_.Add(s);
  }
  symbols_.Finish();
  AddFdeFunctions();
  has_symtab_ = has_symtab_ || debug.has_symtab_;
}

void SymbolFile::AddFdeFunctions() {
  if (fdes_.empty()) return;
  symbols_.DropUnnamed();
  symbols_.Finish();
  const std::string file = path_.filename().string();
  std::vector<Symbol> add;
  for (const FdeRange& f : fdes_) {
    // Only code no symbol names: a symbol's own range wins, FDE or not.
    if (symbols_.Find(f.start) != nullptr) continue;
    char buf[32];
    std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(f.start));
    add.push_back(Symbol{f.start, f.end - f.start, file + buf, !f.entry, true});
  }
  if (add.empty()) return;
  for (auto& s : add) symbols_.Add(std::move(s));
  symbols_.Finish();
}

Result<CfaTable> ReadCfaTable(const std::filesystem::path& path) {
  PTSNAP_ASSIGN_OR_RETURN(OpenedElf opened, OpenElf(path));
  const internal::ElfHandle& elf = opened.elf;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) return CfaTable();
  const EhFrameSection section = FindEhFrame(elf.get(), shstrndx);
  return ParseCfaTable(section.bytes, section.vaddr);
}

SymbolTable ParseMiniDebugInfo(std::span<const std::byte> xz) {
  SymbolTable table;
  if (xz.empty()) return table;
  constexpr size_t kMaxOut = size_t{256} << 20;
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, 0) != LZMA_OK) return table;
  std::string out(std::max<size_t>(xz.size() * 4, 4096), '\0');
  strm.next_in = reinterpret_cast<const uint8_t*>(xz.data());
  strm.avail_in = xz.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    if (strm.total_out == out.size()) {
      if (out.size() >= kMaxOut) break;
      out.resize(std::min(out.size() * 2, kMaxOut));
    }
    strm.next_out = reinterpret_cast<uint8_t*>(out.data()) + strm.total_out;
    strm.avail_out = out.size() - strm.total_out;
    ret = lzma_code(&strm, LZMA_FINISH);
  }
  const size_t size = strm.total_out;
  lzma_end(&strm);
  if (ret != LZMA_STREAM_END) return table;
  elf_version(EV_CURRENT);
  internal::ElfHandle inner(elf_memory(out.data(), size));
  if (inner == nullptr || elf_kind(inner.get()) != ELF_K_ELF) return table;
  for (Elf_Scn* scn = elf_nextscn(inner.get(), nullptr); scn != nullptr;
       scn = elf_nextscn(inner.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_SYMTAB)
      ReadSymbols(inner.get(), scn, shdr, &table);
  }
  table.Finish();
  return table;
}

SymbolTable ParsePerfMap(std::string_view text) {
  SymbolTable table;
  for (std::string_view line : base::Split(text, '\n')) {
    line = base::Trim(line);
    auto sp1 = line.find(' ');
    if (sp1 == std::string_view::npos) continue;
    auto sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) continue;
    auto strip = [](std::string_view s) {
      return (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? s.substr(2) : s;
    };
    auto start = base::ParseUint(strip(line.substr(0, sp1)), 16);
    auto size = base::ParseUint(strip(line.substr(sp1 + 1, sp2 - sp1 - 1)), 16);
    if (!start || !size || *size == 0) continue;
    const std::string_view name = base::Trim(line.substr(sp2 + 1));
    table.Add(Symbol{*start, *size, Demangle(name), IsSplitPartName(name)});
  }
  table.Finish();
  return table;
}

}  // namespace ptsnap::elf
