#include "sys/kcore.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

Result<elf::ElfHeader> CoreHeader(std::span<const std::byte> bytes) {
  PTSNAP_ASSIGN_OR_RETURN(elf::ElfHeader eh, elf::ParseElfHeader(bytes));
  if (eh.type != ET_CORE) return Error("ELF type " + std::to_string(eh.type) + " is not ET_CORE");
  return eh;
}

}  // namespace

Result<size_t> KcoreHeaderSize(std::span<const std::byte> ehdr_bytes) {
  PTSNAP_ASSIGN_OR_RETURN(elf::ElfHeader eh, CoreHeader(ehdr_bytes));
  return elf::HeadersSize(eh);
}

Result<KcoreHeader> ParseKcoreHeader(std::span<const std::byte> bytes) {
  PTSNAP_ASSIGN_OR_RETURN(elf::ElfHeader eh, CoreHeader(bytes));
  PTSNAP_ASSIGN_OR_RETURN(std::vector<elf::ProgramHeader> phdrs,
                          elf::ParseProgramHeaders(bytes, eh));
  KcoreHeader out;
  out.machine = eh.machine;
  out.phnum = eh.phnum;
  for (const elf::ProgramHeader& ph : phdrs) {
    if (ph.type == PT_NOTE) ++out.note_count;
    if (ph.type == PT_LOAD) out.loads.push_back(ph);
  }
  return out;
}

const ElfLoad* FindLoadCovering(const KcoreHeader& header, uint64_t addr, uint64_t size) {
  for (const ElfLoad& l : header.loads) {
    if (addr < l.vaddr) continue;
    uint64_t rel = addr - l.vaddr;
    if (rel < l.filesz && size <= l.filesz - rel) return &l;
  }
  return nullptr;
}

Result<KcoreFile> KcoreFile::Open(const base::RootPath& root) {
  return OpenPath(root.Resolve("/proc/kcore").string());
}

Result<KcoreFile> KcoreFile::OpenPath(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("open " + path);
  auto read_prefix = [&](size_t n) -> Result<std::vector<std::byte>> {
    std::vector<std::byte> buf(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd.get(), buf.data() + got, n - got, static_cast<off_t>(got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Error::FromErrno("read " + path);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    buf.resize(got);
    return buf;
  };
  PTSNAP_ASSIGN_OR_RETURN(std::vector<std::byte> ehdr, read_prefix(sizeof(Elf64_Ehdr)));
  auto need = KcoreHeaderSize(ehdr);
  if (!need) return std::move(need).error().AddContext(path);
  PTSNAP_ASSIGN_OR_RETURN(std::vector<std::byte> all, read_prefix(*need));
  auto header = ParseKcoreHeader(all);
  if (!header) return std::move(header).error().AddContext(path);
  return KcoreFile(std::move(fd), std::move(*header), path);
}

Result<void> KcoreFile::ReadAt(uint64_t vaddr, std::span<std::byte> out) const {
  const ElfLoad* load = FindLoadCovering(header_, vaddr, out.size());
  if (load == nullptr) {
    return Error("no PT_LOAD in " + path_ + " covers " + std::to_string(out.size()) + " bytes at " +
                 base::Hex(vaddr));
  }
  uint64_t off = load->offset + (vaddr - load->vaddr);
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r =
        ::pread(fd_.get(), out.data() + got, out.size() - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Error::FromErrno("read " + path_);
    }
    if (r == 0) return Error("short read from " + path_);
    got += static_cast<size_t>(r);
  }
  return Ok();
}

}  // namespace ptsnap::sys
