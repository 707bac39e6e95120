#include "record/linked_libraries.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <set>

#include "base/file_util.h"
#include "base/root_path.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/symbol_file.h"
#include "elf/symbol_match.h"
#include "record/elf_symbols.h"
#include "sys/proc_maps.h"

namespace ptsnap::record {

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

Result<std::vector<std::string>> LinkedLibraries(const fs::path& program) {
  // Resolved here: the loader would read /proc/self/exe as its own.
  std::error_code ec;
  fs::path file = fs::weakly_canonical(program, ec);
  if (ec) file = program;
  auto layout = elf::ParseLoadLayout(base::ReadFileHead(file, 65536).value_or(""));
  if (!layout || layout->interp.empty()) return std::vector<std::string>();  // static
  return ListLinkedLibraries(file, layout->interp);
}

Result<std::optional<LibraryTrigger>> FindTriggerInFiles(std::span<const std::string> libs,
                                                         const std::string& typed, size_t max) {
  for (const std::string& lib : libs) {
    auto image = elf::ReadFunctions(lib);
    if (!image || elf::MatchFunctions(*image, typed, lib).functions.empty()) continue;
    PTSNAP_ASSIGN_OR_RETURN(std::vector<const elf::Function*> functions,
                            MatchTriggerFunctions(*image, typed, lib, max));
    // Through libelf: a library's PT_INTERP (libc has one) may lie beyond
    // any head ParseLoadLayout would be given.
    auto lib_file = elf::SymbolFile::Open(lib);
    if (!lib_file) return std::move(lib_file).error().AddContext("reading " + lib);
    LibraryTrigger t;
    std::error_code ec;
    t.path = fs::canonical(lib, ec).string();
    if (ec) return Error::FromErrno("resolving " + lib, ec.value());
    t.lowest_load_vaddr = image->lowest_load_vaddr;
    for (const elf::Function* f : functions) {
      const auto offset = FileOffsetOf(lib_file->segments(), f->value);
      if (!offset)
        return Error(elf::Demangle(f->name) + " in " + lib + " lies in no loaded segment");
      t.functions.push_back({elf::Demangle(f->name), f->name, f->value, *offset});
    }
    return std::optional<LibraryTrigger>(std::move(t));
  }
  return std::optional<LibraryTrigger>();
}

Result<std::optional<LibraryTrigger>> FindTriggerInLibraries(const fs::path& program,
                                                             const std::string& typed, size_t max) {
  PTSNAP_ASSIGN_OR_RETURN(std::vector<std::string> libs, LinkedLibraries(program));
  return FindTriggerInFiles(libs, typed, max);
}

Result<std::vector<std::string>> MappedLibraries(pid_t pid, const fs::path& exe) {
  PTSNAP_ASSIGN_OR_RETURN(std::vector<sys::MapEntry> maps,
                          sys::ReadProcMaps(base::RootPath(), pid));
  std::error_code ec;
  const fs::path exe_canonical = fs::weakly_canonical(exe, ec);
  std::vector<std::string> mapped;  // canonical paths, in the map's order
  std::set<std::string> seen;
  for (const sys::MapEntry& m : maps) {
    if (!m.exec || m.path.empty() || m.path[0] != '/') continue;
    const std::string p = fs::weakly_canonical(m.path, ec).string();
    if (p == exe_canonical.string() || !seen.insert(p).second) continue;
    mapped.push_back(p);
  }
  std::vector<std::string> out;
  // The loader's order where the program's own list names them (another
  // environment may have picked other files: those keep the map's order).
  if (auto linked = LinkedLibraries(exe)) {
    for (const std::string& lib : *linked) {
      const std::string p = fs::weakly_canonical(lib, ec).string();
      if (std::find(mapped.begin(), mapped.end(), p) != mapped.end() &&
          std::find(out.begin(), out.end(), p) == out.end())
        out.push_back(p);
    }
  }
  for (const std::string& p : mapped)
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

Result<std::optional<LibraryTrigger>> FindTriggerBeyondProgram(const elf::Image& image,
                                                               const std::string& program,
                                                               std::span<const std::string> libs,
                                                               const std::string& typed, size_t max,
                                                               std::string_view how) {
  if (!elf::MatchFunctions(image, typed, program).functions.empty())
    return std::optional<LibraryTrigger>();
  PTSNAP_ASSIGN_OR_RETURN(std::optional<LibraryTrigger> found,
                          FindTriggerInFiles(libs, typed, max));
  if (found) return found;
  // Nowhere: the closest names of the program and of every library.
  std::vector<elf::NamedSymbol> symbols = elf::FunctionSymbols(image, program);
  std::string names;
  for (size_t i = 0; i < libs.size(); ++i) {
    if (auto lib = elf::ReadFunctions(libs[i])) {
      std::vector<elf::NamedSymbol> more = elf::FunctionSymbols(*lib, libs[i]);
      symbols.insert(symbols.end(), std::make_move_iterator(more.begin()),
                     std::make_move_iterator(more.end()));
    }
    names += (i ? ", " : "") + fs::path(libs[i]).filename().string();
  }
  std::string where = program;
  if (!libs.empty())
    where += " nor in the " + std::to_string(libs.size()) + " shared librar" +
             (libs.size() == 1 ? "y" : "ies") + " it " + std::string(how) + " (" + names + ")";
  return TriggerNotFound(typed, where, elf::ClosestNames(typed, symbols), image, program);
}

Result<std::optional<LibraryTrigger>> FindTriggerInLinkedLibraries(const elf::Image& image,
                                                                   const fs::path& program,
                                                                   const std::string& typed,
                                                                   size_t max) {
  if (!elf::MatchFunctions(image, typed, program.string()).functions.empty())
    return std::optional<LibraryTrigger>();
  PTSNAP_ASSIGN_OR_RETURN(std::vector<std::string> libs, LinkedLibraries(program));
  AddNamedLibrary(typed, &libs);
  return FindTriggerBeyondProgram(image, program.string(), libs, typed, max, "links");
}

void AddNamedLibrary(std::string_view typed, std::vector<std::string>* libs) {
  const std::string_view dso = elf::SplitDso(typed).dso;
  if (dso.find('/') == std::string_view::npos) return;
  std::error_code ec;
  if (!fs::is_regular_file(dso, ec)) return;
  const std::string p = fs::weakly_canonical(fs::path(dso), ec).string();
  for (const std::string& lib : *libs)
    if (fs::weakly_canonical(lib, ec).string() == p) return;
  libs->push_back(p);
}

}  // namespace ptsnap::record
