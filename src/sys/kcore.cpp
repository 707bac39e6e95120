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

// Program headers beyond this are not a plausible kcore (the kernel emits a
// few dozen); it bounds what the reader allocates.
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

Result<Elf64_Ehdr> CheckEhdr(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(Elf64_Ehdr)) {
    return Error("ELF header truncated: " + std::to_string(bytes.size()) + " of " +
                 std::to_string(sizeof(Elf64_Ehdr)) + " bytes");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Error("not an ELF file (bad magic)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Error("not a 64-bit ELF file");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Error("not a little-endian ELF file");
  if (eh.e_type != ET_CORE)
    return Error("ELF type " + std::to_string(eh.e_type) + " is not ET_CORE");
  if (eh.e_phnum == 0) return Error("no program headers");
  if (eh.e_phnum == PN_XNUM) return Error("extended program header count (PN_XNUM) unsupported");
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return Error("program header size " + std::to_string(eh.e_phentsize) + " is not " +
                 std::to_string(sizeof(Elf64_Phdr)));
  }
  return eh;
}

// e_phoff + e_phnum * e_phentsize without overflow (phnum < 2^16, entsize 56).
Result<size_t> EndOfPhdrs(const Elf64_Ehdr& eh) {
  uint64_t table = uint64_t{eh.e_phnum} * eh.e_phentsize;
  if (eh.e_phoff > kMaxHeaderBytes || table > kMaxHeaderBytes - eh.e_phoff) {
    return Error("program header table at offset " + std::to_string(eh.e_phoff) +
                 " is beyond the plausible header size");
  }
  return static_cast<size_t>(eh.e_phoff + table);
}

}  // namespace

Result<size_t> KcoreHeaderSize(std::span<const std::byte> ehdr_bytes) {
  PTSNAP_ASSIGN_OR_RETURN(Elf64_Ehdr eh, CheckEhdr(ehdr_bytes));
  PTSNAP_ASSIGN_OR_RETURN(size_t end, EndOfPhdrs(eh));
  return std::max(end, sizeof(Elf64_Ehdr));
}

Result<KcoreHeader> ParseKcoreHeader(std::span<const std::byte> bytes) {
  PTSNAP_ASSIGN_OR_RETURN(Elf64_Ehdr eh, CheckEhdr(bytes));
  PTSNAP_ASSIGN_OR_RETURN(size_t end, EndOfPhdrs(eh));
  if (end > bytes.size()) {
    return Error("program headers truncated: need " + std::to_string(end) + " bytes, have " +
                 std::to_string(bytes.size()));
  }
  KcoreHeader out;
  out.machine = eh.e_machine;
  out.phnum = eh.e_phnum;
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof ph);
    if (ph.p_type == PT_NOTE) {
      ++out.note_count;
      continue;
    }
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_offset + ph.p_filesz < ph.p_offset) {
      return Error("PT_LOAD " + std::to_string(i) + ": file range overflows");
    }
    if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr && ph.p_vaddr + ph.p_filesz != 0) {
      return Error("PT_LOAD " + std::to_string(i) + ": address range overflows");
    }
    if (ph.p_filesz > ph.p_memsz) {
      return Error("PT_LOAD " + std::to_string(i) + ": p_filesz exceeds p_memsz");
    }
    out.loads.push_back({ph.p_vaddr, ph.p_paddr, ph.p_offset, ph.p_filesz, ph.p_memsz, ph.p_flags});
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
