#include "emulate/linked_libraries.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "base/file_util.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/symbol_file.h"
#include "elf/symbol_match.h"
#include "record/elf_symbols.h"

namespace ptsnap::emulate {

namespace fs = std::filesystem;

std::vector<std::string> ParseLdList(std::string_view out) {
  std::vector<std::string> paths;
  while (!out.empty()) {
    const size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    while (!line.empty() && (line.front() == '\t' || line.front() == ' ')) line.remove_prefix(1);
    if (const size_t arrow = line.find(" => "); arrow != std::string_view::npos)
      line = line.substr(arrow + 4);
    else if (!line.starts_with('/'))
      continue;  // the vDSO: no file
    // "PATH (0xADDR)": a path may hold spaces, the address is last.
    if (const size_t addr = line.rfind(" (0x"); addr != std::string_view::npos)
      line = line.substr(0, addr);
    else
      continue;  // "not found", or not a line of the list
    if (line.starts_with('/')) paths.emplace_back(line);
  }
  return paths;
}

Result<std::vector<std::string>> ListLinkedLibraries(const fs::path& program,
                                                     const fs::path& interp) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error::FromErrno("pipe");
  base::UniqueFd read_end(fds[0]), write_end(fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return Error::FromErrno("fork");
  if (pid == 0) {
    ::dup2(write_end.get(), STDOUT_FILENO);
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
    ::execl(interp.c_str(), interp.c_str(), "--list", program.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  write_end.reset();
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error(interp.string() + " --list " + program.string() + " failed (" +
                 (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                    : std::string("killed by a signal")) +
                 ")");
  return ParseLdList(out);
}

std::optional<uint64_t> FileOffsetOf(std::span<const elf::Segment> segments, uint64_t vaddr) {
  for (const elf::Segment& s : segments)
    if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) return s.offset + (vaddr - s.vaddr);
  return std::nullopt;
}

Result<std::optional<LibraryTrigger>> FindTriggerInLibraries(const fs::path& program,
                                                             const std::string& typed, size_t max) {
  auto layout = elf::ParseLoadLayout(base::ReadFileHead(program, 65536).value_or(""));
  if (!layout || layout->interp.empty()) return std::optional<LibraryTrigger>();  // static
  PTSNAP_ASSIGN_OR_RETURN(std::vector<std::string> libs,
                          ListLinkedLibraries(program, layout->interp));
  for (const std::string& lib : libs) {
    auto image = elf::ReadFunctions(lib);
    if (!image || elf::MatchFunctions(*image, typed, lib).functions.empty()) continue;
    PTSNAP_ASSIGN_OR_RETURN(std::vector<const elf::Function*> functions,
                            record::MatchTriggerFunctions(*image, typed, lib, max));
    // Through libelf: a library's PT_INTERP (libc has one) may lie beyond
    // any head ParseLoadLayout would be given.
    auto lib_file = elf::SymbolFile::Open(lib);
    if (!lib_file) return std::move(lib_file).error().AddContext("reading " + lib);
    LibraryTrigger t;
    std::error_code ec;
    t.path = fs::canonical(lib, ec).string();
    if (ec) return Error::FromErrno("resolving " + lib, ec.value());
    for (const elf::Function* f : functions) {
      const auto offset = FileOffsetOf(lib_file->segments(), f->value);
      if (!offset)
        return Error(elf::Demangle(f->name) + " in " + lib + " lies in no loaded segment");
      t.functions.push_back({elf::Demangle(f->name), f->value, *offset});
    }
    return std::optional<LibraryTrigger>(std::move(t));
  }
  return std::optional<LibraryTrigger>();
}

}  // namespace ptsnap::emulate
