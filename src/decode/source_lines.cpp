#include "decode/source_lines.h"

#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

namespace ptsnap::decode {

std::unique_ptr<DwarfFile> DwarfFile::Open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  Dwarf* dw = dwarf_begin(fd, DWARF_C_READ);
  if (dw == nullptr) {  // not ELF, or no .debug_info
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<DwarfFile> f(new DwarfFile());
  f->fd_ = fd;
  f->dwarf_ = dw;
  return f;
}

DwarfFile::~DwarfFile() {
  if (dwarf_ != nullptr) dwarf_end(static_cast<Dwarf*>(dwarf_));
  if (fd_ >= 0) ::close(fd_);
}

const SourceLocation* DwarfFile::Lookup(uint64_t vaddr) {
  if (auto it = cache_.find(vaddr); it != cache_.end()) {
    return it->second ? &*it->second : nullptr;
  }
  std::optional<SourceLocation> loc;
  Dwarf_Die cu;
  if (dwarf_addrdie(static_cast<Dwarf*>(dwarf_), vaddr, &cu) != nullptr) {
    if (Dwarf_Line* line = dwarf_getsrc_die(&cu, vaddr); line != nullptr) {
      int lineno = 0;
      const char* file = dwarf_linesrc(line, nullptr, nullptr);
      if (file != nullptr && dwarf_lineno(line, &lineno) == 0 && lineno > 0) {
        loc = SourceLocation{file, static_cast<uint32_t>(lineno)};
      }
    }
  }
  auto& slot = cache_.emplace(vaddr, std::move(loc)).first->second;
  return slot ? &*slot : nullptr;
}

}  // namespace ptsnap::decode
