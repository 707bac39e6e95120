#include "record/kcore_copy.h"

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/file_util.h"
#include "probe/probe.h"
#include "sys/kallsyms.h"
#include "sys/kcore_image.h"
#include "trace/trace_dir.h"

namespace ptsnap::record {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t RoundDown(uint64_t v) { return v & ~(kPage - 1); }
uint64_t RoundUp(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

struct Range {
  uint64_t start, end;
  const char* what;
};

}  // namespace

std::string KcoreDisabledBy(const Getenv& getenv) {
  for (const char* var : {"PTSNAP_NO_KCORE", "MAGIC_TRACE_PERF_NO_KCORE"}) {
    auto v = getenv(var);
    if (v && !v->empty()) return var;
  }
  return "";
}

std::string KcoreDisabledBy() { return KcoreDisabledBy(probe::GetenvFromProcess); }

std::string KernelImageSkipped(const std::string& reason) {
  return "kernel code not copied (" + reason +
         "): kernel code in this trace will not be decoded (the decode shows decode-error markers "
         "where the trace ran in the kernel; ptsnap has no vmlinux fallback)";
}

KernelImage SnapshotKernelImage(const base::RootPath& root, const std::filesystem::path& trace_dir,
                                const Getenv& getenv) {
  KernelImage img;
  if (auto syms = sys::ReadKallsyms(root, false); syms && !syms->masked) {
    img.kernel_start = syms->text ? syms->text : syms->stext;
  }
  probe::ProbeEnv env;
  env.root = root;
  env.getenv = getenv;
  const probe::ProbeReport gate = probe::RunProbe(env);
  std::string gate_reason;
  for (const probe::Check& c : gate.checks) {
    if (c.id.rfind("kcore.", 0) != 0 || c.status == probe::Status::kOk) continue;
    if (c.status == probe::Status::kFail || c.status == probe::Status::kWarn) {
      gate_reason = c.value + (c.fix.empty() ? "" : "; " + c.fix);
      break;
    }
  }
  if (std::string env_off = KcoreDisabledBy(getenv); !env_off.empty()) {
    img.status = trace::KcoreStatus::kDisabled;
    img.reason = env_off + " is set";
  } else if (!gate.kcore_usable) {
    img.status = trace::KcoreStatus::kUnavailable;
    img.reason = gate_reason.empty() ? "the kcore gate of `ptsnap probe` failed" : gate_reason;
  } else if (auto copy = CopyKcore(root, trace_dir / "kcore"); !copy) {
    img.status = trace::KcoreStatus::kUnavailable;
    img.reason = copy.error().ToString();
  } else {
    img.status = trace::KcoreStatus::kCopied;
    img.dir = "kcore";
    if (copy->kernel_start) img.kernel_start = copy->kernel_start;
    if (copy->kallsyms_changed) {
      img.warnings.push_back(
          "kallsyms changed while /proc/kcore was copied (a module was loaded or unloaded); "
          "kernel symbols may not match the copy");
    }
  }
  if (img.status != trace::KcoreStatus::kCopied)
    img.warnings.push_back(KernelImageSkipped(img.reason));
  return img;
}

bool ModulesChanged(std::string_view before, std::string_view after) {
  return sys::ParseModules(before) != sys::ParseModules(after);
}

Result<uint64_t> CopyKernelSymbols(const base::RootPath& root,
                                   const std::filesystem::path& out_dir) {
  PTSNAP_ASSIGN_OR_RETURN(std::string kallsyms_text,
                          base::ReadFile(root.Resolve("/proc/kallsyms")));
  sys::Kallsyms syms = sys::ParseKallsyms(kallsyms_text, /*keep_symbols=*/false);
  if (syms.masked)
    return Error(
        "/proc/kallsyms shows only zero addresses (kptr_restrict, or no CAP_SYSLOG); "
        "run as root or set sysctl kernel.kptr_restrict=0");
  auto modules = base::ReadFile(root.Resolve("/proc/modules"));
  PTSNAP_TRY(trace::MakeTraceDirs(out_dir));
  PTSNAP_TRY(base::WriteFileAtomic(out_dir / "kallsyms", kallsyms_text, 0600));
  PTSNAP_TRY(base::WriteFileAtomic(out_dir / "modules", modules ? *modules : "", 0600));
  return syms.text ? *syms.text : syms.stext.value_or(0);
}

Result<KcoreCopy> CopyKcore(const base::RootPath& root, const std::filesystem::path& out_dir) {
  const auto kallsyms_path = root.Resolve("/proc/kallsyms");
  PTSNAP_ASSIGN_OR_RETURN(std::string kallsyms_text, base::ReadFile(kallsyms_path));
  sys::Kallsyms syms = sys::ParseKallsyms(kallsyms_text, /*keep_symbols=*/false);
  if (syms.masked)
    return Error(
        "/proc/kallsyms shows only zero addresses (kptr_restrict, or no CAP_SYSLOG); "
        "run as root or set sysctl kernel.kptr_restrict=0");
  const auto text_start = syms.stext ? syms.stext : syms.text;
  if (!text_start || !syms.etext || *syms.etext <= *text_start)
    return Error("/proc/kallsyms has no _stext/_etext: cannot tell where kernel text is");
  auto modules = base::ReadFile(root.Resolve("/proc/modules"));
  std::string modules_text = modules ? *modules : std::string();

  auto kcore = sys::KcoreFile::Open(root);
  if (!kcore) return std::move(kcore).error().AddContext("opening /proc/kcore");

  std::vector<Range> ranges = {{RoundDown(*text_start), RoundUp(*syms.etext), "kernel text"}};
  if (syms.modules_start && syms.modules_end && *syms.modules_end >= *syms.modules_start)
    ranges.push_back(
        {RoundDown(*syms.modules_start), RoundUp(*syms.modules_end + kPage), "modules"});

  KcoreCopy result;
  result.kernel_start = syms.text ? syms.text : syms.stext;
  std::vector<sys::CoreSegment> segments;
  for (const Range& r : ranges) {
    bool covered = false;
    // Copy the part of every PT_LOAD that overlaps the range.
    for (const sys::ElfLoad& load : kcore->header().loads) {
      const uint64_t lo = std::max(r.start, load.vaddr);
      const uint64_t hi = std::min(r.end, load.vaddr + load.filesz);
      if (lo >= hi) continue;
      std::string bytes(hi - lo, '\0');
      PTSNAP_TRY_CTX(
          kcore->ReadAt(lo, std::as_writable_bytes(std::span(bytes.data(), bytes.size()))),
          std::string("copying ") + r.what + " from /proc/kcore");
      result.bytes += bytes.size();
      segments.push_back({.vaddr = lo,
                          .paddr = load.paddr == 0 ? 0 : load.paddr + (lo - load.vaddr),
                          .flags = load.flags,
                          .bytes = std::move(bytes)});
      covered = true;
    }
    if (!covered && std::string_view(r.what) == "kernel text")
      return Error("no PT_LOAD segment of /proc/kcore covers kernel text " +
                   std::to_string(r.start) + ".." + std::to_string(r.end));
  }

  PTSNAP_TRY(trace::MakeTraceDirs(out_dir));
  PTSNAP_TRY(base::WriteFileAtomic(out_dir / "kallsyms", kallsyms_text, 0600));
  PTSNAP_TRY(base::WriteFileAtomic(out_dir / "modules", modules_text, 0600));
  const uint16_t machine = kcore->header().machine != 0 ? kcore->header().machine : EM_X86_64;
  PTSNAP_TRY(base::WriteFileAtomic(out_dir / "kcore",
                                   sys::BuildCoreImage(segments, machine, &result.regions), 0600));
  // perf's kcore_copy re-reads and compares, to catch a module load/unload
  // that happened while we copied.
  auto again = base::ReadFile(kallsyms_path);
  auto modules_again = base::ReadFile(root.Resolve("/proc/modules"));
  result.kallsyms_changed =
      !again || *again != kallsyms_text ||
      ModulesChanged(modules_text, modules_again ? *modules_again : std::string());
  return result;
}

}  // namespace ptsnap::record
