#include "decode/pt_decoder.h"

#include <Zydis/Zydis.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

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
    // workarounds rather than refuse.
    (void)pt_cpu_errata(&cfg.errata, &cfg.cpu);
  }
  cfg.cpuid_0x15_eax = m.cpu.cpuid_15_eax;
  cfg.cpuid_0x15_ebx = m.cpu.cpuid_15_ebx;
  cfg.mtc_freq = static_cast<uint8_t>(m.pt.mtc_freq);
  cfg.nom_freq = static_cast<uint8_t>(m.pt.nom_freq);
  cfg.flags.variant.block.end_on_call = 1;
  cfg.flags.variant.block.end_on_jump = 1;
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
}

PtDecoder::~PtDecoder() {
  for (auto& [pid, images] : poked_images_) {
    for (struct pt_image* image : images) pt_image_free(image);
  }
  for (auto& [pid, image] : images_) pt_image_free(image);
  pt_image_free(kernel_image_);
  pt_iscache_free(iscache_);
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
  const ElfFile* elf = symbolizer_.LoadElf(path);
  if (elf != nullptr && !BuildIdsMatch(elf->build_id(), expected)) {
    stats_.build_id_mismatches++;
    stats_.warnings.push_back(path.string() + ": build-id " + elf->build_id() +
                              " differs from the recorded " + expected +
                              " (the file changed since recording); its code is not decoded");
    return {{}, "build-id mismatch"};
  }
  return {path, ""};
}

struct pt_image* PtDecoder::Image(int32_t pid) {
  auto it = images_.find(pid);
  if (it != images_.end()) return it->second;
  struct pt_image* image = pt_image_alloc(std::to_string(pid).c_str());
  (void)pt_image_copy(image, kernel_image_);
  images_.emplace(pid, image);
  return image;
}

void PtDecoder::AddMmap(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                        const std::string& filename, const std::string& build_id) {
  if (IsKernelAddress(addr)) return;  // kernel text comes from the kcore copy
  MappedFile file = Resolve(pid, filename, build_id);
  uint64_t file_off = filename == "[vdso]" ? 0 : pgoff;
  symbolizer_.AddMapping(pid, addr, len, file_off, file.path, filename);
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
  (void)pt_image_add_cached(Image(pid), iscache_, isid, nullptr);
}

void PtDecoder::AddKcore() {
  if (manifest_.kcore.status != "copied") return;
  auto kdir = dir_ / (manifest_.kcore.dir.empty() ? "kcore" : manifest_.kcore.dir);
  if (auto text = base::ReadFile(kdir / "kallsyms", size_t{256} << 20); text) {
    symbolizer_.SetKernelSymbols(ParseKallsyms(*text), manifest_.kernel_start.value_or(0));
  } else {
    stats_.warnings.push_back("kernel symbols: " + text.error().ToString());
  }
  auto kcore = kdir / "kcore";
  auto elf = ElfFile::Open(kcore);
  if (!elf) {
    stats_.warnings.push_back("kernel code is not decoded: " + elf.error().ToString());
    return;
  }
  for (const auto& seg : elf->segments()) {
    if (seg.filesz == 0 || !IsKernelAddress(seg.vaddr)) continue;
    int isid = pt_iscache_add_file(iscache_, kcore.c_str(), seg.offset, seg.filesz, seg.vaddr);
    if (isid < 0) continue;
    (void)pt_image_add_cached(kernel_image_, iscache_, isid, nullptr);
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

struct pt_image* PtDecoder::PokedImage(int32_t pid, size_t k) {
  if (k == 0) return Image(pid);
  std::vector<struct pt_image*>& v = poked_images_[pid];
  while (v.size() < k) {
    struct pt_image* prev = v.empty() ? Image(pid) : v.back();
    struct pt_image* image = pt_image_alloc(nullptr);
    if (image == nullptr) return prev;
    (void)pt_image_copy(image, prev);
    (void)pt_image_add_cached(image, iscache_, pokes_[v.size()].isid, nullptr);
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
  // Sideband in time order: fork copies the parent's image, exec starts a
  // new one, mmaps add sections. The result is each process's address space
  // as of the end of the recording (what snapshot-mode streams cover).
  for (const auto& rec : records) {
    if (const auto* m = std::get_if<trace::Mmap2>(&rec.body)) {
      std::string bid = (rec.misc & trace::kMiscMmapBuildId) ? HexOf(m->build_id) : "";
      if ((m->prot & 4 /*PROT_EXEC*/) == 0 && m->prot != 0) continue;
      d->AddMmap(static_cast<int32_t>(m->pid), m->addr, m->len, m->pgoff, m->filename, bid);
    } else if (const auto* m1 = std::get_if<trace::Mmap>(&rec.body)) {
      d->AddMmap(static_cast<int32_t>(m1->pid), m1->addr, m1->len, m1->pgoff, m1->filename, "");
    } else if (const auto* tp = std::get_if<trace::TextPoke>(&rec.body)) {
      d->AddTextPoke(rec.sample_id.time, *tp);
    } else if (const auto* c = std::get_if<trace::Comm>(&rec.body)) {
      if (c->exec && c->pid == c->tid) {
        int32_t pid = static_cast<int32_t>(c->pid);
        if (auto it = d->images_.find(pid); it != d->images_.end()) {
          pt_image_free(it->second);
          d->images_.erase(it);
        }
        d->symbolizer_.ResetProcess(pid);
      }
    } else if (const auto* t = std::get_if<trace::Task>(&rec.body)) {
      if (!t->exit && t->pid != t->ppid) {
        int32_t child = static_cast<int32_t>(t->pid), parent = static_cast<int32_t>(t->ppid);
        struct pt_image* img = d->Image(child);
        if (auto it = d->images_.find(parent); it != d->images_.end()) {
          (void)pt_image_copy(img, it->second);
        }
        d->symbolizer_.ForkProcess(parent, child);
      }
    }
  }
  // JIT maps written by runtimes (perf's /tmp/perf-PID.map convention).
  for (int32_t pid : manifest.pids) {
    auto p = std::filesystem::path("/tmp") / ("perf-" + std::to_string(pid) + ".map");
    if (auto text = base::ReadFile(p); text) d->symbolizer_.AddPerfMap(pid, ParsePerfMap(*text));
  }
  return d;
}

namespace {

// One stream's decode state.
class StreamDecoder {
 public:
  StreamDecoder(PtDecoder* owner, struct pt_block_decoder* dec, int32_t pid,
                const PtDecoder::Sink& sink)
      : owner_(owner), dec_(dec), pid_(pid), sink_(sink), stats_(owner->mutable_stats()) {}

  void Run() {
    uint64_t last_sync = ~uint64_t{0};
    for (;;) {
      int status = pt_blk_sync_forward(dec_);
      if (status < 0) {
        if (status == -pte_eos) break;
        uint64_t off = 0;
        (void)pt_blk_get_offset(dec_, &off);
        if (off == last_sync) break;  // no progress: give up on this stream
        last_sync = off;
        continue;
      }
      have_prev_ = false;
      status = DecodeSegment(status);
      if (status == -pte_eos) break;
      Error(status);
      uint64_t off = 0;
      (void)pt_blk_get_sync_offset(dec_, &off);
      last_sync = off;
    }
  }

 private:
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
  void Emit(BranchEvent& e) {
    e.insns = insns_;
    insns_ = 0;
    stats_.events++;
    sink_(e);
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
    Emit(kind, from, to, syscall, Now());
  }
  void Emit(BranchKind kind, uint64_t from, uint64_t to, bool syscall, uint64_t time) {
    BranchEvent e;
    e.kind = kind;
    e.time = time;
    e.from = from;
    e.to = to;
    e.syscall = syscall;
    Emit(e);
  }
  void Error(int status) {
    stats_.errors++;
    if (pt_errcode(status) == pte_nomap) stats_.nomap_errors++;
    BranchEvent e;
    e.kind = BranchKind::kError;
    e.time = Now();
    e.from = have_prev_ ? prev_end_ : 0;
    uint64_t off = 0;
    (void)pt_blk_get_offset(dec_, &off);
    e.message = pt_errstr(pt_errcode(status));
    if (pt_errcode(status) == pte_nomap && have_prev_) {
      char buf[40];
      std::snprintf(buf, sizeof buf, " at 0x%llx", static_cast<unsigned long long>(prev_end_));
      e.message += buf;
    }
    have_prev_ = false;
    Emit(e);
  }

  int DecodeSegment(int status) {
    for (;;) {
      while (status & pts_event_pending) {
        struct pt_event ev;
        status = pt_blk_event(dec_, &ev, sizeof ev);
        if (status < 0) return status;
        HandleEvent(ev);
      }
      if (status & pts_eos) return -pte_eos;
      ApplyPokes();
      struct pt_block block;
      status = pt_blk_next(dec_, &block, sizeof block);
      // Errors apply after the last instruction of the returned block.
      if (block.ninsn > 0) HandleBlock(block);
      if (status < 0) return status;
    }
  }

  // Switches to the image with every text poke up to the current time
  // applied. The time is libipt's last timing packet, which may be a little
  // ahead of the block about to be decoded; a poke's exact position
  // relative to the other CPU's trace is not known any better.
  void ApplyPokes() {
    if (applied_pokes_ >= owner_->PokeCount()) return;
    uint64_t now = Now();
    size_t k = applied_pokes_;
    while (k < owner_->PokeCount() && owner_->PokeTime(k) <= now) ++k;
    if (k == applied_pokes_) return;
    applied_pokes_ = k;
    (void)pt_blk_set_image(dec_, owner_->PokedImage(pid_, k));
  }

  void HandleBlock(const struct pt_block& b) {
    stats_.blocks++;
    stats_.instructions += b.ninsn;
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
    have_prev_ = true;
    prev_end_ = b.end_ip;
    prev_iclass_ = b.iclass;
    if (prev_iclass_ == ptic_error) prev_iclass_ = owner_->ClassifyBlockEnd(b);
  }

  void HandleEvent(const struct pt_event& ev) {
    if (ev.has_tsc) Advance(owner_->TscToNs(ev.tsc));
    switch (ev.type) {
      case ptev_enabled:
        have_prev_ = false;
        Emit(BranchKind::kEnable, 0, ev.ip_suppressed ? 0 : ev.variant.enabled.ip, false,
             EventTime(ev));
        break;
      case ptev_disabled:
        Emit(BranchKind::kDisable, have_prev_ ? prev_end_ : 0, 0,
             have_prev_ && prev_iclass_ == ptic_far_call, EventTime(ev));
        have_prev_ = false;
        break;
      case ptev_async_disabled:
        Emit(BranchKind::kDisable, ev.variant.async_disabled.at, 0, false, EventTime(ev));
        have_prev_ = false;
        break;
      case ptev_async_branch:
        Emit(BranchKind::kInterrupt, ev.variant.async_branch.from, ev.variant.async_branch.to,
             false, EventTime(ev));
        have_prev_ = false;
        break;
      case ptev_overflow:
        stats_.overflows++;
        Emit(BranchKind::kOverflow, 0, ev.ip_suppressed ? 0 : ev.variant.overflow.ip, false,
             EventTime(ev));
        have_prev_ = false;
        break;
      case ptev_tsx:
        if (ev.variant.tsx.aborted) {
          // The next block starts at the abort handler: treat it as a jump
          // from the aborting instruction.
          prev_end_ = ev.ip_suppressed ? prev_end_ : ev.variant.tsx.ip;
          prev_iclass_ = ptic_jump;
          have_prev_ = true;
        }
        break;
      case ptev_stop:
        Emit(BranchKind::kStop, have_prev_ ? prev_end_ : 0, 0, false, EventTime(ev));
        have_prev_ = false;
        break;
      case ptev_exec_mode:  // 16/32/64-bit: libipt applies it; nothing to show
      case ptev_paging:     // CR3 changes: per-thread streams already know the process
      case ptev_async_paging:
      case ptev_vmcs:
      case ptev_async_vmcs:
      case ptev_exstop:
      case ptev_mwait:
      case ptev_pwre:
      case ptev_pwrx:
      case ptev_ptwrite:
      case ptev_tick:
      case ptev_cbr:
      case ptev_mnt: break;
    }
  }

  PtDecoder* owner_;
  struct pt_block_decoder* dec_;
  int32_t pid_;
  size_t applied_pokes_ = 0;
  const PtDecoder::Sink& sink_;
  DecodeStats& stats_;
  bool have_prev_ = false;
  uint64_t prev_end_ = 0;
  enum pt_insn_class prev_iclass_ = ptic_error;
  uint64_t last_time_ = 0;
  uint64_t insns_ = 0;
};

}  // namespace

Result<void> PtDecoder::DecodeStream(int32_t pid, std::string_view bytes, const Sink& sink) {
  stats_.pt_bytes += bytes.size();
  if (bytes.empty()) return Ok();
  struct pt_config cfg = MakePtConfig(manifest_);
  // libipt takes a non-const pointer but only reads the buffer.
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  struct pt_block_decoder* dec = pt_blk_alloc_decoder(&cfg);
  if (dec == nullptr) return Error("libipt refused the decoder configuration from the manifest");
  int r = pt_blk_set_image(dec, Image(pid));
  if (r < 0) {
    pt_blk_free_decoder(dec);
    return Error(std::string("libipt: setting the image: ") + pt_errstr(pt_errcode(r)));
  }
  StreamDecoder(this, dec, pid, sink).Run();
  pt_blk_free_decoder(dec);
  return Ok();
}

}  // namespace ptsnap::decode
