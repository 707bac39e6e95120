#include "decode/symbols.h"

#include <Zydis/Zydis.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "base/unique_fd.h"
#include "elf/elf_file.h"

namespace ptsnap::decode {

elf::SymbolTable KernelSymbols(const sys::Kallsyms& kallsyms) {
  elf::SymbolTable table;
  for (const sys::KallsymsSymbol& s : kallsyms.symbols) {
    if (s.type != 't' && s.type != 'T' && s.type != 'w' && s.type != 'W') continue;
    if (s.addr == 0) continue;
    elf::Symbol sym{s.addr, 0, s.module.empty() ? s.name : s.name + " [" + s.module + "]"};
    sym.split = elf::IsSplitPartName(s.name);
    table.Add(std::move(sym));
  }
  table.Finish();
  return table;
}

// ---------------------------------------------------------------------------

struct Mapping {
  uint64_t start = 0, end = 0, pgoff = 0;
  const elf::SymbolFile* elf = nullptr;  // null: no symbols (anon, unreadable)
  const std::string* dso = nullptr;
  int64_t bias = 0;  // process address - ELF vaddr
};

class ProcessSymbols {
 public:
  std::map<uint64_t, Mapping> maps;  // by start
  std::vector<const elf::SymbolTable*> jit;
  std::vector<std::unique_ptr<elf::SymbolTable>> jit_owned;
  std::unordered_map<uint64_t, Resolved> cache;
  // JIT code's source lines by start address: [start, end) of the code
  // loaded at `base` (a piece of it, after later code covered the rest).
  struct JitLineRange {
    uint64_t end = 0, base = 0;
    const JitLines* lines = nullptr;
  };
  std::map<uint64_t, JitLineRange> jit_lines;
  // In front of `cache`: the last address resolved in each of its slots
  // (Resolve runs per call and per jump out of a frame).
  struct Recent {
    uint64_t addr = 0;
    Resolved r;
  };
  static constexpr size_t kRecent = 1024;
  std::unique_ptr<Recent[]> recent;
  // SourceLine by address; HasInlines by function start.
  std::unordered_map<uint64_t, const SourceLocation*> lines;
  std::unordered_map<uint64_t, bool> has_inlines;
  void ClearCaches() {
    cache.clear();
    recent.reset();
    lines.clear();
    inlines.clear();
    has_inlines.clear();
  }
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
    }
  };
  // Symbolizer::Inlines by block; null: nothing inlined along it.
  std::unordered_map<std::pair<uint64_t, uint64_t>, std::unique_ptr<InlineRuns>, PairHash> inlines;

  const Mapping* Find(uint64_t addr) const {
    auto it = maps.upper_bound(addr);
    if (it == maps.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }
  void Insert(Mapping m) {
    // Trim or remove overlapped mappings; the newer mapping wins.
    auto it = maps.lower_bound(m.start);
    if (it != maps.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > m.start) {
        Mapping tail = prev->second;
        prev->second.end = m.start;
        if (tail.end > m.end) {
          tail.pgoff += m.end - tail.start;
          tail.start = m.end;
          maps[tail.start] = tail;
        }
      }
    }
    it = maps.lower_bound(m.start);
    while (it != maps.end() && it->first < m.end) {
      if (it->second.end > m.end) {
        Mapping tail = it->second;
        tail.pgoff += m.end - tail.start;
        tail.start = m.end;
        maps.erase(it);
        maps[tail.start] = tail;
        break;
      }
      it = maps.erase(it);
    }
    maps[m.start] = m;
    ClearCaches();
  }
};

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

const std::string* Symbolizer::Intern(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second.get();
  auto p = std::make_unique<std::string>(s);
  const std::string* raw = p.get();
  strings_.emplace(std::string(s), std::move(p));
  return raw;
}

void Symbolizer::SetKernelSymbols(elf::SymbolTable kallsyms, uint64_t kernel_start) {
  kallsyms_ = std::move(kallsyms);
  kernel_start_ = kernel_start;
}

std::vector<std::filesystem::path> Symbolizer::DebugCandidates(const std::filesystem::path& path,
                                                               const elf::SymbolFile& elf) const {
  return elf::DebugFileCandidates(path, elf.build_id(), elf.debuglink(), debug_dirs_);
}

const elf::SymbolFile* Symbolizer::LoadElf(const std::filesystem::path& path) {
  auto it = elves_.find(path.string());
  if (it != elves_.end()) return it->second.get();
  std::unique_ptr<elf::SymbolFile> elf;
  if (auto r = elf::SymbolFile::Open(path); r) {
    elf = std::make_unique<elf::SymbolFile>(std::move(r).value());
    if (!elf->has_symtab()) {
      // Separate debug info: by build-id first, then by .gnu_debuglink.
      std::vector<std::filesystem::path> candidates = DebugCandidates(path, *elf);
      for (const auto& c : candidates) {
        std::error_code ec;
        if (c == path || !std::filesystem::is_regular_file(c, ec)) continue;
        if (auto dbg = elf::SymbolFile::Open(c); dbg && dbg->has_symtab()) {
          elf->MergeSymbols(*dbg);
          break;
        }
      }
    }
  }
  const elf::SymbolFile* raw = elf.get();
  elves_[path.string()] = std::move(elf);
  return raw;
}

ProcessSymbols& Symbolizer::Process(int32_t pid) {
  if (last_process_ != nullptr && last_pid_ == pid) return *last_process_;
  auto& p = processes_[pid];
  if (!p) p = std::make_unique<ProcessSymbols>();
  last_pid_ = pid;
  last_process_ = p.get();
  return *p;
}

void Symbolizer::AddMapping(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                            const std::filesystem::path& file, const std::string& dso) {
  if (len == 0) return;
  Mapping m;
  m.start = addr;
  m.end = addr + len;
  m.pgoff = pgoff;
  m.dso = Intern(dso);
  if (!file.empty()) m.elf = LoadElf(file);
  if (m.elf != nullptr) {
    auto vaddr = m.elf->OffsetToVaddr(pgoff);
    if (!vaddr && pgoff == 0 && !m.elf->segments().empty()) vaddr = m.elf->segments()[0].vaddr;
    if (vaddr) {
      m.bias = static_cast<int64_t>(addr - *vaddr);
    } else {
      m.elf = nullptr;
    }
  }
  Process(pid).Insert(m);
}

void Symbolizer::AddPerfMap(int32_t pid, elf::SymbolTable table) {
  auto& p = Process(pid);
  p.jit_owned.push_back(std::make_unique<elf::SymbolTable>(std::move(table)));
  p.jit.push_back(p.jit_owned.back().get());
  p.ClearCaches();
}

void Symbolizer::AddPerfMap(std::span<const int32_t> pids, elf::SymbolTable table) {
  if (pids.empty()) return;
  AddPerfMap(pids[0], std::move(table));
  const elf::SymbolTable* shared = Process(pids[0]).jit.back();
  for (int32_t pid : pids.subspan(1)) {
    auto& p = Process(pid);
    p.jit.push_back(shared);
    p.ClearCaches();
  }
}

const JitLines* Symbolizer::KeepJitLines(JitLines lines) {
  jit_lines_.push_back(std::make_unique<JitLines>(std::move(lines)));
  return jit_lines_.back().get();
}

void Symbolizer::SetJitLines(int32_t pid, uint64_t addr, uint64_t len, const JitLines* lines) {
  if (len == 0) return;
  auto& ranges = Process(pid).jit_lines;
  const uint64_t end = addr + len;
  // Whatever overlaps [addr, end) is replaced; pieces of it outside stay.
  auto it = ranges.lower_bound(addr);
  if (it != ranges.begin() && std::prev(it)->second.end > addr) --it;
  std::vector<std::pair<uint64_t, ProcessSymbols::JitLineRange>> keep;
  while (it != ranges.end() && it->first < end) {
    const ProcessSymbols::JitLineRange& r = it->second;
    if (it->first < addr) keep.push_back({it->first, {addr, r.base, r.lines}});
    if (r.end > end) keep.push_back({end, r});
    it = ranges.erase(it);
  }
  for (auto& k : keep) ranges.insert(k);
  if (lines != nullptr) ranges[addr] = {end, addr, lines};
  Process(pid).lines.clear();  // SourceLine's answers for this code change
}

void Symbolizer::AddKernelSymbol(uint64_t time, uint64_t addr, uint64_t len, std::string_view name,
                                 std::string_view dso) {
  if (len == 0) return;
  ksymbols_[addr].push_back({addr + len, time, UINT64_MAX, Intern(name), Intern(dso)});
  ksymbol_max_len_ = std::max(ksymbol_max_len_, len);
}

void Symbolizer::RemoveKernelSymbol(uint64_t time, uint64_t addr, uint64_t len,
                                    std::string_view name, std::string_view dso) {
  std::vector<KernelSymbolVersion>& v = ksymbols_[addr];
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    if (it->until == UINT64_MAX && it->from <= time) {
      it->until = time;
      return;
    }
  }
  // Loaded before the recording began: it was `name` until now.
  if (len == 0) return;
  v.insert(v.begin(), {addr + len, 0, time, Intern(name), Intern(dso)});
  ksymbol_max_len_ = std::max(ksymbol_max_len_, len);
}

// Every KSYMBOL range that starts at most ksymbol_max_len_ below `addr` may
// cover it; of those alive at `time`, the latest registered wins.
bool Symbolizer::ResolveKernelSymbol(uint64_t addr, uint64_t time, Resolved& r) {
  if (ksymbols_.empty()) return false;
  const KernelSymbolVersion* best = nullptr;
  uint64_t best_start = 0;
  bool covered = false;
  const uint64_t lowest = addr >= ksymbol_max_len_ ? addr - ksymbol_max_len_ : 0;
  for (auto it = ksymbols_.upper_bound(addr); it != ksymbols_.begin();) {
    --it;
    if (it->first < lowest) break;
    for (const KernelSymbolVersion& v : it->second) {
      if (addr >= v.end) continue;
      covered = true;
      const bool alive = time == 0 || (v.from <= time && time < v.until);
      if (alive && (best == nullptr || v.from >= best->from)) {
        best = &v;
        best_start = it->first;
      }
    }
  }
  if (!covered) return false;
  if (best != nullptr) {
    r.known = true;
    r.ksymbol = true;
    r.start = best_start;
    r.end = best->end;
    r.name = best->name;
    r.dso = best->dso;
  } else {
    static const std::string kKernel = "[kernel.kallsyms]";
    r.dso = Intern(kKernel);
  }
  return true;
}

void Symbolizer::ResetProcess(int32_t pid) {
  auto& p = Process(pid);
  p.maps.clear();
  p.jit_lines.clear();
  p.ClearCaches();
}

void Symbolizer::ForkProcess(int32_t parent, int32_t child) {
  if (parent == child) return;
  auto& src = Process(parent);
  auto& dst = Process(child);
  dst.maps = src.maps;
  dst.jit = src.jit;
  dst.jit_lines = src.jit_lines;
  dst.ClearCaches();
}

uint32_t Symbolizer::FunctionId(const std::string* dso, uint64_t start, const std::string* name) {
  auto key = std::make_pair(dso != nullptr ? dso : name, start);
  auto it = function_ids_.find(key);
  if (it != function_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(function_ids_.size() + 1);
  function_ids_.emplace(key, id);
  return id;
}

Resolved Symbolizer::Resolve(int32_t pid, uint64_t addr, uint64_t time) {
  Resolved r;
  // Unknown code of an ELF file is named by its file and link-time address.
  std::string elf_file;
  uint64_t elf_vaddr = 0;
  // KSYMBOL-named code is looked up by time, so not cached by address.
  const bool versioned = IsKernelAddress(addr) && ResolveKernelSymbol(addr, time, r);
  auto& proc = Process(pid);
  ProcessSymbols::Recent* recent = nullptr;
  if (!versioned) {
    if (!proc.recent)
      proc.recent = std::make_unique<ProcessSymbols::Recent[]>(ProcessSymbols::kRecent);
    recent = &proc.recent[(addr ^ (addr >> 10)) % ProcessSymbols::kRecent];
    if (recent->r.name != nullptr && recent->addr == addr) return recent->r;
    if (auto it = proc.cache.find(addr); it != proc.cache.end()) {
      *recent = {addr, it->second};
      return it->second;
    }
  }
  if (versioned) {
    // Resolved above (r.known false: no symbol there at `time`).
  } else if (IsKernelAddress(addr)) {
    static const std::string kKernel = "[kernel.kallsyms]";
    r.dso = Intern(kKernel);
    if (const elf::Symbol* s = kallsyms_.Find(addr)) {
      r.known = true;
      r.start = s->start;
      r.end = s->start + (s->size != 0 ? s->size : 1);
      r.name = Intern(s->name);
      r.split = s->split;
    }
  } else if (const Mapping* m = proc.Find(addr)) {
    r.dso = m->dso;
    r.unknown_lo = m->start;
    r.unknown_hi = m->end;
    if (m->elf != nullptr) {
      uint64_t vaddr = addr - static_cast<uint64_t>(m->bias);
      elf_vaddr = vaddr;
      elf_file = m->elf->path().filename().string();
      if (const elf::Symbol* s = m->elf->symbols().Find(vaddr)) {
        r.known = true;
        r.start = s->start + static_cast<uint64_t>(m->bias);
        r.end = r.start + std::max<uint64_t>(s->size, 1);
        r.name = Intern(s->name);
        r.split = s->split;
      } else {
        // The gap between the symbols around vaddr, as SymbolTable::Find
        // sees it: after the last symbol starting at or before it (which
        // does not cover it), before the next one.
        const std::vector<elf::Symbol>& syms = m->elf->symbols().symbols();
        auto next = std::upper_bound(syms.begin(), syms.end(), vaddr,
                                     [](uint64_t a, const elf::Symbol& s) { return a < s.start; });
        uint64_t lo = 0, hi = UINT64_MAX;
        if (next != syms.begin()) {
          const elf::Symbol& prev = *std::prev(next);
          lo = prev.start + (prev.size != 0 ? prev.size : 0x10000);
        }
        if (next != syms.end()) hi = next->start;
        const auto bias = static_cast<uint64_t>(m->bias);
        // In process addresses, within the mapping (no wrap: lo <= vaddr < hi).
        if (lo + bias > r.unknown_lo && lo + bias <= addr) r.unknown_lo = lo + bias;
        if (hi != UINT64_MAX && hi + bias < r.unknown_hi && hi + bias > addr)
          r.unknown_hi = hi + bias;
      }
    }
  }
  if (r.known || !proc.jit.empty()) r.unknown_lo = r.unknown_hi = 0;
  if (!r.known) {
    for (const elf::SymbolTable* jit : proc.jit) {
      if (const elf::Symbol* s = jit->Find(addr)) {
        r.known = true;
        r.start = s->start;
        r.end = s->start + std::max<uint64_t>(s->size, 1);
        r.name = Intern(s->name);
        r.split = s->split;
        static const std::string kJit = "[jit]";
        if (r.dso == nullptr) r.dso = Intern(kJit);
        break;
      }
    }
  }
  if (!r.known) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
    std::string name;
    if (r.dso != nullptr && *r.dso == "[jit]") {
      name = "[jit @ " + std::string(buf) + "]";  // JIT code without a name
    } else if (!elf_file.empty()) {
      // FILE+0xVADDR, as code an FDE bounds is named (elf::SymbolFile): the
      // address objdump --start-address and addr2line take, not where this
      // run happened to load the file.
      std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(elf_vaddr));
      name = "[unknown @ " + elf_file + buf + "]";
    } else {
      name = "[unknown @ " + std::string(buf);
      if (r.dso != nullptr) name += " (" + *r.dso + ")";
      name += "]";
    }
    r.name = Intern(name);
    r.start = addr;
    r.end = addr + 1;
  }
  // Programs loaded one after the other at one address are different
  // functions: keyed by name.
  r.function_id = FunctionId(r.known && !versioned ? r.dso : nullptr, r.start, r.name);
  if (versioned) return r;
  if (proc.cache.size() > (1u << 20)) proc.cache.clear();
  proc.cache.emplace(addr, r);
  *recent = {addr, r};
  return r;
}

DwarfFile* Symbolizer::Dwarf(const Mapping& m) {
  const std::filesystem::path& path = m.elf->path();
  auto it = dwarves_.find(path.string());
  if (it == dwarves_.end()) {
    std::unique_ptr<DwarfFile> dw = DwarfFile::Open(path);
    if (dw == nullptr) {
      for (const auto& c : DebugCandidates(path, *m.elf)) {
        std::error_code ec;
        if (c == path || !std::filesystem::is_regular_file(c, ec)) continue;
        if ((dw = DwarfFile::Open(c)) != nullptr) break;
      }
    }
    it = dwarves_.emplace(path.string(), std::move(dw)).first;
  }
  return it->second.get();
}

const SourceLocation* Symbolizer::SourceLine(int32_t pid, uint64_t addr) {
  if (addr == 0 || IsKernelAddress(addr)) return nullptr;
  ProcessSymbols& proc = Process(pid);
  auto [it, fresh] = proc.lines.try_emplace(addr, nullptr);
  if (!fresh) return it->second;
  const Mapping* m = proc.Find(addr);
  if (m == nullptr || m->elf == nullptr) {
    // JIT code: the debug entry at or below `addr` in the code covering it.
    auto range = proc.jit_lines.upper_bound(addr);
    if (range == proc.jit_lines.begin()) return nullptr;
    --range;
    if (addr >= range->second.end) return nullptr;
    const JitLines& lines = *range->second.lines;
    auto at =
        std::upper_bound(lines.offsets.begin(), lines.offsets.end(), addr - range->second.base);
    if (at == lines.offsets.begin()) return nullptr;
    it->second = &lines.lines[static_cast<size_t>(at - lines.offsets.begin() - 1)];
    return it->second;
  }
  DwarfFile* dw = Dwarf(*m);
  if (dw == nullptr) return nullptr;
  it->second = dw->Lookup(addr - static_cast<uint64_t>(m->bias));
  return it->second;
}

bool Symbolizer::HasInlines(int32_t pid, uint64_t fn_start) {
  if (IsKernelAddress(fn_start)) return false;
  ProcessSymbols& proc = Process(pid);
  auto [it, fresh] = proc.has_inlines.try_emplace(fn_start, false);
  if (!fresh) return it->second;
  const Mapping* m = proc.Find(fn_start);
  if (m == nullptr || m->elf == nullptr) return false;
  DwarfFile* dw = Dwarf(*m);
  it->second = dw != nullptr && dw->Inlines(fn_start - static_cast<uint64_t>(m->bias)) != nullptr;
  return it->second;
}

namespace {

bool Encloses(const InlineScope* outer, const InlineScope* s) {
  for (; s != nullptr; s = s->parent) {
    if (s == outer) return true;
  }
  return false;
}

}  // namespace

const InlineRuns* Symbolizer::Inlines(int32_t pid, uint64_t fn_start, uint64_t start,
                                      uint64_t end) {
  if (start > end || IsKernelAddress(start)) return nullptr;
  ProcessSymbols& proc = Process(pid);
  auto key = std::make_pair(start, end);
  if (auto it = proc.inlines.find(key); it != proc.inlines.end()) return it->second.get();
  std::unique_ptr<InlineRuns> result;
  const Mapping* m = proc.Find(start);
  InlineTable* table = nullptr;
  if (m != nullptr && m->elf != nullptr && end < m->end && fn_start >= m->start &&
      fn_start < m->end) {
    if (DwarfFile* dw = Dwarf(*m); dw != nullptr) {
      table = dw->Inlines(fn_start - static_cast<uint64_t>(m->bias));
    }
  }
  if (table != nullptr) {
    const auto bias = static_cast<uint64_t>(m->bias);
    const uint64_t lo = start - bias, hi = end - bias;  // [lo, hi] in ELF vaddrs
    // The innermost inlined call at each point where it changes.
    std::vector<InlineRun> runs{{lo, nullptr}};
    for (auto it = table->From(lo); it != table->intervals.end() && it->lo <= hi; ++it) {
      const uint64_t at = std::max(it->lo, lo);
      if (runs.back().leaf != nullptr && runs.back().addr != at) runs.push_back({at, nullptr});
      if (runs.back().addr == at) {
        runs.back().leaf = it->leaf;
      } else {
        runs.push_back({at, it->leaf});
      }
      if (it->hi <= hi) runs.push_back({it->hi, nullptr});
    }
    // A stretch of outer code between two pieces of one inlined call is
    // that call's (the compiler interleaved them): straight-line code
    // cannot run one inlined call twice.
    for (size_t i = 0; i < runs.size(); ++i) {
      for (const InlineScope* x = runs[i].leaf; x != nullptr; x = x->parent) {
        size_t last = i;
        for (size_t j = runs.size(); j-- > i + 1;) {
          if (Encloses(x, runs[j].leaf)) {
            last = j;
            break;
          }
        }
        bool outer_only = true;
        for (size_t k = i + 1; k < last && outer_only; ++k) {
          outer_only =
              Encloses(x, runs[k].leaf) || runs[k].leaf == nullptr || Encloses(runs[k].leaf, x);
        }
        if (!outer_only) continue;
        for (size_t k = i + 1; k < last; ++k) {
          if (!Encloses(x, runs[k].leaf)) runs[k].leaf = x;
        }
      }
    }
    std::vector<InlineRun> merged;
    for (const InlineRun& r : runs) {
      if (!merged.empty() && merged.back().leaf == r.leaf) continue;
      merged.push_back({r.addr + bias, r.leaf});
    }
    if (merged.size() > 1 || merged[0].leaf != nullptr) {
      result = std::make_unique<InlineRuns>();
      result->bias = m->bias;
      result->runs = std::move(merged);
      CountInstructions(*m, start, end, result.get());
      if (!table->named) {
        for (InlineScope& s : table->scopes) s.display = Intern(s.name + " (inlined)");
        table->named = true;
      }
    }
  }
  if (proc.inlines.size() > (1u << 20)) proc.inlines.clear();
  return proc.inlines.emplace(key, std::move(result)).first->second.get();
}

std::span<const std::byte> Symbolizer::FileBytes(const Mapping& m) {
  auto it = files_.find(m.elf);
  if (it == files_.end()) {
    base::MappedRegion map;
    base::UniqueFd fd(::open(m.elf->path().c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() >= 0 && ::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
      auto r = base::MappedRegion::Map(static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE,
                                       fd.get(), 0);
      if (r) map = std::move(*r);
    }
    it = files_.emplace(m.elf, std::move(map)).first;
  }
  return it->second.bytes();
}

// Walks the block's code from `start`, an instruction at a time, to the
// instruction at `end`; each run starts at the first instruction at or
// after its address. Leaves `insns` at 0 (the runs' counts unused) unless
// the walk lands on `end`.
void Symbolizer::CountInstructions(const Mapping& m, uint64_t start, uint64_t end, InlineRuns* r) {
  const std::span<const std::byte> file = FileBytes(m);
  const uint64_t off = start - m.start + m.pgoff;
  if (start < m.start || off >= file.size() || end - start >= (1u << 20)) return;
  const auto* code = reinterpret_cast<const uint8_t*>(file.data() + off);
  const uint64_t avail = file.size() - off;
  ZydisDecoder decoder;
  if (ZYAN_FAILED(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
    return;
  uint64_t at = start;
  uint32_t n = 0;
  size_t run = 0;
  while (at <= end) {
    for (; run < r->runs.size() && r->runs[run].addr <= at; ++run) r->runs[run].insn = n;
    ZydisDecodedInstruction insn;
    const uint64_t pos = at - start;
    if (pos >= avail || ZYAN_FAILED(ZydisDecoderDecodeInstruction(&decoder, nullptr, code + pos,
                                                                  avail - pos, &insn))) {
      return;
    }
    if (at == end) {
      r->insns = n + 1;
      return;
    }
    at += insn.length;
    ++n;
  }
}

}  // namespace ptsnap::decode
