#include "decode/source_lines.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "elf/symbol_file.h"

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

std::vector<InlineTable::Interval>::const_iterator InlineTable::From(uint64_t vaddr) const {
  return std::upper_bound(intervals.begin(), intervals.end(), vaddr,
                          [](uint64_t a, const Interval& i) { return a < i.hi; });
}

void BuildInlineIntervals(
    InlineTable& table,
    const std::vector<std::pair<InlineScope*, std::pair<uint64_t, uint64_t>>>& ranges) {
  // Elementary intervals between every range boundary, each painted with
  // the deepest scope covering it (ranges sorted by depth: deeper paint last).
  std::vector<uint64_t> bounds;
  for (const auto& [scope, r] : ranges) {
    if (r.first >= r.second) continue;
    bounds.push_back(r.first);
    bounds.push_back(r.second);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::vector<InlineScope*> paint(bounds.empty() ? 0 : bounds.size() - 1, nullptr);
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].first->depth < ranges[b].first->depth;
  });
  for (size_t i : order) {
    const auto& [scope, r] = ranges[i];
    if (r.first >= r.second) continue;
    size_t k = std::lower_bound(bounds.begin(), bounds.end(), r.first) - bounds.begin();
    for (; k + 1 < bounds.size() && bounds[k] < r.second; ++k) paint[k] = scope;
  }
  table.intervals.clear();
  for (size_t k = 0; k < paint.size(); ++k) {
    if (paint[k] == nullptr) continue;
    if (!table.intervals.empty() && table.intervals.back().hi == bounds[k] &&
        table.intervals.back().leaf == paint[k]) {
      table.intervals.back().hi = bounds[k + 1];
    } else {
      table.intervals.push_back({bounds[k], bounds[k + 1], paint[k]});
    }
  }
}

namespace {

// The inlined function's name: the linkage name demangled (C++: the same
// spelling as the symbol table's), else DW_AT_name, following
// DW_AT_abstract_origin and DW_AT_specification (dwarf_attr_integrate).
std::string InlinedName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) != nullptr ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr) != nullptr) {
    if (const char* s = dwarf_formstring(&attr); s != nullptr) return elf::Demangle(s);
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* s = dwarf_formstring(&attr); s != nullptr) return s;
  }
  return "[inlined]";
}

// Collects the DW_TAG_inlined_subroutine DIEs under `parent` (through
// lexical blocks and other inlined calls, not nested functions), with
// their address ranges. Depth-limited against malformed DWARF.
void CollectInlined(Dwarf_Die* parent, InlineScope* enclosing, uint32_t depth, InlineTable& table,
                    std::vector<std::pair<InlineScope*, std::pair<uint64_t, uint64_t>>>& ranges) {
  if (depth > 64) return;
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    const int tag = dwarf_tag(&child);
    if (tag == DW_TAG_inlined_subroutine) {
      InlineScope& scope = table.scopes.emplace_back();
      scope.name = InlinedName(&child);
      scope.parent = enclosing;
      scope.depth = depth;
      Dwarf_Word line = 0;
      Dwarf_Attribute attr;
      if (dwarf_attr(&child, DW_AT_call_line, &attr) != nullptr &&
          dwarf_formudata(&attr, &line) == 0) {
        scope.call_line = static_cast<uint32_t>(line);
      }
      Dwarf_Addr base = 0, start = 0, end = 0, lowest = UINT64_MAX;
      for (ptrdiff_t off = 0; (off = dwarf_ranges(&child, off, &base, &start, &end)) > 0;) {
        ranges.push_back({&scope, {start, end}});
        lowest = std::min<uint64_t>(lowest, start);
      }
      Dwarf_Addr entry = 0;
      scope.entry =
          dwarf_entrypc(&child, &entry) == 0 ? entry : (lowest != UINT64_MAX ? lowest : 0);
      CollectInlined(&child, &scope, depth + 1, table, ranges);
    } else if (tag == DW_TAG_lexical_block) {
      CollectInlined(&child, enclosing, depth, table, ranges);
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

InlineTable* DwarfFile::Inlines(uint64_t fn_vaddr) {
  if (auto it = inline_by_vaddr_.find(fn_vaddr); it != inline_by_vaddr_.end()) return it->second;
  InlineTable* found = nullptr;
  Dwarf_Die cu;
  Dwarf_Die* scopes = nullptr;
  int n = 0;
  if (dwarf_addrdie(static_cast<Dwarf*>(dwarf_), fn_vaddr, &cu) != nullptr) {
    n = dwarf_getscopes(&cu, fn_vaddr, &scopes);
  }
  // Innermost first: the first subprogram is the function itself.
  for (int i = 0; i < n; ++i) {
    if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram) continue;
    const Dwarf_Off off = dwarf_dieoffset(&scopes[i]);
    auto& slot = inline_by_die_[off];
    if (slot == nullptr) {
      auto table = std::make_unique<InlineTable>();
      std::vector<std::pair<InlineScope*, std::pair<uint64_t, uint64_t>>> ranges;
      CollectInlined(&scopes[i], nullptr, 1, *table, ranges);
      BuildInlineIntervals(*table, ranges);
      slot = std::move(table);
    }
    if (!slot->intervals.empty()) found = slot.get();
    break;
  }
  std::free(scopes);
  inline_by_vaddr_.emplace(fn_vaddr, found);
  return found;
}

}  // namespace ptsnap::decode
