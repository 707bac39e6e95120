#include "decode/kernel_image.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/file_util.h"
#include "base/string_util.h"
#include "elf/symbol_file.h"
#include "sys/kallsyms.h"
#include "trace/owned_file.h"

namespace ptsnap::decode {

KernelImage::KernelImage(struct pt_image_section_cache* iscache, ImageViews* views)
    : iscache_(iscache), views_(views), image_(NewImage("kernel")) {}

void KernelImage::Load(const std::filesystem::path& dir, const trace::Manifest& m,
                       Symbolizer& symbolizer, DecodeStats& stats) {
  // Sampled recordings keep kallsyms without a kcore image (status
  // "not-needed"): symbols for their kernel frames, no code.
  const bool copied = m.kcore.status == trace::KcoreStatus::kCopied;
  if (!copied && m.kcore.dir.empty()) return;
  const std::filesystem::path krel = m.kcore.dir.empty() ? "kcore" : m.kcore.dir;
  const auto kdir = dir / krel;
  if (auto text = trace::ReadOwnedFile(dir, krel / "kallsyms", size_t{256} << 20); text) {
    symbolizer.SetKernelSymbols(KernelSymbols(sys::ParseKallsyms(*text)),
                                m.kernel_start.value_or(0));
  } else {
    stats.warnings.push_back("kernel symbols: " + text.error().ToString());
  }
  if (!copied) return;
  auto kcore = kdir / "kcore";
  if (auto owned = trace::OpenOwnedFile(dir, krel / "kcore"); !owned) {
    stats.warnings.push_back("kernel code is not decoded: " + owned.error().ToString());
    return;
  }
  auto file = elf::SymbolFile::Open(kcore);
  if (!file) {
    stats.warnings.push_back("kernel code is not decoded: " + file.error().ToString());
    return;
  }
  for (const auto& seg : file->segments()) {
    if (seg.filesz == 0 || !IsKernelAddress(seg.vaddr)) continue;
    int isid = pt_iscache_add_file(iscache_, kcore.c_str(), seg.offset, seg.filesz, seg.vaddr);
    if (isid < 0) continue;
    // Adding a cached section fails only on bad arguments (a null image, an
    // isid not in the cache): a bug, never a property of the trace.
    PTSNAP_CHECK_OK(pt_image_add_cached(image_.get(), iscache_, isid, nullptr));
    if (views_ != nullptr) {
      views_->Section(isid, seg.vaddr, seg.filesz, kcore.string(), seg.offset);
      views_->Add(image_.get(), isid);
    }
    kcore_segments_.push_back({seg.vaddr, seg.filesz, isid});
  }
}

// PERF_RECORD_TEXT_POKE (linux/perf_event.h): the kernel changed `old_bytes`
// at `addr` to `new_bytes` (static keys, ftrace, kprobes, BPF) at the
// record's time. The patched pages go into a new section that overlays the
// kcore section in later image versions (libipt splits the section it
// overlaps), so code that ran before the poke still decodes against the old
// bytes and code after it against the new ones.
void KernelImage::AddTextPoke(uint64_t time, const trace::TextPoke& poke, DecodeStats& stats) {
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
        stats.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
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
    stats.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
                             ": no memory for the patched copy; the poke is not applied");
    return;
  }
  std::string name = "/proc/self/fd/" + std::to_string(fd.get());
  int isid = pt_iscache_add_file(iscache_, name.c_str(), 0, bytes.size(), lo);
  if (isid < 0) {
    stats.warnings.push_back("TEXT_POKE at " + base::Hex(poke.addr) +
                             ": libipt: " + LibiptError(isid));
    return;
  }
  if (views_ != nullptr) views_->Section(isid, lo, bytes.size(), name, 0);
  poke_fds_.push_back(std::move(fd));
  pokes_.push_back({time, isid});
}

}  // namespace ptsnap::decode
