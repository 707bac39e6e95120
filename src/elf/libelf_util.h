// Inside the elf module only: libelf handles and the readers every libelf
// reader of the module shares.
#pragma once

#include <gelf.h>

#include <libelf.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "elf/segments.h"

namespace ptsnap::elf::internal {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

// Calls fn(sym, name) for each symbol of the symbol table `scn` (.symtab or
// .dynsym, header `shdr`) that has a name, in table order; a corrupt table
// yields the symbols before the damage.
template <typename Fn>
void ForEachNamedSymbol(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, Fn&& fn) {
  if (shdr.sh_entsize == 0) return;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || data->d_buf == nullptr) return;
  const size_t count = shdr.sh_size / shdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    if constexpr (std::is_invocable_v<Fn, const GElf_Sym&, const char*, size_t>) {
      fn(sym, name, i);  // the symbol's index too (its .gnu.version entry's)
    } else {
      fn(sym, name);
    }
  }
}

// The PT_LOAD program headers, in file order.
std::vector<Segment> LoadSegments(Elf* elf);

// The NT_GNU_BUILD_ID note as lowercase hex, or "" when there is none.
std::string BuildIdNote(Elf* elf);

// The file name in the .gnu_debuglink section, or "" when there is none.
std::string DebugLink(Elf* elf);

}  // namespace ptsnap::elf::internal
