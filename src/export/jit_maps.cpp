#include "export/jit_maps.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>

#include "elf/symbol_file.h"
#include "export/jit_elf.h"
#include "trace/jit_code.h"
#include "trace/jitdump.h"
#include "trace/owned_file.h"

namespace ptsnap::exporter {

namespace fs = std::filesystem;

namespace {

// The names the decoder gives [addr, addr + len) (decode/symbols.cpp: the
// first table holding an address names it), as symbols of the code: the
// range cut where any symbol of any table starts or ends.
std::vector<JitElfSymbol> NamesFor(uint64_t addr, uint64_t len,
                                   const std::vector<const elf::SymbolTable*>& tables) {
  const uint64_t end = addr + len;
  std::vector<uint64_t> cuts = {addr, end};
  for (const elf::SymbolTable* t : tables) {
    const std::vector<elf::Symbol>& s = t->symbols();
    auto it = std::upper_bound(s.begin(), s.end(), addr,
                               [](uint64_t a, const elf::Symbol& x) { return a < x.start; });
    if (it != s.begin()) --it;  // the nearest symbol below addr may reach into the range
    for (; it != s.end() && it->start < end; ++it) {
      for (uint64_t c : {it->start, it->start + it->size})
        if (c > addr && c < end) cuts.push_back(c);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<JitElfSymbol> out;
  const elf::Symbol* last = nullptr;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const elf::Symbol* found = nullptr;
    for (const elf::SymbolTable* t : tables)
      if ((found = t->Find(cuts[i])) != nullptr) break;
    if (found == nullptr) {
      last = nullptr;
      continue;
    }
    if (found == last) {
      out.back().size += cuts[i + 1] - cuts[i];
    } else {
      out.push_back({cuts[i] - addr, cuts[i + 1] - cuts[i], found->name});
    }
    last = found;
  }
  return out;
}

// The trace's file `rel`: nullopt when absent (silently) or unreadable (a
// warning).
std::optional<std::string> ReadJitFile(const trace::TraceReader& trace, const fs::path& rel,
                                       std::vector<std::string>* warnings) {
  struct stat st;
  if (::lstat((trace.dir() / rel).c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  auto text = trace::ReadOwnedFile(trace.dir(), rel, size_t{1} << 30);
  if (!text) {
    warnings->push_back("JIT code not exported: " + text.error().ToString());
    return std::nullopt;
  }
  return std::move(*text);
}

}  // namespace

std::string JitFileName(const JitFile& f) {
  return "jitted-" + std::to_string(f.pid) + "-" + std::to_string(f.seq) + ".so";
}

JitCode ReadJitCode(const trace::TraceReader& trace) {
  JitCode out;
  const trace::Manifest& m = trace.manifest();
  const bool emulated = m.source == trace::Source::kEmulated;
  for (int32_t pid : m.pids) {
    elf::SymbolTable perf_map, dump_names;
    if (auto text = ReadJitFile(trace, trace::PerfMapPath({}, pid), &out.warnings))
      perf_map = elf::ParsePerfMap(*text);
    std::optional<std::string> dump_text =
        ReadJitFile(trace, trace::JitdumpPath({}, pid), &out.warnings);
    std::optional<trace::Jitdump> dump;
    const std::string dump_where = (trace.dir() / trace::JitdumpPath({}, pid)).string() + ": ";
    if (dump_text) {
      auto parsed = trace::ParseJitdump(*dump_text);
      if (!parsed) {
        out.warnings.push_back(dump_where + parsed.error().ToString() + "; it is not used");
      } else {
        if (!parsed->malformed.empty())
          out.warnings.push_back(dump_where + parsed->malformed +
                                 "; the records after it are not used");
        dump = std::move(*parsed);
      }
    }
    // The jitdump's names, loads and moves, as the decoder takes them.
    std::unordered_map<uint64_t, const trace::JitdumpCodeLoad*> by_index;
    if (dump) {
      for (const trace::JitdumpCodeLoad& l : dump->loads) {
        by_index[l.code_index] = &l;
        if (!l.code.empty()) dump_names.Add(elf::Symbol{l.code_addr, l.code.size(), l.name});
      }
      for (const trace::JitdumpCodeMove& mv : dump->moves) {
        auto it = by_index.find(mv.code_index);
        if (it != by_index.end())
          dump_names.Add(elf::Symbol{mv.new_code_addr, mv.code_size, it->second->name});
      }
    }
    dump_names.Finish();
    const std::vector<const elf::SymbolTable*> tables = {&perf_map, &dump_names};
    uint32_t seq = 0;
    auto add_file = [&](uint64_t addr, std::string_view code) {
      JitFile f;
      f.pid = pid;
      f.seq = seq++;
      f.bytes = MakeJitElf(addr, code, NamesFor(addr, code.size(), tables));
      f.build_id = JitBuildId(addr, code);
      out.files.push_back(std::move(f));
      return out.files.size() - 1;
    };
    if (dump && !emulated) {
      const bool tsc = dump->header.arch_timestamp();
      auto time = [&](uint64_t ts) {
        return tsc && m.time_conv.time_mult != 0 ? trace::TscToPerfTime(m.time_conv, ts) : ts;
      };
      std::unordered_map<uint64_t, size_t> file_of_index;
      for (const trace::JitdumpCodeLoad& l : dump->loads) {
        if (l.code.empty()) continue;
        size_t file = add_file(l.code_addr, l.code);
        file_of_index[l.code_index] = file;
        out.maps.push_back(
            {pid, l.tid, time(l.timestamp), l.code_addr, l.code.size(), false, true, file, 0});
      }
      for (const trace::JitdumpCodeMove& mv : dump->moves) {
        auto it = by_index.find(mv.code_index);
        auto file = file_of_index.find(mv.code_index);
        if (it == by_index.end() || file == file_of_index.end() ||
            mv.code_size != it->second->code.size())
          continue;
        out.maps.push_back({pid, mv.tid, time(mv.timestamp), mv.new_code_addr, mv.code_size, false,
                            true, file->second, 0});
      }
    }
    const fs::path rel = trace::JitCodePath({}, pid);
    if (auto text = ReadJitFile(trace, rel, &out.warnings)) {
      auto file = trace::ParseJitCode(*text);
      if (!file) {
        out.warnings.push_back((trace.dir() / rel).string() + ": " + file.error().ToString() +
                               "; its JIT code is not exported");
      } else {
        for (const trace::JitCodeLoad& l : file->loads) {
          size_t f = add_file(l.addr, l.code);
          out.maps.push_back({pid, l.tid, l.time, l.addr, l.code.size(),
                              (l.flags & trace::kJitCodeReplaces) != 0, false, f, 0});
        }
      }
    }
  }
  std::stable_sort(out.maps.begin(), out.maps.end(),
                   [](const JitMap& a, const JitMap& b) { return a.time < b.time; });
  return out;
}

void PlaceJitMaps(std::vector<JitMap>* maps, const std::vector<trace::Record>& sideband) {
  // Per process, in time order: the records a JIT map must not precede
  // (an exec or fork: all addresses; a file mapping: its range).
  struct Bound {
    uint64_t time = 0, start = 0, end = UINT64_MAX;
  };
  std::unordered_map<int32_t, std::vector<Bound>> bounds;
  for (const trace::Record& r : sideband) {
    const uint64_t t = r.sample_id.time;
    if (const auto* c = std::get_if<trace::Comm>(&r.body)) {
      if (c->exec && c->pid == c->tid) bounds[static_cast<int32_t>(c->pid)].push_back({t});
    } else if (const auto* task = std::get_if<trace::Task>(&r.body)) {
      if (!task->exit && task->pid != task->ppid)
        bounds[static_cast<int32_t>(task->pid)].push_back({t});
    } else if (const auto* mm = std::get_if<trace::Mmap2>(&r.body)) {
      if (!mm->filename.starts_with("//anon"))
        bounds[static_cast<int32_t>(mm->pid)].push_back({t, mm->addr, mm->addr + mm->len});
    }
  }
  struct Placed {
    uint64_t time, start, end;
  };
  std::unordered_map<int32_t, std::vector<Placed>> placed;
  for (JitMap& jm : *maps) {
    const uint64_t start = jm.addr, end = jm.addr + jm.len;
    if (jm.runtime_time || jm.replaces) {
      jm.map_time = jm.time;
    } else {
      uint64_t floor = 0;
      for (const Bound& b : bounds[jm.pid])
        if (b.time <= jm.time && b.start < end && start < b.end) floor = std::max(floor, b.time);
      for (const Placed& p : placed[jm.pid])
        if (p.start < end && start < p.end) floor = std::max(floor, p.time);
      jm.map_time = std::min(floor, jm.time);
    }
    placed[jm.pid].push_back({jm.map_time, start, end});
  }
}

}  // namespace ptsnap::exporter
