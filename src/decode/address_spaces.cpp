#include "decode/address_spaces.h"

#include <sys/stat.h>

#include <cerrno>

#include <algorithm>
#include <utility>
#include <variant>

#include "base/check.h"
#include "base/string_util.h"
#include "trace/jit_code.h"
#include "trace/jitdump.h"
#include "trace/owned_file.h"
#include "trace/trace_dir.h"

namespace ptsnap::decode {
namespace {

// Address spaces per process at most; later replacements go into the last
// one (decoded as before this change: as of the end of the recording).
constexpr size_t kMaxSpaces = 256;

bool IsRegular(const std::filesystem::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uint64_t FileSize(const std::filesystem::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// A jitdump load's JIT_CODE_DEBUG_INFO as offsets into its code at
// `code_addr` (`size` bytes): entries outside the code and without a line
// are dropped; of entries at one address the last counts.
JitLines ToJitLines(const trace::JitdumpDebugInfo& debug, uint64_t code_addr, uint64_t size) {
  std::vector<const trace::JitdumpDebugEntry*> entries;
  for (const trace::JitdumpDebugEntry& e : debug.entries) {
    if (e.addr >= code_addr && e.addr - code_addr < size && e.line > 0) entries.push_back(&e);
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto* a, const auto* b) { return a->addr < b->addr; });
  JitLines out;
  for (const trace::JitdumpDebugEntry* e : entries) {
    SourceLocation loc{e->file, static_cast<uint32_t>(e->line)};
    if (!out.offsets.empty() && out.offsets.back() == e->addr - code_addr) {
      out.lines.back() = std::move(loc);
      continue;
    }
    out.offsets.push_back(e->addr - code_addr);
    out.lines.push_back(std::move(loc));
  }
  return out;
}

// Build-ids in MMAP2 records are padded to 20 bytes; compare the common prefix
// of the hex strings, as long as both are non-empty.
bool BuildIdsMatch(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return true;
  size_t n = std::min(a.size(), b.size());
  return a.compare(0, n, b, 0, n) == 0;
}

}  // namespace

AddressSpaces::AddressSpaces(std::filesystem::path dir, std::vector<trace::Binary> binaries,
                             struct pt_image_section_cache* iscache, const KernelImage& kernel,
                             Symbolizer& symbolizer, DecodeStats& stats, ImageViews* views)
    : dir_(std::move(dir)),
      binaries_(std::move(binaries)),
      iscache_(iscache),
      kernel_(kernel),
      symbolizer_(symbolizer),
      stats_(stats),
      views_(views) {}

// Copying an image or adding a cached section fails only on bad arguments
// (a null image, an isid not in the cache): a bug, never a property of the
// trace.
void AddressSpaces::CopyImage(struct pt_image* dst, const struct pt_image* src) {
  PTSNAP_CHECK_OK(pt_image_copy(dst, src));
  if (views_ != nullptr) views_->Copy(dst, src);
}

void AddressSpaces::AddSection(struct pt_image* image, int isid) {
  PTSNAP_CHECK_OK(pt_image_add_cached(image, iscache_, isid, nullptr));
  if (views_ != nullptr) views_->Add(image, isid);
}

void AddressSpaces::Apply(const trace::Record& rec) {
  uint64_t time = rec.sample_id.time;
  ApplyQueuedCode(time);
  if (const auto* m = std::get_if<trace::Mmap2>(&rec.body)) {
    std::string bid = (rec.misc & trace::kMiscMmapBuildId) ? base::HexBytes(m->build_id) : "";
    if ((m->prot & 4 /*PROT_EXEC*/) == 0 && m->prot != 0) return;
    // A runtime's jitdump marker mapping (LoadJit reads the file): no code.
    if (trace::JitdumpMarkerPid(m->filename)) return;
    AddMmap(static_cast<int32_t>(m->pid), time, m->addr, m->len, m->pgoff, m->filename, bid);
  } else if (const auto* m1 = std::get_if<trace::Mmap>(&rec.body)) {
    AddMmap(static_cast<int32_t>(m1->pid), time, m1->addr, m1->len, m1->pgoff, m1->filename, "");
  } else if (const auto* c = std::get_if<trace::Comm>(&rec.body)) {
    if (c->exec && c->pid == c->tid) {
      // exec: the old mappings are gone. A space with no code yet (the
      // process was first seen here) is reused.
      int32_t pid = static_cast<int32_t>(c->pid);
      int32_t space = CurrentSpace(pid);
      if (code_maps_[space].empty()) {
        symbolizer_.ResetProcess(space);
      } else {
        NewSpace(pid, time, /*copy=*/false);
      }
    }
  } else if (const auto* k = std::get_if<trace::Ksymbol>(&rec.body)) {
    ApplyKsymbol(time, *k);
  } else if (const auto* t = std::get_if<trace::Task>(&rec.body)) {
    if (!t->exit && t->pid != t->ppid) {
      int32_t child = static_cast<int32_t>(t->pid), parent = static_cast<int32_t>(t->ppid);
      int32_t from = CurrentSpace(parent);
      int32_t space =
          epochs_.count(child) != 0 ? NewSpace(child, time, false) : CurrentSpace(child);
      if (space != from) {
        // Copying an image fails only on bad arguments (a null image): a
        // bug, never a property of the trace.
        CopyImage(Image(space), Image(from));
        code_maps_[space] = code_maps_[from];
        symbolizer_.ForkProcess(from, space);
        if (auto it = jit_.find(from); it != jit_.end()) Jit(space) = *it->second;
      }
    }
  }
}

// PERF_RECORD_KSYMBOL (linux/perf_event.h): kernel code outside kallsyms'
// text registered (loaded) or, with PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER,
// unregistered at the record's time. TYPE_BPF: a BPF program
// ("bpf_prog_<tag>_<name>"), trampoline or dispatcher; TYPE_OOL:
// out-of-line code (optimized kprobes' instruction pages, ftrace
// trampolines). Their bytes are decoded only where the kcore copy holds
// them (KernelImage): elsewhere the code is a named gap.
void AddressSpaces::ApplyKsymbol(uint64_t time, const trace::Ksymbol& k) {
  const char* dso = nullptr;
  if (k.ksym_type == PERF_RECORD_KSYMBOL_TYPE_BPF) {
    dso = "[bpf]";
  } else if (k.ksym_type == PERF_RECORD_KSYMBOL_TYPE_OOL) {
    dso = "[kernel.kallsyms]";
  } else {
    return;
  }
  if (!IsKernelAddress(k.addr)) return;
  if ((k.flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER) != 0) {
    symbolizer_.RemoveKernelSymbol(time, k.addr, k.len, k.name, dso);
  } else {
    symbolizer_.AddKernelSymbol(time, k.addr, k.len, k.name, dso);
  }
  stats_.kernel_symbols++;
}

MappedFile AddressSpaces::Resolve(int32_t pid, const std::string& filename,
                                  const std::string& build_id) {
  if (filename == "[vdso]") {
    const std::filesystem::path rel = std::filesystem::path("vdso") / (std::to_string(pid) + ".so");
    if (trace::IsOwnedFile(dir_, rel)) return {dir_ / rel, ""};
    return {{}, "no vdso dump"};
  }
  if (filename.empty() || filename[0] == '[' || filename.starts_with("//anon") ||
      filename.starts_with("/memfd:") || filename.ends_with(" (deleted)")) {
    return {{}, "anonymous"};
  }
  std::string expected = build_id;
  std::filesystem::path path;
  for (const auto& b : binaries_) {
    if (b.path != filename) continue;
    if (expected.empty()) expected = b.build_id;
    struct stat st;
    if (b.copy.empty() || (::lstat((dir_ / b.copy).c_str(), &st) != 0 && errno == ENOENT))
      continue;  // no copy: the file on this machine, below
    if (auto copy = trace::OpenOwnedFile(dir_, b.copy)) {
      path = dir_ / b.copy;
    } else {
      stats_.warnings.push_back("binary copy refused: " + copy.error().ToString());
    }
  }
  if (path.empty()) {
    if (!IsRegular(filename)) {
      stats_.missing_files++;
      stats_.warnings.push_back(filename + ": not found on this machine; its code is not decoded");
      return {{}, "missing"};
    }
    path = filename;
  }
  const elf::SymbolFile* elf = symbolizer_.LoadElf(path);
  if (elf != nullptr && !BuildIdsMatch(elf->build_id(), expected)) {
    stats_.build_id_mismatches++;
    stats_.warnings.push_back(path.string() + ": build-id " + elf->build_id() +
                              " differs from the recorded " + expected +
                              " (the file changed since recording); its code is not decoded");
    return {{}, "build-id mismatch"};
  }
  return {path, ""};
}

std::vector<CodeMapping> AddressSpaces::CodeMappings(int32_t space) const {
  std::vector<CodeMapping> out;
  auto it = code_maps_.find(space);
  if (it == code_maps_.end()) return out;
  for (const CodeMap& c : it->second) out.push_back({c.start, c.end, c.start + c.delta, c.file});
  std::sort(out.begin(), out.end(),
            [](const CodeMapping& a, const CodeMapping& b) { return a.start < b.start; });
  return out;
}

struct pt_image* AddressSpaces::Image(int32_t space) {
  auto it = images_.find(space);
  if (it != images_.end()) return it->second.get();
  UniqueImage image = NewImage(std::to_string(space).c_str());
  // Copying or adding a cached section fails only on bad arguments (a null
  // image, an isid not in the cache): a bug, never a property of the trace.
  CopyImage(image.get(), kernel_.image());
  AttachJit(space, image.get());
  return images_.emplace(space, std::move(image)).first->second.get();
}

JitMemory& AddressSpaces::Jit(int32_t space) {
  std::unique_ptr<JitMemory>& j = jit_[space];
  if (!j) {
    j = std::make_unique<JitMemory>();
    AttachJit(space, Image(space));
  }
  return *j;
}

void AddressSpaces::AttachJit(int32_t space, struct pt_image* image) {
  auto it = jit_.find(space);
  if (it == jit_.end() || !it->second) return;
  // Fails only on a null image: a bug.
  PTSNAP_CHECK_OK(pt_image_set_callback(image, ReadJitMemory, it->second.get()));
  if (views_ != nullptr) views_->SetJit(image, it->second.get());
}

struct pt_image* AddressSpaces::Image(int32_t space, size_t pokes) {
  if (pokes == 0) return Image(space);
  std::vector<UniqueImage>& v = poked_images_[space];
  while (v.size() < pokes) {
    struct pt_image* prev = v.empty() ? Image(space) : v.back().get();
    UniqueImage image = NewImage(nullptr);
    CopyImage(image.get(), prev);
    AddSection(image.get(), kernel_.PokeIsid(v.size()));
    AttachJit(space, image.get());
    v.push_back(std::move(image));
  }
  return v[pokes - 1].get();
}

int32_t AddressSpaces::CurrentSpace(int32_t pid) {
  std::vector<Epoch>& v = epochs_[pid];
  if (v.empty()) v.push_back({0, pid});
  return v.back().space;
}

int32_t AddressSpaces::NewSpace(int32_t pid, uint64_t time, bool copy) {
  int32_t old = CurrentSpace(pid);
  std::vector<Epoch>& v = epochs_[pid];
  if (v.size() >= kMaxSpaces) return old;
  int32_t id = next_space_++;
  struct pt_image* image = Image(id);
  if (copy) {
    CopyImage(image, Image(old));
    code_maps_[id] = code_maps_[old];
    symbolizer_.ForkProcess(old, id);
    if (auto it = jit_.find(old); it != jit_.end()) Jit(id) = *it->second;
  } else {
    exec_spaces_.insert(id);
  }
  v.push_back({std::max(time, v.back().start), id});
  return id;
}

int32_t AddressSpaces::SpaceAt(int32_t pid, uint64_t time) const {
  auto it = epochs_.find(pid);
  if (it == epochs_.end() || it->second.empty()) return pid;
  const std::vector<Epoch>& v = it->second;
  auto e = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Epoch& x) { return t < x.start; });
  return e == v.begin() ? v.front().space : std::prev(e)->space;
}

uint64_t AddressSpaces::NextSpaceChange(int32_t pid, uint64_t time) const {
  auto it = epochs_.find(pid);
  if (it == epochs_.end()) return UINT64_MAX;
  const std::vector<Epoch>& v = it->second;
  auto e = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Epoch& x) { return t < x.start; });
  return e == v.end() ? UINT64_MAX : e->start;
}

int32_t AddressSpaces::LastSpace(int32_t pid) const {
  auto it = epochs_.find(pid);
  return it == epochs_.end() || it->second.empty() ? pid : it->second.back().space;
}

// A mapping of code over code that came from other bytes (dlclose + dlopen
// at the same address, munmap + mmap) starts a new address space at the
// record's time: code that ran before decodes against the old bytes and
// symbols, code after against the new. A mapping that overlaps nothing, or
// maps the same file bytes again, is added to the current space.
void AddressSpaces::AddMmap(int32_t pid, uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff,
                            const std::string& filename, const std::string& build_id) {
  if (IsKernelAddress(addr)) return;  // kernel text comes from the kcore copy
  MappedFile file = Resolve(pid, filename, build_id);
  uint64_t file_off = filename == "[vdso]" ? 0 : pgoff;
  int32_t space = CurrentSpace(pid);
  if (!file.path.empty() && len > 0) {
    std::string path = file.path.string();
    uint64_t delta = file_off - addr;  // modular: file offset of address 0
    bool replaces = false;
    for (const CodeMap& c : code_maps_[space]) {
      if (c.start < addr + len && addr < c.end && (c.file != path || c.delta != delta)) {
        replaces = true;
        break;
      }
    }
    if (replaces) space = NewSpace(pid, time, /*copy=*/true);
    std::vector<CodeMap>& maps = code_maps_[space];
    std::erase_if(maps, [&](const CodeMap& c) { return c.start < addr + len && addr < c.end; });
    maps.push_back({addr, addr + len, std::move(path), delta});
  }
  symbolizer_.AddMapping(space, addr, len, file_off, file.path, filename);
  if (file.path.empty()) return;
  uint64_t size = FileSize(file.path);
  if (file_off >= size) return;
  uint64_t n = std::min(len, size - file_off);
  std::string key = file.path.string() + "@" + std::to_string(file_off) + "+" + std::to_string(n) +
                    "@" + std::to_string(addr);
  int isid;
  if (auto it = isids_.find(key); it != isids_.end()) {
    isid = it->second;
  } else {
    isid = pt_iscache_add_file(iscache_, file.path.c_str(), file_off, n, addr);
    if (isid < 0) {
      stats_.warnings.push_back(file.path.string() +
                                ": libipt could not map it: " + LibiptError(isid));
      return;
    }
    isids_.emplace(key, isid);
    if (views_ != nullptr) views_->Section(isid, addr, n, file.path.string(), file_off);
  }
  AddSection(Image(space), isid);
}

}  // namespace ptsnap::decode

namespace ptsnap::decode {

const std::string* AddressSpaces::KeepJitFile(const std::filesystem::path& rel) {
  struct stat st;
  if (::lstat((dir_ / rel).c_str(), &st) != 0 && errno == ENOENT) return nullptr;
  auto text = trace::ReadOwnedFile(dir_, rel, size_t{1} << 30);
  if (!text) {
    stats_.warnings.push_back("JIT code not decoded: " + text.error().ToString());
    return nullptr;
  }
  jit_files_.push_back(std::make_unique<std::string>(std::move(*text)));
  return jit_files_.back().get();
}

void AddressSpaces::LoadJit(const trace::Manifest& manifest) {
  for (int32_t pid : manifest.pids) {
    LoadJitdump(manifest, pid);
    const std::filesystem::path rel = trace::JitCodePath({}, pid);
    const std::string* text = KeepJitFile(rel);
    if (text == nullptr) continue;
    auto file = trace::ParseJitCode(*text);
    if (!file) {
      stats_.warnings.push_back((dir_ / rel).string() + ": " + file.error().ToString() +
                                "; its JIT code is not decoded");
      continue;
    }
    if (file->torn_tail)
      stats_.warnings.push_back((dir_ / rel).string() +
                                ": its last record is incomplete (the process died writing it) "
                                "and was dropped");
    for (const trace::JitCodeLoad& l : file->loads)
      queued_code_.push_back(
          {pid, l.time, l.addr, {reinterpret_cast<const uint8_t*>(l.code.data()), l.code.size()}});
  }
  std::stable_sort(queued_code_.begin() + static_cast<ptrdiff_t>(next_code_), queued_code_.end(),
                   [](const QueuedCode& a, const QueuedCode& b) { return a.time < b.time; });
}

void AddressSpaces::LoadJitdump(const trace::Manifest& manifest, int32_t pid) {
  const std::filesystem::path rel = trace::JitdumpPath({}, pid);
  const std::string* text = KeepJitFile(rel);
  if (text == nullptr) return;
  const std::string where = (dir_ / rel).string() + ": ";
  auto dump = trace::ParseJitdump(*text);
  if (!dump) {
    stats_.warnings.push_back(where + dump.error().ToString() + "; it is not used");
    return;
  }
  if (!dump->malformed.empty())
    stats_.warnings.push_back(where + dump->malformed + "; the records after it are not used");
  const bool code = manifest.source != trace::Source::kEmulated;
  const bool tsc = dump->header.arch_timestamp();
  auto time = [&](uint64_t ts) {
    return tsc && manifest.time_conv.time_mult != 0 ? trace::TscToPerfTime(manifest.time_conv, ts)
                                                    : ts;
  };
  elf::SymbolTable names;
  struct Loaded {
    const trace::JitdumpCodeLoad* load = nullptr;
    const JitLines* lines = nullptr;
  };
  std::unordered_map<uint64_t, Loaded> by_index;
  // Emulated: the source lines in file order, set in every space later.
  std::vector<UntimedLines> untimed;
  bool any_lines = false;
  for (const trace::JitdumpCodeLoad& l : dump->loads) {
    const JitLines* lines = nullptr;
    if (l.debug) {
      JitLines t = ToJitLines(dump->debug[*l.debug], l.code_addr, l.code.size());
      if (!t.offsets.empty()) lines = symbolizer_.KeepJitLines(std::move(t));
    }
    any_lines = any_lines || lines != nullptr;
    by_index[l.code_index] = {&l, lines};
    if (!l.code.empty()) names.Add(elf::Symbol{l.code_addr, l.code.size(), l.name});
    if (code) {
      queued_code_.push_back({pid,
                              time(l.timestamp),
                              l.code_addr,
                              {reinterpret_cast<const uint8_t*>(l.code.data()), l.code.size()},
                              true,
                              lines});
    } else {
      untimed.push_back({l.code_addr, l.code.size(), lines});
    }
  }
  // A move (the runtime's GC moved compiled code): the same code, name and
  // source lines at the new address from then on.
  for (const trace::JitdumpCodeMove& m : dump->moves) {
    auto it = by_index.find(m.code_index);
    if (it == by_index.end()) continue;
    const trace::JitdumpCodeLoad& l = *it->second.load;
    const JitLines* lines = m.code_size == l.code.size() ? it->second.lines : nullptr;
    names.Add(elf::Symbol{m.new_code_addr, m.code_size, l.name});
    if (code && m.code_size == l.code.size()) {
      queued_code_.push_back({pid,
                              time(m.timestamp),
                              m.new_code_addr,
                              {reinterpret_cast<const uint8_t*>(l.code.data()), l.code.size()},
                              true,
                              lines});
    } else if (!code) {
      untimed.push_back({m.new_code_addr, m.code_size, lines});
    }
  }
  if (any_lines) {
    std::vector<UntimedLines>& all = jit_lines_[pid];
    all.insert(all.end(), untimed.begin(), untimed.end());
  }
  names.Finish();
  jit_names_[pid].push_back(std::move(names));
}

void AddressSpaces::ApplyQueuedCode(uint64_t before) {
  while (next_code_ < queued_code_.size() && queued_code_[next_code_].time <= before) {
    const QueuedCode& q = queued_code_[next_code_++];
    AddCode(q.pid, q.time, q.addr, q.code);
    // In the space the code went into (a rewrite starts a new one): the
    // earlier spaces keep the lines of the code they held.
    if (q.jitdump && !IsKernelAddress(q.addr))
      symbolizer_.SetJitLines(CurrentSpace(q.pid), q.addr, q.code.size(), q.lines);
  }
}

void AddressSpaces::FinishSideband(const std::vector<int32_t>& pids) {
  ApplyQueuedCode(UINT64_MAX);
  // JIT maps written by runtimes (perf's /tmp/perf-PID.map convention), as
  // the recording host had them when recording ended: the trace's copies,
  // for each space the process had (names are not versioned in time).
  for (int32_t pid : pids) {
    std::vector<int32_t> spaces;
    if (auto it = epochs_.find(pid); it != epochs_.end()) {
      for (const Epoch& e : it->second) spaces.push_back(e.space);
    } else {
      spaces.push_back(pid);
    }
    const auto map = trace::PerfMapPath(std::filesystem::path(), pid);
    if (auto text = trace::ReadOwnedFile(dir_, map))
      symbolizer_.AddPerfMap(spaces, ParsePerfMap(*text));
    // The jitdump's names (LoadJitdump).
    if (auto it = jit_names_.find(pid); it != jit_names_.end())
      for (elf::SymbolTable& t : it->second) symbolizer_.AddPerfMap(spaces, std::move(t));
    // The jitdump's source lines, emulated traces (LoadJitdump).
    if (auto it = jit_lines_.find(pid); it != jit_lines_.end()) {
      for (int32_t space : spaces)
        for (const UntimedLines& l : it->second)
          symbolizer_.SetJitLines(space, l.addr, l.len, l.lines);
    }
  }
}

void AddressSpaces::AddCode(int32_t pid, uint64_t time, uint64_t addr,
                            std::span<const uint8_t> code) {
  if (code.empty() || IsKernelAddress(addr)) return;
  int32_t space = CurrentSpace(pid);
  const uint64_t end = addr + code.size();
  auto held = jit_.find(space);
  if (held != jit_.end() && held->second->Conflicts(addr, code)) {
    stats_.jit_rewrites++;
    const int32_t old = space;
    space = NewSpace(pid, time, /*copy=*/true);
    // Past kMaxSpaces the newest bytes overwrite the last space's.
    if (space == old) stats_.jit_late_rewrites++;
  }
  JitMemory& mem = Jit(space);
  // The Symbolizer names these pages "[jit]": perf map names, else
  // "[jit @ 0xADDR]".
  for (uint64_t page = addr & ~uint64_t{0xfff}; page < end; page += 0x1000) {
    if (!mem.HoldsPage(page)) symbolizer_.AddMapping(space, page, 0x1000, 0, {}, "[jit]");
  }
  mem.Write(addr, code);
  stats_.jit_loads++;
  stats_.jit_bytes += code.size();
}

}  // namespace ptsnap::decode
