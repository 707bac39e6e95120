#include "elf/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/libelf_util.h"

namespace ptsnap::elf {
namespace {

using internal::BuildIdNote;
using internal::ElfHandle;

// libelf wants a mutable buffer and does not keep it beyond elf_end, so
// the caller holds `copy` while the handle lives.
ElfHandle OpenMemory(std::span<const std::byte> bytes, std::vector<char>* copy) {
  if (elf_version(EV_CURRENT) == EV_NONE) return nullptr;
  copy->assign(reinterpret_cast<const char*>(bytes.data()),
               reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  ElfHandle elf(elf_memory(copy->data(), copy->size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return nullptr;
  return elf;
}

// The sanitizer whose runtime `name` starts ("" for any other symbol).
std::string_view SanitizerOf(std::string_view name) {
  if (name == "__asan_init") return "AddressSanitizer";
  if (name == "__tsan_init") return "ThreadSanitizer";
  if (name == "__msan_init") return "MemorySanitizer";
  return "";
}

void CollectSymbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, Image& image) {
  internal::ForEachNamedSymbol(elf, scn, shdr, [&](const GElf_Sym& sym, const char* name) {
    if (image.sanitizer.empty()) image.sanitizer = SanitizerOf(name);
    const int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) return;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) return;
    image.functions.push_back({name, sym.st_value, sym.st_size});
  });
}

Result<Image> Functions(Elf* elf) {
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf, &ehdr) == nullptr) return Error("corrupt ELF header");
  Image image;
  image.pie = ehdr.e_type == ET_DYN;
  bool first = true;
  for (const Segment& seg : internal::LoadSegments(elf)) {
    const uint64_t v = seg.vaddr & ~uint64_t{0xfff};
    if (first || v < image.lowest_load_vaddr) image.lowest_load_vaddr = v;
    first = false;
  }
  bool any_table = false;
  // .symtab first (it has local functions too), then .dynsym.
  for (uint32_t wanted : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != wanted) continue;
      any_table = true;
      if (wanted == SHT_SYMTAB) image.has_symtab = true;
      CollectSymbols(elf, scn, shdr, image);
    }
  }
  if (!any_table) return Error("the ELF file has no symbol table (is it stripped?)");
  return image;
}

}  // namespace

Result<Image> ParseFunctions(std::span<const std::byte> bytes) {
  std::vector<char> copy;
  ElfHandle elf = OpenMemory(bytes, &copy);
  if (!elf) return Error("not an ELF file");
  return Functions(elf.get());
}

namespace {

// The functions of a separate debug file's .symtab, with the build-id
// `want` ("" takes any); nullopt when it is not one.
std::optional<Image> DebugFileFunctions(const std::filesystem::path& path, std::string_view want) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  ElfHandle elf(elf_begin(fd.get(), ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return std::nullopt;
  if (!want.empty()) {
    const std::string id = BuildIdNote(elf.get());
    if (!id.empty() && id != want) return std::nullopt;
  }
  auto image = Functions(elf.get());
  if (!image || !image->has_symtab) return std::nullopt;
  return std::move(*image);
}

// Adds to `debug` (a debug file's functions) the stripped file's exported
// ones it lacks (same name and address), and its sanitizer.
void AddExported(Image stripped, Image* debug) {
  // Views into debug->functions: the new ones are appended after.
  std::set<std::pair<std::string_view, uint64_t>> have;
  for (const Function& f : debug->functions) have.emplace(f.name, f.value);
  std::vector<Function> exported;
  for (Function& f : stripped.functions)
    if (!have.contains({f.name, f.value})) exported.push_back(std::move(f));
  debug->functions.insert(debug->functions.end(), std::make_move_iterator(exported.begin()),
                          std::make_move_iterator(exported.end()));
  if (debug->sanitizer.empty()) debug->sanitizer = std::move(stripped.sanitizer);
}

}  // namespace

std::vector<std::filesystem::path> DebugFileCandidates(
    const std::filesystem::path& path, std::string_view build_id, std::string_view debuglink,
    std::span<const std::filesystem::path> dirs) {
  std::vector<std::filesystem::path> out;
  for (const auto& dir : dirs) {
    if (build_id.size() > 2)
      out.push_back(dir / ".build-id" / std::string(build_id.substr(0, 2)) /
                    (std::string(build_id.substr(2)) + ".debug"));
    if (!debuglink.empty()) {
      out.push_back(dir / path.parent_path().relative_path() / debuglink);
      out.push_back(dir / debuglink);
    }
  }
  if (!debuglink.empty()) {
    out.push_back(path.parent_path() / debuglink);
    out.push_back(path.parent_path() / ".debug" / debuglink);
  }
  return out;
}

Result<Image> ReadFunctions(const std::filesystem::path& path,
                            std::span<const std::filesystem::path> debug_dirs) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Error("libelf initialisation failed");
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("opening " + path.string());
  ElfHandle elf(elf_begin(fd.get(), ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return Error(path.string() + ": not an ELF file");
  auto image = Functions(elf.get());
  if (image && image->has_symtab) return image;
  // Stripped: the .symtab of its debug file, if one is installed.
  const std::filesystem::path system_dirs[] = {kSystemDebugDir};
  if (debug_dirs.empty()) debug_dirs = system_dirs;
  const std::string build_id = BuildIdNote(elf.get());
  for (const auto& c :
       DebugFileCandidates(path, build_id, internal::DebugLink(elf.get()), debug_dirs)) {
    std::error_code ec;
    if (c == path || !std::filesystem::is_regular_file(c, ec)) continue;
    std::optional<Image> debug = DebugFileFunctions(c, build_id);
    if (!debug) continue;
    // The layout (pie, load address) is the file's; the names the debug
    // file's, then the exported ones it lacks.
    if (image) AddExported(std::move(*image), &*debug);
    GElf_Ehdr ehdr;
    if (gelf_getehdr(elf.get(), &ehdr) != nullptr) debug->pie = ehdr.e_type == ET_DYN;
    debug->debug_file = c.string();
    return std::move(*debug);
  }
  if (!image) return Error(path.string() + ": " + image.error().message());
  return image;
}

const Function* FindFunction(const Image& image, std::string_view name) {
  for (const auto& f : image.functions)
    if (f.name == name) return &f;
  return nullptr;
}

std::string ReadBuildId(std::span<const std::byte> bytes) {
  std::vector<char> copy;
  ElfHandle elf = OpenMemory(bytes, &copy);
  return elf ? BuildIdNote(elf.get()) : "";
}

std::string ReadBuildIdOf(const std::filesystem::path& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return "";
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  ElfHandle elf(elf_begin(fd.get(), ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return "";
  return BuildIdNote(elf.get());
}

}  // namespace ptsnap::elf

namespace ptsnap::elf::internal {

std::vector<Segment> LoadSegments(Elf* elf) {
  std::vector<Segment> out;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return out;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    out.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }
  return out;
}

std::string BuildIdNote(Elf* elf) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
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
      return base::HexBytes(
          std::string_view(static_cast<const char*>(data->d_buf) + desc_off, nhdr.n_descsz));
    }
  }
  return "";
}

std::string DebugLink(Elf* elf) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return "";
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (name == nullptr || std::strcmp(name, ".gnu_debuglink") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr || data->d_size == 0) return "";
    const char* s = static_cast<const char*>(data->d_buf);
    return std::string(s, strnlen(s, data->d_size));
  }
  return "";
}

}  // namespace ptsnap::elf::internal
