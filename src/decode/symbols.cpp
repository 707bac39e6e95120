#include "decode/symbols.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "base/string_util.h"
#include "base/unique_fd.h"

namespace ptsnap::decode {

void SymbolTable::Finish() {
  std::stable_sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) {
    if (a.start != b.start) return a.start < b.start;
    return a.size > b.size;  // sized entries first among aliases
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

namespace {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

std::string HexBytes(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

bool SectionIsCode(Elf* elf, size_t index) {
  GElf_Shdr shdr;
  Elf_Scn* scn = elf_getscn(elf, index);
  return scn != nullptr && gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_EXECINSTR);
}

// Functions, plus code labels that no function covers: assembly entry
// points such as ld.so's _start and _dl_start_user are untyped symbols in an
// executable section, and perf names that code by them too. A label inside
// a function (a local jump target) is not a function of its own.
void ReadSymbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, SymbolTable* table) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || shdr.sh_entsize == 0) return;
  size_t count = shdr.sh_size / shdr.sh_entsize;
  std::vector<std::pair<uint64_t, uint64_t>> functions;  // [start, end)
  std::vector<Symbol> labels;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
    int type = GELF_ST_TYPE(sym.st_info);
    bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
    if (!function && type != STT_NOTYPE) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE || sym.st_value == 0) continue;
    if (!function && !SectionIsCode(elf, sym.st_shndx)) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    if (function) {
      functions.emplace_back(sym.st_value, sym.st_value + sym.st_size);
      table->Add(Symbol{sym.st_value, sym.st_size, Demangle(name)});
    } else if (name[0] != '.') {  // .L local labels never name code
      labels.push_back(Symbol{sym.st_value, 0, name});
    }
  }
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
    Elf_Data* syms = elf_getdata(scn, nullptr);
    if (syms == nullptr || shdr.sh_entsize == 0) continue;
    for (size_t i = 0; i < shdr.sh_size / shdr.sh_entsize; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(syms, static_cast<int>(i), &sym) == nullptr) break;
      if (GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC || sym.st_value == 0) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name != nullptr && *name != '\0') ifuncs.emplace(sym.st_value, name);
    }
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

}  // namespace

Result<ElfFile> ElfFile::Open(const std::filesystem::path& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("opening " + path.string());
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) {
    return Error(path.string() + " is not an ELF file");
  }
  ElfFile out;
  out.path_ = path;
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) == 0) {
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) == nullptr) continue;
      if (ph.p_type == PT_LOAD) {
        out.segments_.push_back(LoadSegment{ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz,
                                            (ph.p_flags & PF_X) != 0});
      }
    }
  }
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
    } else if (shdr.sh_type == SHT_NOTE) {
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr) continue;
      size_t offset = 0, name_off = 0, desc_off = 0;
      GElf_Nhdr nhdr;
      while ((offset = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off)) > 0) {
        if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
            std::memcmp(static_cast<char*>(data->d_buf) + name_off, "GNU", 4) == 0) {
          out.build_id_ =
              HexBytes(static_cast<unsigned char*>(data->d_buf) + desc_off, nhdr.n_descsz);
        }
      }
    } else if (shstrndx != 0) {
      const char* name = elf_strptr(elf.get(), shstrndx, shdr.sh_name);
      if (name != nullptr && std::strcmp(name, ".gnu_debuglink") == 0) {
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (data != nullptr && data->d_size > 0) {
          const char* s = static_cast<const char*>(data->d_buf);
          out.debuglink_.assign(s, strnlen(s, data->d_size));
        }
      }
    }
  }
  // .dynsym adds exported names that a stripped .symtab lacks; duplicates
  // by address are dropped in Finish().
  if (dynsym != nullptr) ReadSymbols(elf.get(), dynsym, dynsym_hdr, &out.symbols_);
  if (shstrndx != 0) ReadPlt(elf.get(), shstrndx, &out.symbols_);
  out.symbols_.Finish();
  return out;
}

void ElfFile::MergeSymbols(const ElfFile& debug) {
  for (const auto& s : debug.symbols_.symbols()) symbols_.Add(s);
  symbols_.Finish();
  has_symtab_ = has_symtab_ || debug.has_symtab_;
}

std::optional<uint64_t> ElfFile::OffsetToVaddr(uint64_t offset) const {
  for (const auto& seg : segments_) {
    uint64_t start = seg.offset & ~uint64_t{0xfff};
    if (offset >= start && offset < seg.offset + std::max(seg.filesz, uint64_t{1})) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  return std::nullopt;
}

SymbolTable ParseKallsyms(std::string_view text) {
  SymbolTable table;
  for (std::string_view line : base::Split(text, '\n')) {
    auto f = base::SplitWhitespace(line);
    if (f.size() < 3 || f[1].size() != 1) continue;
    char t = f[1][0];
    if (t != 't' && t != 'T' && t != 'w' && t != 'W') continue;
    auto addr = base::ParseUint(f[0], 16);
    if (!addr || *addr == 0) continue;
    std::string name(f[2]);
    if (f.size() >= 4) name += " " + std::string(f[3]);  // "[module]"
    table.Add(Symbol{*addr, 0, std::move(name)});
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
    table.Add(Symbol{*start, *size, Demangle(base::Trim(line.substr(sp2 + 1)))});
  }
  table.Finish();
  return table;
}

// ---------------------------------------------------------------------------

struct Mapping {
  uint64_t start = 0, end = 0, pgoff = 0;
  const ElfFile* elf = nullptr;  // null: no symbols (anon, unreadable)
  const std::string* dso = nullptr;
  int64_t bias = 0;  // process address - ELF vaddr
};

class ProcessSymbols {
 public:
  std::map<uint64_t, Mapping> maps;  // by start
  std::vector<const SymbolTable*> jit;
  std::vector<std::unique_ptr<SymbolTable>> jit_owned;
  std::unordered_map<uint64_t, Resolved> cache;

  const Mapping* Find(uint64_t addr) const {
    auto it = maps.upper_bound(addr);
    if (it == maps.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }
  void Insert(Mapping m) {
    // Trim or remove overlapped mappings; the newer mapping wins.
    auto it = maps.lower_bound(m.start);
    if (it != maps.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > m.start) {
        Mapping tail = prev->second;
        prev->second.end = m.start;
        if (tail.end > m.end) {
          tail.pgoff += m.end - tail.start;
          tail.start = m.end;
          maps[tail.start] = tail;
        }
      }
    }
    it = maps.lower_bound(m.start);
    while (it != maps.end() && it->first < m.end) {
      if (it->second.end > m.end) {
        Mapping tail = it->second;
        tail.pgoff += m.end - tail.start;
        tail.start = m.end;
        maps.erase(it);
        maps[tail.start] = tail;
        break;
      }
      it = maps.erase(it);
    }
    maps[m.start] = m;
    cache.clear();
  }
};

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

const std::string* Symbolizer::Intern(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second.get();
  auto p = std::make_unique<std::string>(s);
  const std::string* raw = p.get();
  strings_.emplace(std::string(s), std::move(p));
  return raw;
}

void Symbolizer::SetKernelSymbols(SymbolTable kallsyms, uint64_t kernel_start) {
  kallsyms_ = std::move(kallsyms);
  kernel_start_ = kernel_start;
}

std::vector<std::filesystem::path> Symbolizer::DebugCandidates(const std::filesystem::path& path,
                                                               const ElfFile& elf) const {
  std::vector<std::filesystem::path> candidates;
  for (const auto& dir : debug_dirs_) {
    if (elf.build_id().size() > 2) {
      candidates.push_back(dir / ".build-id" / elf.build_id().substr(0, 2) /
                           (elf.build_id().substr(2) + ".debug"));
    }
    if (!elf.debuglink().empty()) {
      candidates.push_back(dir / path.parent_path().relative_path() / elf.debuglink());
      candidates.push_back(dir / elf.debuglink());
    }
  }
  if (!elf.debuglink().empty()) {
    candidates.push_back(path.parent_path() / elf.debuglink());
    candidates.push_back(path.parent_path() / ".debug" / elf.debuglink());
  }
  return candidates;
}

const ElfFile* Symbolizer::LoadElf(const std::filesystem::path& path) {
  auto it = elves_.find(path.string());
  if (it != elves_.end()) return it->second.get();
  std::unique_ptr<ElfFile> elf;
  if (auto r = ElfFile::Open(path); r) {
    elf = std::make_unique<ElfFile>(std::move(r).value());
    if (!elf->has_symtab()) {
      // Separate debug info: by build-id first, then by .gnu_debuglink.
      std::vector<std::filesystem::path> candidates = DebugCandidates(path, *elf);
      for (const auto& c : candidates) {
        std::error_code ec;
        if (c == path || !std::filesystem::is_regular_file(c, ec)) continue;
        if (auto dbg = ElfFile::Open(c); dbg && dbg->has_symtab()) {
          elf->MergeSymbols(*dbg);
          break;
        }
      }
    }
  }
  const ElfFile* raw = elf.get();
  elves_[path.string()] = std::move(elf);
  return raw;
}

ProcessSymbols& Symbolizer::Process(int32_t pid) {
  if (last_process_ != nullptr && last_pid_ == pid) return *last_process_;
  auto& p = processes_[pid];
  if (!p) p = std::make_unique<ProcessSymbols>();
  last_pid_ = pid;
  last_process_ = p.get();
  return *p;
}

void Symbolizer::AddMapping(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                            const std::filesystem::path& file, const std::string& dso) {
  if (len == 0) return;
  Mapping m;
  m.start = addr;
  m.end = addr + len;
  m.pgoff = pgoff;
  m.dso = Intern(dso);
  if (!file.empty()) m.elf = LoadElf(file);
  if (m.elf != nullptr) {
    auto vaddr = m.elf->OffsetToVaddr(pgoff);
    if (!vaddr && pgoff == 0 && !m.elf->segments().empty()) vaddr = m.elf->segments()[0].vaddr;
    if (vaddr) {
      m.bias = static_cast<int64_t>(addr - *vaddr);
    } else {
      m.elf = nullptr;
    }
  }
  Process(pid).Insert(m);
}

void Symbolizer::AddPerfMap(int32_t pid, SymbolTable table) {
  auto& p = Process(pid);
  p.jit_owned.push_back(std::make_unique<SymbolTable>(std::move(table)));
  p.jit.push_back(p.jit_owned.back().get());
  p.cache.clear();
}

void Symbolizer::ResetProcess(int32_t pid) {
  auto& p = Process(pid);
  p.maps.clear();
  p.cache.clear();
}

void Symbolizer::ForkProcess(int32_t parent, int32_t child) {
  if (parent == child) return;
  auto& src = Process(parent);
  auto& dst = Process(child);
  dst.maps = src.maps;
  dst.jit = src.jit;
  dst.cache.clear();
}

uint32_t Symbolizer::FunctionId(const std::string* dso, uint64_t start, const std::string* name) {
  auto key = std::make_pair(dso != nullptr ? dso : name, start);
  auto it = function_ids_.find(key);
  if (it != function_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(function_ids_.size() + 1);
  function_ids_.emplace(key, id);
  return id;
}

Resolved Symbolizer::Resolve(int32_t pid, uint64_t addr) {
  auto& proc = Process(pid);
  if (auto it = proc.cache.find(addr); it != proc.cache.end()) return it->second;
  Resolved r;
  if (IsKernelAddress(addr)) {
    static const std::string kKernel = "[kernel.kallsyms]";
    r.dso = Intern(kKernel);
    if (const Symbol* s = kallsyms_.Find(addr)) {
      r.known = true;
      r.start = s->start;
      r.end = s->start + (s->size != 0 ? s->size : 1);
      r.name = Intern(s->name);
    }
  } else if (const Mapping* m = proc.Find(addr)) {
    r.dso = m->dso;
    if (m->elf != nullptr) {
      uint64_t vaddr = addr - static_cast<uint64_t>(m->bias);
      if (const Symbol* s = m->elf->symbols().Find(vaddr)) {
        r.known = true;
        r.start = s->start + static_cast<uint64_t>(m->bias);
        r.end = r.start + std::max<uint64_t>(s->size, 1);
        r.name = Intern(s->name);
      }
    }
  }
  if (!r.known) {
    for (const SymbolTable* jit : proc.jit) {
      if (const Symbol* s = jit->Find(addr)) {
        r.known = true;
        r.start = s->start;
        r.end = s->start + std::max<uint64_t>(s->size, 1);
        r.name = Intern(s->name);
        static const std::string kJit = "[jit]";
        if (r.dso == nullptr) r.dso = Intern(kJit);
        break;
      }
    }
  }
  if (!r.known) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
    std::string name = "[unknown @ " + std::string(buf);
    if (r.dso != nullptr) name += " (" + *r.dso + ")";
    name += "]";
    r.name = Intern(name);
    r.start = addr;
    r.end = addr + 1;
  }
  r.function_id = FunctionId(r.known ? r.dso : nullptr, r.start, r.name);
  if (proc.cache.size() > (1u << 20)) proc.cache.clear();
  proc.cache.emplace(addr, r);
  return r;
}

const SourceLocation* Symbolizer::SourceLine(int32_t pid, uint64_t addr) {
  if (addr == 0 || IsKernelAddress(addr)) return nullptr;
  const Mapping* m = Process(pid).Find(addr);
  if (m == nullptr || m->elf == nullptr) return nullptr;
  const std::filesystem::path& path = m->elf->path();
  auto it = dwarves_.find(path.string());
  if (it == dwarves_.end()) {
    std::unique_ptr<DwarfFile> dw = DwarfFile::Open(path);
    if (dw == nullptr) {
      for (const auto& c : DebugCandidates(path, *m->elf)) {
        std::error_code ec;
        if (c == path || !std::filesystem::is_regular_file(c, ec)) continue;
        if ((dw = DwarfFile::Open(c)) != nullptr) break;
      }
    }
    it = dwarves_.emplace(path.string(), std::move(dw)).first;
  }
  if (it->second == nullptr) return nullptr;
  return it->second->Lookup(addr - static_cast<uint64_t>(m->bias));
}

}  // namespace ptsnap::decode
