#include "record/addr_filter.h"

#include <algorithm>
#include <map>
#include <optional>

#include "base/file_util.h"
#include "base/string_util.h"
#include "elf/symbol_file.h"
#include "elf/symbol_match.h"
#include "record/elf_symbols.h"

namespace ptsnap::record {

namespace fs = std::filesystem;

std::string_view ToString(AddrFilterAction action) {
  switch (action) {
    case AddrFilterAction::kFilter: return "filter";
    case AddrFilterAction::kStart: return "start";
    case AddrFilterAction::kStop: return "stop";
    case AddrFilterAction::kTraceStop: return "tracestop";
  }
  return "filter";
}

namespace {

constexpr std::string_view kForms =
    "expected ACTION START[/SIZE][@FILE] (ACTION filter or tracestop; START a function or a "
    "file offset), e.g. 'filter work_a', 'filter 0x1139/0x40 @ /usr/bin/prog', or just a "
    "function name";

bool IsSeparator(char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::optional<AddrFilterAction> ParseAction(std::string_view word) {
  if (word == "filter") return AddrFilterAction::kFilter;
  if (word == "start") return AddrFilterAction::kStart;
  if (word == "stop") return AddrFilterAction::kStop;
  if (word == "tracestop") return AddrFilterAction::kTraceStop;
  return std::nullopt;
}

// A cursor over the spec: perf's tokens end at a separator, '/' or '@'.
struct Scanner {
  std::string_view s;
  size_t pos = 0;
  void SkipBlanks() {
    while (pos < s.size() && IsBlank(s[pos])) ++pos;
  }
  void SkipSeparators() {
    while (pos < s.size() && IsSeparator(s[pos])) ++pos;
  }
  bool AtEnd() const { return pos >= s.size(); }
  char Peek() const { return AtEnd() ? '\0' : s[pos]; }
  // Up to a separator, '/' or '@' (`stop_at_slash` false: a FILE, which
  // may hold '/').
  std::string_view Token(bool stop_at_slash) {
    size_t start = pos;
    while (pos < s.size() && !IsSeparator(s[pos]) && s[pos] != '@' &&
           (!stop_at_slash || s[pos] != '/'))
      ++pos;
    return s.substr(start, pos - start);
  }
};

Error SpecError(std::string_view spec, const std::string& what) {
  return Error("bad --filter '" + std::string(spec) + "': " + what + "; " + std::string(kForms))
      .WithKind(ErrorKind::kUsage);
}

bool IsNumber(std::string_view t) {
  return !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) != 0);
}

// START as a symbol, SYMBOL#N picking the Nth in address order.
Result<void> SetSymbol(std::string_view spec, std::string_view start, AddrFilter* f) {
  f->symbol = std::string(start);
  size_t hash = f->symbol.rfind('#');
  if (hash == std::string::npos) return Ok();
  auto n = base::ParseUint(start.substr(hash + 1));
  if (!n || *n == 0 || *n > UINT32_MAX || hash == 0)
    return SpecError(spec, "'" + f->symbol + "': SYMBOL#N takes N >= 1");
  f->index = static_cast<uint32_t>(*n);
  f->symbol.resize(hash);
  return Ok();
}

}  // namespace

Result<std::vector<AddrFilter>> ParseAddrFilters(std::string_view spec) {
  std::string_view trimmed = base::Trim(spec);
  if (trimmed.empty()) return SpecError(spec, "it is empty");
  // The short form: one word that is no action, `--filter work_a`.
  if (std::none_of(trimmed.begin(), trimmed.end(),
                   [](char c) { return IsSeparator(c) || c == '/' || c == '@'; }) &&
      !ParseAction(trimmed)) {
    spec = trimmed;
    if (IsNumber(trimmed))
      return SpecError(spec, "a bare number needs an action and a size, e.g. 'filter " +
                                 std::string(trimmed) + "/0x40'");
    AddrFilter f;
    PTSNAP_TRY(SetSymbol(spec, trimmed, &f));
    return std::vector<AddrFilter>{f};
  }
  std::vector<AddrFilter> out;
  Scanner sc{spec};
  for (;;) {
    sc.SkipSeparators();
    if (sc.AtEnd()) break;
    std::string_view word = sc.Token(true);
    auto action = ParseAction(word);
    if (!action) {
      return SpecError(spec, word.empty()
                                 ? "expected an action before '" + std::string(1, sc.Peek()) + "'"
                                 : "unknown action '" + std::string(word) + "'");
    }
    AddrFilter f;
    f.action = *action;
    sc.SkipBlanks();
    std::string_view start = sc.Token(true);
    if (start.empty())
      return SpecError(spec, "'" + std::string(word) + "' needs a function or an offset after it");
    if (IsNumber(start)) {
      auto n = base::ParseUint(start, 0);
      if (!n) return SpecError(spec, "'" + std::string(start) + "' is not a number");
      f.offset = *n;
    } else {
      PTSNAP_TRY(SetSymbol(spec, start, &f));
    }
    sc.SkipBlanks();
    if (sc.Peek() == '/') {
      ++sc.pos;
      sc.SkipBlanks();
      std::string_view size = sc.Token(true);
      auto n = base::ParseUint(size, 0);
      if (size.empty() || !n)
        return SpecError(spec,
                         "the size after '/' must be a number, not '" + std::string(size) + "'");
      if (*n == 0) return SpecError(spec, "the size of a range must not be 0");
      f.size = *n;
      sc.SkipBlanks();
    }
    if (sc.Peek() == '@') {
      ++sc.pos;
      sc.SkipBlanks();
      std::string_view file = sc.Token(false);
      if (file.empty()) return SpecError(spec, "'@' needs a file after it");
      f.file = std::string(file);
    }
    if (f.symbol.empty() && f.size == 0)
      return SpecError(spec, "the offset " + std::string(start) + " needs a size (" +
                                 std::string(start) + "/SIZE)");
    // The next filter follows a separator (blanks were skipped above).
    if (!sc.AtEnd() && !IsSeparator(sc.Peek()) && !IsBlank(sc.s[sc.pos - 1]))
      return SpecError(spec, "unexpected '" + std::string(1, sc.Peek()) + "'");
    out.push_back(std::move(f));
  }
  if (out.empty()) return SpecError(spec, "it holds no filter");
  return out;
}

Result<ResolvedAddrFilter> ResolveAddrFilter(const AddrFilter& f, const AddrFilterObject& obj) {
  ResolvedAddrFilter r;
  r.action = f.action;
  r.path = obj.path;
  if (f.symbol.empty()) {
    r.offset = f.offset;
    r.size = f.size;
    r.what = base::Hex(f.offset) + "/" + base::Hex(f.size);
    return r;
  }
  const std::string shown = f.index ? f.symbol + "#" + std::to_string(f.index) : f.symbol;
  r.what = shown;
  // Named as users type names (elf/symbol_match.h); one entry per address
  // (.symtab and .dynsym list a function twice), by address.
  elf::FunctionMatch m;
  if (obj.image != nullptr) m = elf::MatchFunctions(*obj.image, f.symbol, obj.path);
  const std::vector<const elf::Function*>& found = m.functions;
  if (found.empty()) {
    const std::string near = elf::DidYouMean(m.closest);
    return Error("--filter: no function named '" + f.symbol + "' in " + obj.path +
                 (near.empty() ? "" : "; " + near) + " (check the spelling with `nm -C " +
                 obj.path + "`: " + std::string(elf::kSpellingsHint) +
                 "; for a function of a shared library add @/path/to/lib.so)");
  }
  if (f.index > found.size())
    return Error("--filter: '" + shown + "': " + obj.path + " has only " +
                 std::to_string(found.size()) + " function(s) named '" + f.symbol + "'");
  if (f.index == 0 && found.size() > 1) {
    std::string at;
    for (size_t i = 0; i < found.size(); ++i)
      at += (i ? ", " : "") + f.symbol + "#" + std::to_string(i + 1) + " " +
            elf::Demangle(found[i]->name) + " at " + base::Hex(found[i]->value);
    return Error("--filter: '" + f.symbol + "' is ambiguous: " + obj.path + " has " +
                 std::to_string(found.size()) + " functions of that name (" + at +
                 "); pick one with " + f.symbol + "#N");
  }
  const elf::Function& fn = *found[f.index ? f.index - 1 : 0];
  r.size = f.size != 0 ? f.size : fn.size;
  if (r.size == 0)
    return Error("--filter: '" + shown + "' in " + obj.path +
                 " has no size in the symbol table: give one, e.g. '" +
                 std::string(ToString(f.action)) + " " + shown + "/0x100'");
  // The kernel takes file offsets (perf_addr_filter_vma_adjust): the
  // symbol's address through the PT_LOAD segment that holds it.
  for (const elf::Segment& s : obj.load) {
    if (fn.value < s.vaddr || fn.value - s.vaddr >= std::max(s.filesz, uint64_t{1})) continue;
    r.offset = fn.value - s.vaddr + s.offset;
    return r;
  }
  return Error("--filter: '" + shown + "' at " + base::Hex(fn.value) +
               " lies in no loadable "
               "segment of " +
               obj.path + ": give the range as OFFSET/SIZE");
}

Result<std::vector<ResolvedAddrFilter>> ResolveAddrFilters(std::span<const AddrFilter> filters,
                                                           const fs::path& program) {
  struct Loaded {
    std::string path;
    std::optional<elf::Image> image;
    std::vector<elf::Segment> load;
  };
  std::map<std::string, Loaded> files;
  std::vector<ResolvedAddrFilter> out;
  for (const AddrFilter& f : filters) {
    const fs::path named = f.file.empty() ? program : fs::path(f.file);
    auto it = files.find(named.string());
    if (it == files.end()) {
      std::error_code ec;
      fs::path canon = fs::canonical(named, ec);
      if (ec)
        return Error("--filter: cannot read " + named.string() + ": " + ec.message() +
                     " (FILE after '@' is the path of the program or library)");
      Loaded l;
      l.path = canon.string();
      auto head = base::ReadFileHead(canon, 65536);
      auto layout = elf::ParseLoadLayout(head ? *head : "");
      if (!layout) return Error("--filter: " + l.path + " is not an x86-64 ELF program or library");
      l.load = layout->segments;
      if (auto image = elf::ReadFunctions(canon)) l.image = std::move(*image);
      it = files.emplace(named.string(), std::move(l)).first;
    }
    const Loaded& l = it->second;
    AddrFilterObject obj{l.path, l.image ? &*l.image : nullptr, l.load};
    PTSNAP_ASSIGN_OR_RETURN(ResolvedAddrFilter r, ResolveAddrFilter(f, obj));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<ResolvedAddrFilter>> ParseAndResolveAddrFilters(std::string_view spec,
                                                                   const fs::path& program) {
  PTSNAP_ASSIGN_OR_RETURN(std::vector<AddrFilter> filters, ParseAddrFilters(spec));
  return ResolveAddrFilters(filters, program);
}

Result<std::vector<ResolvedAddrFilter>> ResolveRecordingFilters(const RecordOptions& opts) {
  if (opts.filter.empty()) return std::vector<ResolvedAddrFilter>{};
  fs::path program;
  if (!opts.command.empty()) {
    PTSNAP_ASSIGN_OR_RETURN(program, FindExecutable(opts.command[0]));
  } else if (!opts.pids.empty()) {
    std::error_code ec;
    const std::string exe = "/proc/" + std::to_string(opts.pids[0]) + "/exe";
    program = fs::read_symlink(exe, ec);
    if (ec) return Error::FromErrno("--filter: reading " + exe, ec.value());
  }
  return ParseAndResolveAddrFilters(opts.filter, program);
}

Result<void> CheckAddrFilterSupport(std::span<const ResolvedAddrFilter> filters,
                                    const sys::PmuInfo& pmu) {
  if (filters.empty()) return Ok();
  if (pmu.Cap("ip_filtering") == 0)
    return Error(
        "--filter: this CPU's Intel PT has no IP filtering "
        "(/sys/bus/event_source/devices/intel_pt/caps/ip_filtering is 0 or missing, as "
        "on Broadwell and older): drop --filter, or record with --emulate");
  for (const ResolvedAddrFilter& f : filters)
    if (f.action == AddrFilterAction::kStart || f.action == AddrFilterAction::kStop)
      return Error("--filter: '" + std::string(ToString(f.action)) + " " + f.what +
                   "': Intel PT has no start/stop addresses (the kernel refuses them); use "
                   "'filter " +
                   f.what + "' to trace only inside it, or 'tracestop " + f.what +
                   "' to stop tracing when it is reached");
  const uint64_t limit = pmu.nr_addr_filters ? *pmu.nr_addr_filters : pmu.Cap("num_address_ranges");
  if (filters.size() > limit)
    return Error("--filter: " + std::to_string(filters.size()) +
                 " address ranges, but this CPU's Intel PT takes at most " + std::to_string(limit) +
                 " (/sys/bus/event_source/devices/intel_pt/nr_addr_filters): give fewer "
                 "filters, or one range that covers neighbouring functions (OFFSET/SIZE)");
  return Ok();
}

Result<std::string> FormatKernelAddrFilters(std::span<const ResolvedAddrFilter> filters) {
  std::string out;
  for (const ResolvedAddrFilter& f : filters) {
    if (f.path.find_first_of(" ,\n\t") != std::string::npos)
      return Error("--filter: the kernel's filter syntax cannot name " + f.path +
                   " (a space or comma in the path): use a path without them (a symlink)");
    // perf's auxtrace.c: `tracestop` is the kernel's `stop` with a range.
    std::string_view action =
        f.action == AddrFilterAction::kTraceStop ? "stop" : ToString(f.action);
    if (!out.empty()) out += ',';
    out += std::string(action) + " " + base::Hex(f.offset) + "/" + base::Hex(f.size) + "@" + f.path;
  }
  return out;
}

}  // namespace ptsnap::record
