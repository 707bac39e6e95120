#include "record/elf_symbols.h"

#include <gelf.h>
#include <libelf.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/file_util.h"
#include "base/string_util.h"
#include "sys/proc_maps.h"

namespace ptsnap::record {
namespace {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

void CollectSymbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, std::vector<ElfFunction>& out) {
  if (shdr.sh_entsize == 0) return;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || data->d_buf == nullptr) return;
  const size_t count =
      std::min<size_t>(shdr.sh_size / shdr.sh_entsize, data->d_size / shdr.sh_entsize);
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
    const int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    out.push_back({name, sym.st_value, sym.st_size});
  }
}

}  // namespace

Result<ElfImage> ParseElfFunctions(std::span<const std::byte> bytes) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Error("libelf initialisation failed");
  // libelf wants a mutable buffer; it does not keep it beyond elf_end.
  std::vector<char> copy(reinterpret_cast<const char*>(bytes.data()),
                         reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  std::unique_ptr<Elf, ElfCloser> elf(elf_memory(copy.data(), copy.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return Error("not an ELF file");
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf.get(), &ehdr) == nullptr) return Error("corrupt ELF header");
  ElfImage image;
  image.pie = ehdr.e_type == ET_DYN;
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) == 0) {
    bool first = true;
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD)
        continue;
      const uint64_t v = ph.p_vaddr & ~uint64_t{0xfff};
      if (first || v < image.lowest_load_vaddr) image.lowest_load_vaddr = v;
      first = false;
    }
  }
  bool any_table = false;
  // .symtab first (it has local functions too), then .dynsym.
  for (uint32_t wanted : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != wanted) continue;
      any_table = true;
      CollectSymbols(elf.get(), scn, shdr, image.functions);
    }
  }
  if (!any_table) return Error("the ELF file has no symbol table (is it stripped?)");
  return image;
}

std::string ReadBuildId(std::span<const std::byte> bytes) {
  if (elf_version(EV_CURRENT) == EV_NONE) return "";
  std::vector<char> copy(reinterpret_cast<const char*>(bytes.data()),
                         reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  std::unique_ptr<Elf, ElfCloser> elf(elf_memory(copy.data(), copy.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return "";
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) continue;
    size_t offset = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nhdr;
    while (offset < data->d_size &&
           (offset = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off)) > 0) {
      if (nhdr.n_type != NT_GNU_BUILD_ID || nhdr.n_namesz != 4 ||
          std::memcmp(static_cast<const char*>(data->d_buf) + name_off, "GNU", 4) != 0)
        continue;
      static const char* kHex = "0123456789abcdef";
      std::string hex;
      const auto* d = static_cast<const unsigned char*>(data->d_buf) + desc_off;
      for (size_t i = 0; i < nhdr.n_descsz; ++i) {
        hex += kHex[d[i] >> 4];
        hex += kHex[d[i] & 0xf];
      }
      return hex;
    }
  }
  return "";
}

const ElfFunction* FindFunction(const ElfImage& image, std::string_view name) {
  for (const auto& f : image.functions)
    if (f.name == name) return &f;
  return nullptr;
}

uint64_t RuntimeAddress(const ElfImage& image, const ElfFunction& fn,
                        uint64_t lowest_mapping_start) {
  if (!image.pie) return fn.value;
  return lowest_mapping_start - image.lowest_load_vaddr + fn.value;
}

std::optional<uint64_t> LowestMappingStart(std::string_view maps_text,
                                           const std::filesystem::path& path) {
  auto maps = sys::ParseProcMaps(maps_text);
  if (!maps) return std::nullopt;
  std::error_code ec;
  const auto want = std::filesystem::weakly_canonical(path, ec);
  std::optional<uint64_t> lowest;
  for (const sys::MapEntry& m : *maps) {
    if (m.path.empty() || m.path[0] != '/') continue;
    const std::filesystem::path p(m.path);
    if (p != path && std::filesystem::weakly_canonical(p, ec) != want) continue;
    if (!lowest || m.start < *lowest) lowest = m.start;
  }
  return lowest;
}

namespace {

std::string MissingSymbolMessage(std::string_view selector, const std::string& exe) {
  if (selector == ".")
    return "trigger '.': " + exe +
           " has no stop indicator (ptsnap_take_snapshot or magic_trace_stop_indicator); "
           "include <ptsnap/stop_indicator.h> and call ptsnap_take_snapshot()";
  return "trigger symbol '" + std::string(selector) + "' not found: no function of that name in " +
         exe + " (check the spelling, or use addr:HEX)";
}

std::vector<std::string_view> SymbolNames(std::string_view selector) {
  if (selector == ".") return {std::begin(kStopIndicatorSymbols), std::end(kStopIndicatorSymbols)};
  return {selector};
}

}  // namespace

Result<void> CheckTriggerInFile(std::string_view selector, const std::filesystem::path& exe) {
  if (selector.empty() || base::StartsWith(selector, "addr:")) return Ok();
  PTSNAP_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(exe, size_t{4} << 30));
  auto image = ParseElfFunctions(std::as_bytes(std::span(bytes.data(), bytes.size())));
  if (!image) return std::move(image).error().AddContext("reading symbols of " + exe.string());
  for (std::string_view name : SymbolNames(selector))
    if (FindFunction(*image, name) != nullptr) return Ok();
  return Error(MissingSymbolMessage(selector, exe.string()));
}

Result<std::filesystem::path> FindExecutable(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    if (::access(std::string(name).c_str(), X_OK) != 0)
      return Error::FromErrno("cannot run '" + std::string(name) + "'");
    return std::filesystem::path(name);
  }
  const char* path = std::getenv("PATH");
  for (std::string_view dir : base::Split(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::filesystem::path p = std::filesystem::path(dir.empty() ? "." : dir) / std::string(name);
    if (::access(p.c_str(), X_OK) == 0 && !std::filesystem::is_directory(p)) return p;
  }
  return Error("command not found: '" + std::string(name) + "' is not in $PATH");
}

Result<std::vector<TriggerPoint>> ResolveTrigger(std::string_view selector, pid_t pid) {
  std::vector<TriggerPoint> points;
  if (base::StartsWith(selector, "addr:")) {
    auto addr = base::ParseUint(selector.substr(5), 16);
    if (!addr) {
      auto with_prefix = base::ParseUint(selector.substr(5), 0);
      if (!with_prefix)
        return Error("bad trigger '" + std::string(selector) +
                     "': expected addr:HEX, e.g. addr:0x401136");
      addr = with_prefix;
    }
    points.push_back({"addr:" + base::Hex(*addr), "", *addr});
    return points;
  }
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(proc + "/exe", ec);
  if (ec) return Error::FromErrno("reading " + proc + "/exe", ec.value());
  PTSNAP_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(proc + "/exe", size_t{4} << 30));
  auto image = ParseElfFunctions(std::as_bytes(std::span(bytes.data(), bytes.size())));
  if (!image) return std::move(image).error().AddContext("reading symbols of " + exe.string());
  uint64_t base_addr = 0;
  if (image->pie) {
    PTSNAP_ASSIGN_OR_RETURN(std::string maps, base::ReadFile(proc + "/maps"));
    auto lowest = LowestMappingStart(maps, exe);
    if (!lowest)
      return Error("cannot find where " + exe.string() + " is loaded in " + proc + "/maps");
    base_addr = *lowest;
  }
  for (std::string_view name : SymbolNames(selector)) {
    const ElfFunction* fn = FindFunction(*image, name);
    if (fn == nullptr) continue;
    const uint64_t addr = RuntimeAddress(*image, *fn, base_addr);
    points.push_back({fn->name + " @ " + base::Hex(addr), fn->name, addr});
  }
  if (points.empty()) return Error(MissingSymbolMessage(selector, exe.string()));
  return points;
}

}  // namespace ptsnap::record
