#include "record/elf_symbols.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "base/exec_script.h"
#include "base/file_util.h"
#include "base/string_util.h"
#include "elf/symbol_file.h"
#include "record/linked_libraries.h"
#include "sys/proc_maps.h"

namespace ptsnap::record {
uint64_t RuntimeAddress(const elf::Image& image, const elf::Function& fn,
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

// The stop indicator's functions present in `image`, or an error.
Result<std::vector<const elf::Function*>> StopIndicators(const elf::Image& image,
                                                         const std::string& exe) {
  std::vector<const elf::Function*> out;
  for (std::string_view name : kStopIndicatorSymbols)
    if (const elf::Function* f = elf::FindFunction(image, name)) out.push_back(f);
  if (out.empty())
    return Error("trigger '.': " + exe +
                 " has no stop indicator (ptsnap_take_snapshot or magic_trace_stop_indicator); "
                 "include <ptsnap/stop_indicator.h> and call ptsnap_take_snapshot()")
        .WithKind(ErrorKind::kTrigger);
  return out;
}

}  // namespace

Error TriggerNotFound(std::string_view name, const std::string& where,
                      std::span<const std::string> closest, const elf::Image& image,
                      const std::string& file) {
  std::string msg =
      "trigger symbol '" + std::string(name) + "' not found: no function of that name in " + where;
  if (!closest.empty()) msg += "; " + elf::DidYouMean(closest);
  // A stripped program names only what it exports: the spelling is not
  // the problem (the new-user session of #41 was told to check it).
  if (!image.has_symtab)
    msg += "; " + file +
           " is stripped (no .symtab), so only its exported functions have names: trigger on "
           "one of those, use addr:HEX, or record a build with symbols";
  msg += " (check the spelling: " + std::string(elf::kSpellingsHint) +
         "; `--trigger ?` lists the functions; or use addr:HEX)";
  return Error(std::move(msg)).WithKind(ErrorKind::kTrigger);
}

Result<std::vector<const elf::Function*>> MatchTriggerFunctions(const elf::Image& image,
                                                                std::string_view name,
                                                                const std::string& file,
                                                                size_t max) {
  elf::FunctionMatch m = elf::MatchFunctions(image, name, file);
  if (m.functions.empty()) return TriggerNotFound(name, file, m.closest, image, file);
  if (m.functions.size() > max) {
    const std::string why = max == 1 ? "--slower-than times one function"
                                     : "a trigger watches at most " + std::to_string(max) +
                                           " (x86 has four hardware breakpoints, one each)";
    return Error("trigger '" + std::string(name) + "' names " + std::to_string(m.functions.size()) +
                 " functions of " + file + " (" + elf::ListFunctions(m.functions) + "); " + why +
                 ": name fewer, e.g. '" + elf::Demangle(m.functions.front()->name) + "'")
        .WithKind(ErrorKind::kTrigger);
  }
  return std::move(m.functions);
}

std::vector<std::string> TriggerChoices(const elf::Image& image, std::string_view dso) {
  std::vector<std::string> out;
  out.reserve(image.functions.size());
  const std::string prefix = dso.empty() ? "" : std::string(dso) + ":";
  for (const elf::Function& f : image.functions) out.push_back(prefix + elf::Demangle(f.name));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::string> ParseTriggerChoice(std::string_view answer,
                                       const std::vector<std::string>& choices) {
  answer = base::Trim(answer);
  if (answer.empty())
    return Error("--trigger ?: no function chosen: type a number from the list or a name");
  if (auto n = base::ParseUint(answer)) {
    if (*n == 0 || *n > choices.size())
      return Error("--trigger ?: " + std::string(answer) + " is not in the list (1-" +
                   std::to_string(choices.size()) + "): type a number from it or a name");
    return choices[*n - 1];
  }
  return std::string(answer);
}

namespace {

// The points of a trigger found in a library: file offsets (entry
// uprobes); `mapped` (attach): also the runtime addresses, from where
// `proc`'s map has the library.
Result<std::vector<TriggerPoint>> LibraryTriggerPoints(const LibraryTrigger& lib, bool mapped,
                                                       const std::string& proc) {
  std::optional<uint64_t> lowest;
  if (mapped) {
    PTSNAP_ASSIGN_OR_RETURN(std::string maps, base::ReadFile(proc + "/maps"));
    lowest = LowestMappingStart(maps, lib.path);
    if (!lowest) return Error("cannot find where " + lib.path + " is loaded in " + proc + "/maps");
  }
  const std::string file = std::filesystem::path(lib.path).filename().string();
  std::vector<TriggerPoint> points;
  for (const LibraryTrigger::Function& f : lib.functions) {
    TriggerPoint p;
    p.symbol = f.symbol;
    p.file = lib.path;
    p.file_offset = f.offset;
    if (lowest) {
      p.address = *lowest - lib.lowest_load_vaddr + f.vaddr;
      p.description = f.name + " @ " + base::Hex(p.address) + " (" + file + ")";
    } else {
      p.description =
          f.name + " @ " + file + "+" + base::Hex(f.offset) + " (file offset; an entry uprobe)";
    }
    points.push_back(std::move(p));
  }
  return points;
}

// CheckTriggerInFile's check of the ELF program `file`.
Result<void> CheckTriggerInElf(std::string_view selector, const std::filesystem::path& file,
                               size_t max) {
  auto image = elf::ReadFunctions(file);
  if (!image) return std::move(image).error().AddContext("reading symbols of " + file.string());
  if (selector == ".") {
    PTSNAP_TRY(StopIndicators(*image, file.string()));
    return Ok();
  }
  PTSNAP_ASSIGN_OR_RETURN(std::optional<LibraryTrigger> lib,
                          FindTriggerInLinkedLibraries(*image, file, std::string(selector), max));
  if (!lib) PTSNAP_TRY(MatchTriggerFunctions(*image, selector, file.string(), max));
  return Ok();
}

}  // namespace

Error InScript(const Error& err, const std::filesystem::path& script,
               const std::filesystem::path& interpreter) {
  return Error(err.ToString() + "; " + script.string() + " is a script, run by " +
               interpreter.string() +
               ": the trigger is looked for there, not in a program the script starts later "
               "(run that program directly to trigger in it)")
      .WithKind(err.kind());
}

Result<void> CheckTriggerInFile(std::string_view selector, const std::filesystem::path& exe,
                                size_t max) {
  if (selector.empty() || base::StartsWith(selector, "addr:")) return Ok();
  // A script: execve runs its interpreter, whose process the trigger is
  // resolved in once the program stops at its exec (ResolveTrigger), as
  // --emulate does.
  std::filesystem::path file = exe;
  const std::string head = base::ReadFileHead(exe, base::kExecHeadBytes).value_or("");
  if (head.starts_with("#!")) {
    const std::optional<base::ScriptInterpreter> interp = base::ParseScriptInterpreter(head);
    if (!interp)
      return Error("--trigger " + std::string(selector) + ": " + exe.string() +
                   " is a script whose #! line names no interpreter")
          .WithKind(ErrorKind::kTrigger);
    file = interp->path;
  }
  Result<void> checked = CheckTriggerInElf(selector, file, max);
  if (!checked && file != exe) return InScript(checked.error(), exe, file);
  return checked;
}

Result<std::filesystem::path> FindExecutable(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    if (::access(std::string(name).c_str(), X_OK) != 0)
      return Error::FromErrno("cannot run '" + std::string(name) + "'");
    return std::filesystem::path(name);
  }
  const char* path = std::getenv("PATH");
  if (auto p = base::FindInPath(path != nullptr ? path : "/usr/bin:/bin", name)) return *p;
  return Error("command not found: '" + std::string(name) + "' is not in $PATH");
}

Result<std::vector<TriggerPoint>> ResolveTrigger(std::string_view selector, pid_t pid, size_t max,
                                                 TriggerLibraries libs) {
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
  auto image = elf::ReadFunctions(proc + "/exe");
  if (!image) return std::move(image).error().AddContext("reading symbols of " + exe.string());
  if (selector != "." && libs != TriggerLibraries::kNone) {
    // A NAME the executable does not define: the libraries'.
    std::optional<LibraryTrigger> lib;
    if (libs == TriggerLibraries::kLinked) {
      PTSNAP_ASSIGN_OR_RETURN(
          lib, FindTriggerInLinkedLibraries(*image, exe, std::string(selector), max));
    } else if (elf::MatchFunctions(*image, selector, exe.string()).functions.empty()) {
      PTSNAP_ASSIGN_OR_RETURN(std::vector<std::string> mapped, MappedLibraries(pid, exe));
      PTSNAP_ASSIGN_OR_RETURN(lib, FindTriggerBeyondProgram(*image, exe.string(), mapped,
                                                            std::string(selector), max, "maps"));
    }
    if (lib) return LibraryTriggerPoints(*lib, libs == TriggerLibraries::kMapped, proc);
  }
  uint64_t base_addr = 0;
  if (image->pie) {
    PTSNAP_ASSIGN_OR_RETURN(std::string maps, base::ReadFile(proc + "/maps"));
    auto lowest = LowestMappingStart(maps, exe);
    if (!lowest)
      return Error("cannot find where " + exe.string() + " is loaded in " + proc + "/maps");
    base_addr = *lowest;
  }
  auto functions = selector == "." ? StopIndicators(*image, exe.string())
                                   : MatchTriggerFunctions(*image, selector, exe.string(), max);
  if (!functions) return std::move(functions).error();
  for (const elf::Function* fn : *functions) {
    const uint64_t addr = RuntimeAddress(*image, *fn, base_addr);
    points.push_back({elf::Demangle(fn->name) + " @ " + base::Hex(addr), fn->name, addr});
  }
  return points;
}

}  // namespace ptsnap::record
