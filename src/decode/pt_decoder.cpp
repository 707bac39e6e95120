#include "decode/pt_decoder.h"

#include <Zydis/Zydis.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <queue>

#include "base/check.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/string_util.h"

namespace ptsnap::decode {

std::string_view ToString(BranchKind k) {
  switch (k) {
    case BranchKind::kCall: return "call";
    case BranchKind::kReturn: return "return";
    case BranchKind::kJump: return "jump";
    case BranchKind::kFarCall: return "far-call";
    case BranchKind::kFarReturn: return "far-return";
    case BranchKind::kInterrupt: return "interrupt";
    case BranchKind::kEnable: return "enable";
    case BranchKind::kDisable: return "disable";
    case BranchKind::kOverflow: return "overflow";
    case BranchKind::kError: return "error";
    case BranchKind::kStop: return "stop";
  }
  return "?";
}

struct pt_config MakePtConfig(const trace::Manifest& m) {
  struct pt_config cfg;
  pt_config_init(&cfg);
  cfg.cpu.vendor = m.cpu.vendor == "GenuineIntel" ? pcv_intel : pcv_unknown;
  cfg.cpu.family = static_cast<uint16_t>(m.cpu.family);
  cfg.cpu.model = static_cast<uint8_t>(m.cpu.model);
  cfg.cpu.stepping = static_cast<uint8_t>(m.cpu.stepping);
  if (cfg.cpu.vendor == pcv_intel) {
    // -pte_bad_cpu for models libipt does not know: decode without errata
    // workarounds rather than refuse. Any other error is a bad argument.
    const int r = pt_cpu_errata(&cfg.errata, &cfg.cpu);
    PTSNAP_CHECK(r >= 0 || r == -pte_bad_cpu) << pt_errstr(pt_errcode(r));
  }
  cfg.cpuid_0x15_eax = m.cpu.cpuid_15_eax;
  cfg.cpuid_0x15_ebx = m.cpu.cpuid_15_ebx;
  cfg.mtc_freq = static_cast<uint8_t>(m.pt.mtc_freq);
  cfg.nom_freq = static_cast<uint8_t>(m.pt.nom_freq);
  cfg.flags.variant.block.end_on_call = 1;
  cfg.flags.variant.block.end_on_jump = 1;
  // A tick event wherever a timing packet changed the time at a TNT or TIP:
  // it names the branch the time belongs to, so events between two such
  // points can be placed by the instructions retired (docs/decoding.md,
  // "Timestamps").
  cfg.flags.variant.block.enable_tick_events = 1;
  if (m.pt.addr0_a != 0 || m.pt.addr0_b != 0) {
    // IA32_RTIT_CTL.ADDR0_CFG: 1 = filter (trace only inside ADDR0); libipt 2.0
    // keeps the enum private (pt_addr_cfg_filter).
    cfg.addr_filter.config.ctl.addr0_cfg = 1;
    cfg.addr_filter.addr0_a = m.pt.addr0_a;
    cfg.addr_filter.addr0_b = m.pt.addr0_b;
  }
  return cfg;
}

enum pt_insn_class ClassifyInstruction(const uint8_t* bytes, size_t size, enum pt_exec_mode mode) {
  ZydisMachineMode machine = ZYDIS_MACHINE_MODE_LONG_64;
  ZydisStackWidth width = ZYDIS_STACK_WIDTH_64;
  if (mode == ptem_32bit) {
    machine = ZYDIS_MACHINE_MODE_LEGACY_32;
    width = ZYDIS_STACK_WIDTH_32;
  } else if (mode == ptem_16bit) {
    machine = ZYDIS_MACHINE_MODE_LEGACY_16;
    width = ZYDIS_STACK_WIDTH_16;
  }
  ZydisDecoder decoder;
  ZydisDecodedInstruction insn;
  if (ZYAN_FAILED(ZydisDecoderInit(&decoder, machine, width)) ||
      ZYAN_FAILED(ZydisDecoderDecodeInstruction(&decoder, nullptr, bytes, size, &insn))) {
    return ptic_error;
  }
  bool far = insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_SYSCALL:
    case ZYDIS_MNEMONIC_SYSENTER:
    case ZYDIS_MNEMONIC_INT:
    case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INT3:
    case ZYDIS_MNEMONIC_INTO: return ptic_far_call;
    case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT:
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ: return ptic_far_return;
    case ZYDIS_MNEMONIC_CALL: return far ? ptic_far_call : ptic_call;
    case ZYDIS_MNEMONIC_RET: return far ? ptic_far_return : ptic_return;
    case ZYDIS_MNEMONIC_JMP: return far ? ptic_far_jump : ptic_jump;
    default: break;
  }
  return insn.meta.category == ZYDIS_CATEGORY_COND_BR ? ptic_cond_jump : ptic_other;
}

enum pt_insn_class PtDecoder::ClassifyBlockEnd(const struct pt_block& block) const {
  uint8_t buf[16];
  size_t n = 0;
  if (block.truncated) {
    // The instruction spans two sections; libipt kept its bytes.
    n = std::min<size_t>(block.size, sizeof block.raw);
    std::memcpy(buf, block.raw, n);
  } else {
    int r = pt_iscache_read(iscache_, buf, sizeof buf, block.isid, block.end_ip);
    if (r <= 0) return ptic_error;
    n = static_cast<size_t>(r);
  }
  return ClassifyInstruction(buf, n, block.mode);
}

PtDecoder::PtDecoder(const std::filesystem::path& dir, const trace::Manifest& m)
    : dir_(dir), manifest_(m) {
  iscache_ = pt_iscache_alloc("ptsnap");
  kernel_image_ = pt_image_alloc("kernel");
  PTSNAP_CHECK(iscache_ != nullptr && kernel_image_ != nullptr) << "libipt: out of memory";
}

PtDecoder::~PtDecoder() {
  for (auto& [pid, images] : poked_images_) {
    for (struct pt_image* image : images) pt_image_free(image);
  }
  for (auto& [pid, image] : images_) pt_image_free(image);
  pt_image_free(kernel_image_);
  pt_iscache_free(iscache_);
}

uint64_t PtDecoder::MtcPeriodNs() const {
  const trace::CpuId& c = manifest_.cpu;
  if (!manifest_.pt.mtc || c.cpuid_15_eax == 0 || c.cpuid_15_ebx == 0) return 0;
  const uint64_t tsc =
      (uint64_t{c.cpuid_15_ebx} << std::min<uint32_t>(manifest_.pt.mtc_freq, 15)) / c.cpuid_15_eax;
  return TscToNs(tsc) - TscToNs(0);
}

uint64_t PtDecoder::TscToNs(uint64_t tsc) const {
  if (manifest_.time_conv.time_mult == 0) return tsc;  // no conversion recorded: raw TSC
  return trace::TscToPerfTime(manifest_.time_conv, tsc);
}

namespace {

std::string HexOf(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : raw) {
    s.push_back(kDigits[c >> 4]);
    s.push_back(kDigits[c & 15]);
  }
  return s;
}

bool IsRegular(const std::filesystem::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uint64_t FileSize(const std::filesystem::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Build-ids in MMAP2 records are padded to 20 bytes; compare the common prefix
// of the hex strings, as long as both are non-empty.
bool BuildIdsMatch(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return true;
  size_t n = std::min(a.size(), b.size());
  return a.compare(0, n, b, 0, n) == 0;
}

}  // namespace

MappedFile PtDecoder::Resolve(int32_t pid, const std::string& filename,
                              const std::string& build_id) {
  if (filename == "[vdso]") {
    auto p = dir_ / "vdso" / (std::to_string(pid) + ".so");
    if (IsRegular(p)) return {p, ""};
    return {{}, "no vdso dump"};
  }
  if (filename.empty() || filename[0] == '[' || filename.starts_with("//anon") ||
      filename.starts_with("/memfd:") || filename.ends_with(" (deleted)")) {
    return {{}, "anonymous"};
  }
  std::string expected = build_id;
  std::filesystem::path path;
  for (const auto& b : manifest_.binaries) {
    if (b.path != filename) continue;
    if (expected.empty()) expected = b.build_id;
    if (!b.copy.empty() && IsRegular(dir_ / b.copy)) path = dir_ / b.copy;
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

struct pt_image* PtDecoder::Image(int32_t space) {
  auto it = images_.find(space);
  if (it != images_.end()) return it->second;
  struct pt_image* image = pt_image_alloc(std::to_string(space).c_str());
  PTSNAP_CHECK(image != nullptr) << "libipt: out of memory";
  // Copying or adding a cached section fails only on bad arguments (a null
  // image, an isid not in the cache): a bug, never a property of the trace.
  PTSNAP_CHECK_OK(pt_image_copy(image, kernel_image_));
  images_.emplace(space, image);
  return image;
}

int32_t PtDecoder::CurrentSpace(int32_t pid) {
  std::vector<Epoch>& v = epochs_[pid];
  if (v.empty()) v.push_back({0, pid});
  return v.back().space;
}

namespace {
// Address spaces per process at most; later replacements go into the last
// one (decoded as before this change: as of the end of the recording).
constexpr size_t kMaxSpaces = 256;
}  // namespace

int32_t PtDecoder::NewSpace(int32_t pid, uint64_t time, bool copy) {
  int32_t old = CurrentSpace(pid);
  std::vector<Epoch>& v = epochs_[pid];
  if (v.size() >= kMaxSpaces) return old;
  int32_t id = next_space_++;
  struct pt_image* image = Image(id);
  if (copy) {
    PTSNAP_CHECK_OK(pt_image_copy(image, Image(old)));
    code_maps_[id] = code_maps_[old];
    symbolizer_.ForkProcess(old, id);
  } else {
    exec_spaces_.insert(id);
  }
  v.push_back({std::max(time, v.back().start), id});
  return id;
}

int32_t PtDecoder::SpaceAt(int32_t pid, uint64_t time) const {
  auto it = epochs_.find(pid);
  if (it == epochs_.end() || it->second.empty()) return pid;
  const std::vector<Epoch>& v = it->second;
  auto e = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Epoch& x) { return t < x.start; });
  return e == v.begin() ? v.front().space : std::prev(e)->space;
}

uint64_t PtDecoder::NextSpaceChange(int32_t pid, uint64_t time) const {
  auto it = epochs_.find(pid);
  if (it == epochs_.end()) return UINT64_MAX;
  const std::vector<Epoch>& v = it->second;
  auto e = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Epoch& x) { return t < x.start; });
  return e == v.end() ? UINT64_MAX : e->start;
}

int32_t PtDecoder::LastSpace(int32_t pid) const {
  auto it = epochs_.find(pid);
  return it == epochs_.end() || it->second.empty() ? pid : it->second.back().space;
}

// A mapping of code over code that came from other bytes (dlclose + dlopen
// at the same address, munmap + mmap) starts a new address space at the
// record's time: code that ran before decodes against the old bytes and
// symbols, code after against the new. A mapping that overlaps nothing, or
// maps the same file bytes again, is added to the current space.
void PtDecoder::AddMmap(int32_t pid, uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff,
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
                                ": libipt could not map it: " + pt_errstr(pt_errcode(isid)));
      return;
    }
    isids_.emplace(key, isid);
  }
  PTSNAP_CHECK_OK(pt_image_add_cached(Image(space), iscache_, isid, nullptr));
}

// PERF_RECORD_SWITCH_CPU_WIDE (linux/perf_event.h): written on the CPU at
// each context switch, twice: on switch-out (misc SWITCH_OUT) with the
// outgoing task in sample_id and the incoming one in next_prev_pid/tid,
// and on switch-in with the incoming task in sample_id and the previous one
// in next_prev. Either says who runs from its time on. ITRACE_START names
// the task running when tracing started on the CPU. Task 0 is the idle task.
void PtDecoder::AddSwitch(const trace::Record& rec) {
  int32_t cpu = static_cast<int32_t>(rec.sample_id.cpu);
  auto thread = [cpu](uint32_t pid, uint32_t tid) {
    if (tid == 0 || tid == UINT32_MAX) return ThreadId{0, -1 - cpu};
    return ThreadId{static_cast<int32_t>(pid), static_cast<int32_t>(tid)};
  };
  ThreadId next, prev;
  bool have_prev = false;
  if (const auto* sw = std::get_if<trace::Switch>(&rec.body)) {
    if (!sw->cpu_wide) return;  // per-thread PERF_RECORD_SWITCH: nothing about the CPU
    ThreadId self = thread(rec.sample_id.pid, rec.sample_id.tid);
    ThreadId other = thread(sw->next_prev_pid, sw->next_prev_tid);
    next = sw->out ? other : self;
    prev = sw->out ? self : other;
    have_prev = true;
  } else if (const auto* it = std::get_if<trace::ItraceStart>(&rec.body)) {
    next = thread(it->pid, it->tid);
  } else {
    return;
  }
  std::vector<Run>& runs = schedule_[cpu];
  if (runs.empty() && have_prev) runs.push_back({0, prev});
  uint64_t time = rec.sample_id.time;
  if (!runs.empty() && runs.back().thread == next) return;
  if (!runs.empty() && time < runs.back().time) time = runs.back().time;
  runs.push_back({time, next});
}

PtDecoder::ThreadId PtDecoder::ThreadAt(int32_t cpu, uint64_t time) const {
  auto it = schedule_.find(cpu);
  if (it == schedule_.end() || it->second.empty()) return {0, -1 - cpu};
  const std::vector<Run>& v = it->second;
  auto r = std::upper_bound(v.begin(), v.end(), time,
                            [](uint64_t t, const Run& x) { return t < x.time; });
  return r == v.begin() ? ThreadId{0, -1 - cpu} : std::prev(r)->thread;
}

std::vector<PtDecoder::ThreadId> PtDecoder::CpuThreads(int32_t cpu) const {
  std::vector<ThreadId> out{{0, -1 - cpu}};
  if (auto it = schedule_.find(cpu); it != schedule_.end()) {
    for (const Run& r : it->second) {
      if (std::find(out.begin(), out.end(), r.thread) == out.end()) out.push_back(r.thread);
    }
  }
  return out;
}

void PtDecoder::AddKcore() {
  if (manifest_.kcore.status != trace::KcoreStatus::kCopied) return;
  auto kdir = dir_ / (manifest_.kcore.dir.empty() ? "kcore" : manifest_.kcore.dir);
  if (auto text = base::ReadFile(kdir / "kallsyms", size_t{256} << 20); text) {
    symbolizer_.SetKernelSymbols(KernelSymbols(sys::ParseKallsyms(*text)),
                                 manifest_.kernel_start.value_or(0));
  } else {
    stats_.warnings.push_back("kernel symbols: " + text.error().ToString());
  }
  auto kcore = kdir / "kcore";
  auto image = elf::SymbolFile::Open(kcore);
  if (!image) {
    stats_.warnings.push_back("kernel code is not decoded: " + image.error().ToString());
    return;
  }
  for (const auto& seg : image->segments()) {
    if (seg.filesz == 0 || !IsKernelAddress(seg.vaddr)) continue;
    int isid = pt_iscache_add_file(iscache_, kcore.c_str(), seg.offset, seg.filesz, seg.vaddr);
    if (isid < 0) continue;
    PTSNAP_CHECK_OK(pt_image_add_cached(kernel_image_, iscache_, isid, nullptr));
    kcore_segments_.push_back({seg.vaddr, seg.filesz, isid});
  }
}

// PERF_RECORD_TEXT_POKE (linux/perf_event.h): the kernel changed `old_bytes`
// at `addr` to `new_bytes` (static keys, ftrace, kprobes, BPF) at the
// record's time. The patched pages go into a new section that overlays the
// kcore section in later image versions (libipt splits the section it
// overlaps), so code that ran before the poke still decodes against the old
// bytes and code after it against the new ones.
void PtDecoder::AddTextPoke(uint64_t time, const trace::TextPoke& poke) {
  constexpr uint64_t kPage = 4096;
  if (poke.new_bytes.empty()) return;
  uint64_t end = poke.addr + poke.new_bytes.size();
  const KcoreSegment* seg = nullptr;
  for (const auto& s : kcore_segments_) {
    if (poke.addr >= s.vaddr && end <= s.vaddr + s.size) seg = &s;
  }
  if (seg == nullptr) {
    // No kernel text (kcore not copied) or a poke outside it (BPF JIT):
    // nothing to patch; that code is not decoded either way.
    return;
  }
  uint64_t lo = std::max(poke.addr & ~(kPage - 1), seg->vaddr);
  uint64_t hi = std::min((end + kPage - 1) & ~(kPage - 1), seg->vaddr + seg->size);
  std::string bytes;
  for (uint64_t page = lo & ~(kPage - 1); page < hi; page += kPage) {
    uint64_t from = std::max(page, lo), to = std::min(page + kPage, hi);
    auto it = poked_pages_.find(page);
    if (it == poked_pages_.end()) {
      std::string b(to - from, '\0');
      int r = pt_iscache_read(iscache_, reinterpret_cast<uint8_t*>(b.data()), b.size(), seg->isid,
                              from);
      if (r < 0 || static_cast<size_t>(r) != b.size()) {
        stats_.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
                                  ": kernel text unreadable; the poke is not applied");
        return;
      }
      it = poked_pages_.emplace(page, std::move(b)).first;
    }
    bytes += it->second;
  }
  std::memcpy(bytes.data() + (poke.addr - lo), poke.new_bytes.data(), poke.new_bytes.size());
  for (uint64_t page = lo & ~(kPage - 1); page < hi; page += kPage) {
    uint64_t from = std::max(page, lo);
    std::string& b = poked_pages_[page];
    b.assign(bytes, from - lo, b.size());
  }
  base::UniqueFd fd(::memfd_create("ptsnap-text-poke", MFD_CLOEXEC));
  if (!fd.valid() ||
      ::write(fd.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    stats_.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
                              ": no memory for the patched copy; the poke is not applied");
    return;
  }
  std::string name = "/proc/self/fd/" + std::to_string(fd.get());
  int isid = pt_iscache_add_file(iscache_, name.c_str(), 0, bytes.size(), lo);
  if (isid < 0) {
    stats_.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
                              ": libipt: " + pt_errstr(pt_errcode(isid)));
    return;
  }
  poke_fds_.push_back(std::move(fd));
  pokes_.push_back({time, isid});
}

struct pt_image* PtDecoder::PokedImage(int32_t space, size_t k) {
  if (k == 0) return Image(space);
  std::vector<struct pt_image*>& v = poked_images_[space];
  while (v.size() < k) {
    struct pt_image* prev = v.empty() ? Image(space) : v.back();
    struct pt_image* image = pt_image_alloc(nullptr);
    PTSNAP_CHECK(image != nullptr) << "libipt: out of memory";
    PTSNAP_CHECK_OK(pt_image_copy(image, prev));
    PTSNAP_CHECK_OK(pt_image_add_cached(image, iscache_, pokes_[v.size()].isid, nullptr));
    v.push_back(image);
  }
  return v[k - 1];
}

Result<std::unique_ptr<PtDecoder>> PtDecoder::Create(const std::filesystem::path& dir,
                                                     const trace::Manifest& manifest,
                                                     const std::vector<trace::Record>& records) {
  std::unique_ptr<PtDecoder> d(new PtDecoder(dir, manifest));
  if (d->iscache_ == nullptr || d->kernel_image_ == nullptr) {
    return Error("libipt: out of memory allocating the image section cache");
  }
  d->AddKcore();
  // Sideband in time order: fork copies the parent's address space, exec
  // starts a new one, mmaps add sections (or start a new space when they
  // replace mapped code). Streams switch spaces at their times.
  for (const auto& rec : records) {
    uint64_t time = rec.sample_id.time;
    if (const auto* m = std::get_if<trace::Mmap2>(&rec.body)) {
      std::string bid = (rec.misc & trace::kMiscMmapBuildId) ? HexOf(m->build_id) : "";
      if ((m->prot & 4 /*PROT_EXEC*/) == 0 && m->prot != 0) continue;
      d->AddMmap(static_cast<int32_t>(m->pid), time, m->addr, m->len, m->pgoff, m->filename, bid);
    } else if (const auto* m1 = std::get_if<trace::Mmap>(&rec.body)) {
      d->AddMmap(static_cast<int32_t>(m1->pid), time, m1->addr, m1->len, m1->pgoff, m1->filename,
                 "");
    } else if (const auto* tp = std::get_if<trace::TextPoke>(&rec.body)) {
      d->AddTextPoke(time, *tp);
    } else if (const auto* c = std::get_if<trace::Comm>(&rec.body)) {
      if (c->exec && c->pid == c->tid) {
        // exec: the old mappings are gone. A space with no code yet (the
        // process was first seen here) is reused.
        int32_t pid = static_cast<int32_t>(c->pid);
        int32_t space = d->CurrentSpace(pid);
        if (d->code_maps_[space].empty()) {
          d->symbolizer_.ResetProcess(space);
        } else {
          d->NewSpace(pid, time, /*copy=*/false);
        }
      }
    } else if (const auto* t = std::get_if<trace::Task>(&rec.body)) {
      if (!t->exit && t->pid != t->ppid) {
        int32_t child = static_cast<int32_t>(t->pid), parent = static_cast<int32_t>(t->ppid);
        int32_t from = d->CurrentSpace(parent);
        int32_t space =
            d->epochs_.count(child) != 0 ? d->NewSpace(child, time, false) : d->CurrentSpace(child);
        if (space != from) {
          PTSNAP_CHECK_OK(pt_image_copy(d->Image(space), d->Image(from)));
          d->code_maps_[space] = d->code_maps_[from];
          d->symbolizer_.ForkProcess(from, space);
        }
      }
    } else if (rec.type == PERF_RECORD_SWITCH_CPU_WIDE || rec.type == PERF_RECORD_ITRACE_START) {
      d->AddSwitch(rec);
    }
  }
  // JIT maps written by runtimes (perf's /tmp/perf-PID.map convention).
  for (int32_t pid : manifest.pids) {
    auto p = std::filesystem::path("/tmp") / ("perf-" + std::to_string(pid) + ".map");
    if (auto text = base::ReadFile(p); text) {
      d->symbolizer_.AddPerfMap(d->LastSpace(pid), ParsePerfMap(*text));
    }
  }
  return d;
}

namespace {

__extension__ typedef unsigned __int128 Uint128;

// One stream's decode state, as a resumable state machine: Step() does one
// unit of work (a sync, one event or one block). Events go to the sink
// directly or, for per-CPU streams merged by time, to a small queue.
class StreamDecoder {
 public:
  // `cpu` >= 0: a per-CPU stream, its thread from the switch sideband;
  // else `thread` for the whole stream.
  StreamDecoder(PtDecoder* owner, struct pt_block_decoder* dec, PtDecoder::ThreadId thread,
                int32_t cpu, const PtDecoder::Sink* sink)
      : owner_(owner),
        dec_(dec),
        cpu_(cpu),
        thread_(thread),
        sink_(sink),
        stats_(owner->mutable_stats()),
        cycle_accurate_(owner->cycle_accurate()),
        mtc_period_ns_(owner->MtcPeriodNs()) {}
  ~StreamDecoder() { pt_blk_free_decoder(dec_); }
  StreamDecoder(const StreamDecoder&) = delete;
  StreamDecoder& operator=(const StreamDecoder&) = delete;

  void Run() {
    while (Step()) {
    }
  }
  // Queue mode: decodes until an event is queued; false at the end.
  bool Fill() {
    while (queue_.empty() && Step()) {
    }
    return !queue_.empty();
  }
  std::deque<BranchEvent>& queue() { return queue_; }

 private:
  enum class State : uint8_t { kSync, kSegment, kDone };
  // An event waiting for its time (ResolvePending).
  struct Pending {
    BranchEvent e;
    uint64_t pos = 0;    // instructions retired before the event
    uint64_t lower = 0;  // gap events: libipt's time there
    bool gap = false;
    bool tx = false;  // speculative (TSX): dropped if the transaction aborts
  };

  bool Step() {
    if (state_ == State::kSegment) {
      if (status_ & pts_event_pending) {
        struct pt_event ev;
        status_ = pt_blk_event(dec_, &ev, sizeof ev);
        if (status_ < 0) return EndSegment(status_);
        HandleEvent(ev);
        return true;
      }
      if (status_ & pts_eos) return Done();
      if (next_change_ != UINT64_MAX) {
        uint64_t now = Now();
        if (now >= next_change_) Retarget(now, /*thread=*/false);
      }
      struct pt_block block;
      status_ = pt_blk_next(dec_, &block, sizeof block);
      // Errors apply after the last instruction of the returned block.
      if (block.ninsn > 0) HandleBlock(block);
      if (status_ < 0) return EndSegment(status_);
      return true;
    }
    if (state_ == State::kDone) return false;
    int status = pt_blk_sync_forward(dec_);
    if (status < 0) {
      if (status == -pte_eos) return Done();
      uint64_t off = 0;
      if (pt_blk_get_offset(dec_, &off) < 0) off = 0;  // not synchronized: no position
      if (off == last_sync_) return Done();            // no progress: give up on this stream
      last_sync_ = off;
      return true;
    }
    have_prev_ = false;
    status_ = status;
    state_ = State::kSegment;
    Retarget(Now(), /*thread=*/true);
    return true;
  }
  bool EndSegment(int status) {
    if (status == -pte_eos) return Done();
    Error(status);
    uint64_t off = 0;
    if (pt_blk_get_sync_offset(dec_, &off) < 0) off = 0;  // never synchronized
    last_sync_ = off;
    state_ = State::kSync;
    return true;
  }
  bool Done() {
    DropTransaction();  // its outcome is not in the trace
    ResolvePending(0, /*have_next=*/false);
    state_ = State::kDone;
    return false;
  }

  // Chooses the thread (per-CPU streams, when `thread`), its process's
  // address space and the text-poke version for time `now`, and switches
  // libipt's image when they changed. Spaces and pokes change at their
  // times (checked between blocks, at libipt's latest timing packet, which
  // may be a little ahead of the block); threads change only where tracing
  // (re)starts, so a stretch between two such points stays on one thread.
  void Retarget(uint64_t now, bool thread) {
    if (thread && cpu_ >= 0) {
      PtDecoder::ThreadId t = owner_->ThreadAt(cpu_, now);
      if (!(t == thread_)) {
        if (have_thread_) stats_.thread_switches++;
        thread_ = t;
      }
      have_thread_ = true;
    }
    // A stream without timing packets (time 0) has no place in time: it
    // decodes against the address space at the end of the recording.
    uint64_t at = now != 0 ? now : UINT64_MAX;
    int32_t space = owner_->SpaceAt(thread_.pid, at);
    size_t k = applied_pokes_;
    while (k < owner_->PokeCount() && owner_->PokeTime(k) <= now) ++k;
    next_change_ = owner_->NextSpaceChange(thread_.pid, at);
    if (k < owner_->PokeCount()) next_change_ = std::min(next_change_, owner_->PokeTime(k));
    if (space == space_ && k == applied_pokes_ && have_image_) return;
    space_ = space;
    applied_pokes_ = k;
    have_image_ = true;
    PTSNAP_CHECK_OK(pt_blk_set_image(dec_, owner_->PokedImage(space, k)));
  }

  uint64_t Now() {
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    int r = pt_blk_time(dec_, &tsc, &lost_mtc, &lost_cyc);
    if (r >= 0 && tsc != 0) Advance(owner_->TscToNs(tsc));
    return last_time_;
  }
  void Advance(uint64_t ns) {
    if (ns > last_time_) last_time_ = ns;  // monotone per stream
  }
  // Events wait in pending_ until the next time anchor places them
  // (docs/decoding.md, "Timestamps"). `gap`: tracing stops at the event (a
  // disable, an error, an overflow) and the next anchor may lie after time
  // the trace does not cover; `lower` is then the time libipt knew there.
  void Emit(BranchEvent e, bool gap = false, uint64_t lower = 0) {
    e.insns = insns_;
    insns_ = 0;
    e.pid = thread_.pid;
    e.tid = thread_.tid;
    e.space = space_;
    pending_.push_back(Pending{std::move(e), pos_, lower, gap, in_tx_});
    if (gap) gap_since_anchor_ = true;  // the time to the next anchor is no rate
    if (pending_.size() >= kMaxPending) ResolvePending(0, /*have_next=*/false);
  }
  // A time anchor: `time` is the time after the first `pos` instructions of
  // the stream. Places the pending events between the previous anchor and
  // this one by the instructions retired before each.
  void Anchor(uint64_t pos, uint64_t time) {
    if (have_anchor_ && time < anchor_time_) time = anchor_time_;
    if (have_anchor_ && !gap_since_anchor_ && pos > anchor_pos_)
      owner_->AddRate(time - anchor_time_, pos - anchor_pos_);
    ResolvePending(time, /*have_next=*/true, pos);
    have_anchor_ = true;
    anchor_pos_ = pos;
    anchor_time_ = time;
    gap_since_anchor_ = false;
  }
  // Assigns times to every pending event and delivers them. With
  // `have_next`, the next anchor (next_pos, next_time) bounds them; without
  // (end of stream), times are extrapolated at the decoder's rate.
  void ResolvePending(uint64_t next_time, bool have_next, uint64_t next_pos = 0) {
    if (pending_.empty()) return;
    uint64_t p0 = anchor_pos_, t0 = anchor_time_;
    if (!have_anchor_) {
      // Nothing before the first anchor says when these ran.
      p0 = pending_.front().pos;
      const uint64_t lower = pending_.front().lower;
      t0 = !have_next ? lower : lower != 0 ? std::min(lower, next_time) : next_time;
    }
    uint64_t last_pos = 0, last_time = 0;
    size_t i = 0;
    while (i < pending_.size()) {
      // Up to and including the next event where tracing stopped.
      size_t g = i;
      while (g < pending_.size() && !pending_[g].gap) ++g;
      uint64_t p1 = next_pos, t1 = next_time;
      bool bounded = have_next;
      if (g < pending_.size()) {
        // Tracing stopped at pending_[g]: the time up to the next anchor
        // may be time away from the trace, so its time is the lower bound
        // libipt had, or where the instructions since the last anchor lead
        // at the measured rate, whichever is later, but never after the
        // next anchor.
        p1 = pending_[g].pos;
        t1 = std::max(Extrapolate(p0, t0, p1), pending_[g].lower);
        if (have_next) t1 = std::min(t1, next_time);
        t1 = std::max(t1, t0);
        bounded = true;
      }
      const size_t end = g < pending_.size() ? g + 1 : pending_.size();
      for (; i < end; ++i) {
        Pending& pe = pending_[i];
        uint64_t t;
        if (!bounded) {
          t = Extrapolate(p0, t0, pe.pos);
        } else if (p1 <= p0 || pe.pos <= p0) {
          t = t0;
        } else {
          t = t0 + static_cast<uint64_t>(static_cast<Uint128>(t1 - t0) * (pe.pos - p0) / (p1 - p0));
        }
        pe.e.time = t;
        Place(pe);
        if (!bounded) {
          // Extrapolated: what follows continues from here.
          last_pos = pe.pos;
          last_time = t;
        }
      }
      if (g < pending_.size()) {
        p0 = p1;
        t0 = t1;
      }
    }
    if (last_pos > p0) {
      p0 = last_pos;
      t0 = std::max(t0, last_time);
    }
    pending_.clear();
    // Where the placed events leave off: the next events continue from here.
    if (have_anchor_ || have_next) {
      anchor_pos_ = p0;
      anchor_time_ = t0;
      have_anchor_ = true;
    }
  }
  uint64_t Extrapolate(uint64_t p0, uint64_t t0, uint64_t p) const {
    const double rate = owner_->Rate();
    if (!(rate > 0) || p <= p0) return t0;  // NaN too
    // A corrupt trace can measure any rate: saturate, never overflow.
    const double dt = static_cast<double>(p - p0) * rate;
    if (!(dt < 1.8e19)) return UINT64_MAX;
    const auto d = static_cast<uint64_t>(dt);
    return d > UINT64_MAX - t0 ? UINT64_MAX : t0 + d;
  }
  void Place(const Pending& pe) {
    if (pe.tx) {
      // TSX: held until the transaction commits, dropped if it aborts
      // (magic-trace's rule).
      tx_.push_back(pe.e);
      return;
    }
    Deliver(pe.e);
  }
  void Deliver(const BranchEvent& e) {
    stats_.events++;
    if (sink_ != nullptr) {
      (*sink_)(e);
    } else {
      queue_.push_back(e);
    }
  }
  void CommitTransaction() {
    in_tx_ = false;
    for (const BranchEvent& e : tx_) Deliver(e);
    tx_.clear();
    for (Pending& pe : pending_) pe.tx = false;
  }
  void DropTransaction() {
    in_tx_ = false;
    tx_.clear();
    std::erase_if(pending_, [](const Pending& pe) { return pe.tx; });
  }
  // An event's own time when libipt has one: by the time an event is
  // returned, pt_blk_time() may already have read ahead to a later timing
  // packet (e.g. the TSC before the TIP.PGE that ends a [syscall] span).
  uint64_t EventTime(const struct pt_event& ev) {
    if (!ev.has_tsc) return Now();
    Advance(owner_->TscToNs(ev.tsc));
    return last_time_;
  }
  void Emit(BranchKind kind, uint64_t from, uint64_t to, bool syscall = false) {
    BranchEvent e;
    e.kind = kind;
    e.from = from;
    e.to = to;
    e.syscall = syscall;
    Emit(std::move(e));
  }
  // An event where tracing stops, at libipt's time `time` for it. When no
  // timing packet came since the last anchor, that time is stale, and the
  // event is placed when the next anchor is known (ResolvePending).
  void EmitStop(BranchKind kind, uint64_t from, bool syscall, uint64_t time, bool known) {
    // A time later than the last anchor came from a timing packet since: a
    // CYC just before the event's packet, or a TSC (exact), or an MTC (the
    // event lies within one MTC period after it, as for a tick).
    if (known && (!have_anchor_ || time > anchor_time_)) Anchor(pos_, TickTime(time));
    BranchEvent e;
    e.kind = kind;
    e.from = from;
    e.syscall = syscall;
    Emit(std::move(e), /*gap=*/true, time);
  }
  // The time of the branch a tick names. With CYC it is the branch's own.
  // Without, the tick's time is an MTC's that came before the branch's
  // packet, and the next MTC came after it: the branch retired in
  // [time, time + MTC period). Where the instructions since the last
  // anchor lead at the measured rate, within that window.
  uint64_t TickTime(uint64_t time) const {
    if (cycle_accurate_ || mtc_period_ns_ == 0 || !have_anchor_) return time;
    return std::clamp(Extrapolate(anchor_pos_, anchor_time_, pos_), time,
                      time + mtc_period_ns_ - 1);
  }
  // An event with its own fresh time (a TSC just before a TIP.PGE, a PSB+):
  // an anchor.
  void AnchorAt(uint64_t time) {
    if (!have_anchor_ || time > anchor_time_) Anchor(pos_, time);
  }
  void Error(int status) {
    DropTransaction();  // magic-trace: an error inside a transaction drops it
    stats_.errors++;
    if (pt_errcode(status) == pte_nomap) stats_.nomap_errors++;
    BranchEvent e;
    e.kind = BranchKind::kError;
    e.from = have_prev_ ? prev_end_ : 0;
    e.message = pt_errstr(pt_errcode(status));
    if (pt_errcode(status) == pte_nomap && have_prev_) {
      char buf[40];
      std::snprintf(buf, sizeof buf, " at 0x%llx", static_cast<unsigned long long>(prev_end_));
      e.message += buf;
    }
    have_prev_ = false;
    Emit(std::move(e), /*gap=*/true, Now());
  }

  void HandleBlock(const struct pt_block& b) {
    stats_.blocks++;
    stats_.instructions += b.ninsn;
    if (b.speculative && !in_tx_) in_tx_ = true;
    if (have_prev_) {
      BranchKind kind;
      switch (prev_iclass_) {
        case ptic_call: kind = BranchKind::kCall; break;
        case ptic_return: kind = BranchKind::kReturn; break;
        case ptic_far_call: kind = BranchKind::kFarCall; break;
        case ptic_far_return: kind = BranchKind::kFarReturn; break;
        default: kind = BranchKind::kJump; break;
      }
      Emit(kind, prev_end_, b.ip);
    }
    insns_ += b.ninsn;
    pos_ += b.ninsn;
    have_prev_ = true;
    prev_end_ = b.end_ip;
    prev_iclass_ = b.iclass;
    if (prev_iclass_ == ptic_error) prev_iclass_ = owner_->ClassifyBlockEnd(b);
  }

  void HandleEvent(const struct pt_event& ev) {
    if (ev.has_tsc) Advance(owner_->TscToNs(ev.tsc));
    switch (ev.type) {
      case ptev_enabled: {
        have_prev_ = false;
        uint64_t t = EventTime(ev);
        if (ev.has_tsc) AnchorAt(t);   // the TSC before the TIP.PGE
        Retarget(t, /*thread=*/true);  // a context switch shows as a gap in the trace
        Emit(BranchKind::kEnable, 0, ev.ip_suppressed ? 0 : ev.variant.enabled.ip, false);
        break;
      }
      case ptev_disabled:
        EmitStop(BranchKind::kDisable, have_prev_ ? prev_end_ : 0,
                 have_prev_ && prev_iclass_ == ptic_far_call, EventTime(ev), ev.has_tsc);
        have_prev_ = false;
        break;
      case ptev_async_disabled:
        EmitStop(BranchKind::kDisable, ev.variant.async_disabled.at, false, EventTime(ev),
                 ev.has_tsc);
        have_prev_ = false;
        break;
      case ptev_async_branch: {
        uint64_t t = EventTime(ev);
        if (cycle_accurate_ && ev.has_tsc) AnchorAt(t);
        Emit(BranchKind::kInterrupt, ev.variant.async_branch.from, ev.variant.async_branch.to,
             false);
        have_prev_ = false;
        break;
      }
      case ptev_overflow: {
        DropTransaction();
        stats_.overflows++;
        uint64_t t = EventTime(ev);
        // Trace was lost before the overflow, for a time nothing measures:
        // the events before it (and the marker) end where the instructions
        // since the last anchor lead; tracing resumes at the overflow's time.
        BranchEvent e;
        e.kind = BranchKind::kOverflow;
        e.to = ev.ip_suppressed ? 0 : ev.variant.overflow.ip;
        Emit(std::move(e), /*gap=*/true, 0);
        if (ev.has_tsc) AnchorAt(t);
        Retarget(t, /*thread=*/true);
        have_prev_ = false;
        break;
      }
      case ptev_tick:
        if (ev.has_tsc) AnchorAt(TickTime(owner_->TscToNs(ev.tsc)));
        break;
      case ptev_tsx:
        if (ev.variant.tsx.aborted) {
          // The speculative work never happened. The next block starts at
          // the abort handler: a jump from the aborting instruction.
          stats_.tsx_aborts++;
          DropTransaction();
          prev_end_ = ev.ip_suppressed ? prev_end_ : ev.variant.tsx.ip;
          prev_iclass_ = ptic_jump;
          have_prev_ = true;
        } else if (ev.variant.tsx.speculative) {
          in_tx_ = true;
        } else {
          CommitTransaction();
        }
        break;
      case ptev_stop:
        EmitStop(BranchKind::kStop, have_prev_ ? prev_end_ : 0, false, EventTime(ev), ev.has_tsc);
        have_prev_ = false;
        break;
      case ptev_paging:  // CR3 write: on a per-CPU stream, maybe another process
      case ptev_async_paging:
        if (cpu_ >= 0) Retarget(Now(), /*thread=*/true);
        break;
      case ptev_exec_mode:  // 16/32/64-bit: libipt applies it; nothing to show
      case ptev_vmcs:
      case ptev_async_vmcs:
      case ptev_exstop:
      case ptev_mwait:
      case ptev_pwre:
      case ptev_pwrx:
      case ptev_ptwrite:
      case ptev_cbr:
      case ptev_mnt:
        // Status events of a PSB+ carry its TSC: the time at this position.
        if (ev.has_tsc) AnchorAt(owner_->TscToNs(ev.tsc));
        break;
    }
  }

  PtDecoder* owner_;
  struct pt_block_decoder* dec_;
  int32_t cpu_;
  PtDecoder::ThreadId thread_;
  bool have_thread_ = false;
  int32_t space_ = 0;
  bool have_image_ = false;
  size_t applied_pokes_ = 0;
  uint64_t next_change_ = 0;  // next poke or space change; UINT64_MAX: none
  const PtDecoder::Sink* sink_;
  DecodeStats& stats_;
  State state_ = State::kSync;
  int status_ = 0;
  uint64_t last_sync_ = ~uint64_t{0};
  bool have_prev_ = false;
  uint64_t prev_end_ = 0;
  enum pt_insn_class prev_iclass_ = ptic_error;
  uint64_t last_time_ = 0;
  uint64_t insns_ = 0;
  // Time placement (ResolvePending): instructions decoded so far, the last
  // anchor, and the events waiting for the next one.
  static constexpr size_t kMaxPending = 1 << 16;  // bounded memory without timing packets
  const bool cycle_accurate_;
  const uint64_t mtc_period_ns_;  // 0: no MTC
  uint64_t pos_ = 0;
  bool have_anchor_ = false;
  bool gap_since_anchor_ = false;
  uint64_t anchor_pos_ = 0, anchor_time_ = 0;
  std::vector<Pending> pending_;
  bool in_tx_ = false;
  std::vector<BranchEvent> tx_;
  std::deque<BranchEvent> queue_;
};

}  // namespace

Result<struct pt_block_decoder*> PtDecoder::AllocDecoder(std::string_view bytes) {
  struct pt_config cfg = MakePtConfig(manifest_);
  // libipt takes a non-const pointer but only reads the buffer.
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  struct pt_block_decoder* dec = pt_blk_alloc_decoder(&cfg);
  if (dec == nullptr) return Error("libipt refused the decoder configuration from the manifest");
  int r = pt_blk_set_image(dec, kernel_image_);
  if (r < 0) {
    pt_blk_free_decoder(dec);
    return Error(std::string("libipt: setting the image: ") + pt_errstr(pt_errcode(r)));
  }
  return dec;
}

Result<void> PtDecoder::DecodeStream(int32_t pid, int32_t tid, std::string_view bytes,
                                     const Sink& sink) {
  stats_.pt_bytes += bytes.size();
  if (bytes.empty()) return Ok();
  PTSNAP_ASSIGN_OR_RETURN(struct pt_block_decoder * dec, AllocDecoder(bytes));
  StreamDecoder(this, dec, ThreadId{pid, tid}, -1, &sink).Run();
  return Ok();
}

Result<void> PtDecoder::DecodeCpuStreams(const std::vector<CpuStream>& streams, const Sink& sink) {
  std::vector<std::unique_ptr<StreamDecoder>> decoders;
  for (const CpuStream& s : streams) {
    stats_.pt_bytes += s.bytes.size();
    if (s.bytes.empty()) continue;
    PTSNAP_ASSIGN_OR_RETURN(struct pt_block_decoder * dec, AllocDecoder(s.bytes));
    decoders.push_back(
        std::make_unique<StreamDecoder>(this, dec, ThreadId{0, -1 - s.cpu}, s.cpu, nullptr));
  }
  // Merge by time: always deliver the earliest queued event (ties: the
  // first stream), so each thread's events arrive in time order. A heap of
  // (time of the stream's next event, stream).
  using Head = std::pair<uint64_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t i = 0; i < decoders.size(); ++i) {
    if (decoders[i]->Fill()) heads.emplace(decoders[i]->queue().front().time, i);
  }
  while (!heads.empty()) {
    size_t i = heads.top().second;
    heads.pop();
    StreamDecoder& d = *decoders[i];
    sink(d.queue().front());
    d.queue().pop_front();
    if (d.Fill()) heads.emplace(d.queue().front().time, i);
  }
  return Ok();
}

}  // namespace ptsnap::decode
