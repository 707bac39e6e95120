#include "record/artifacts.h"

#include <sys/auxv.h>

#include <filesystem>
#include <span>

#include "base/file_util.h"
#include "base/log.h"
#include "elf/elf_file.h"
#include "probe/probe.h"
#include "record/kcore_copy.h"
#include "sys/proc_maps.h"
#include "trace/jitdump.h"

namespace ptsnap::record {

void RecordBinaries(trace::TraceWriter& writer, const std::set<std::string>& files, bool copy,
                    const std::vector<pid_t>& pids, bool host_vdso) {
  for (const std::string& f : files) {
    trace::Binary b;
    b.path = f;
    if (!copy) {
      // The notes only: a mapped library can be hundreds of MB.
      b.build_id = elf::ReadBuildIdOf(f);
      if (b.build_id.empty()) PTSNAP_LOG(kInfo) << "no build-id for " << f;
    } else if (auto bytes = base::ReadFile(f, size_t{1} << 30); bytes) {
      b.build_id = elf::ReadBuildId(std::as_bytes(std::span(bytes->data(), bytes->size())));
      const std::string rel = "binaries/" + (b.build_id.empty() ? "no-build-id" : b.build_id) +
                              "/" + std::filesystem::path(f).filename().string();
      (void)trace::MakeTraceDirs((writer.dir() / rel).parent_path());  // WriteFileAtomic says why
      if (auto w = base::WriteFileAtomic(writer.dir() / rel, *bytes, 0600); w) {
        b.copy = rel;
      } else {
        PTSNAP_LOG(kWarning) << "--copy-binaries: " << w.error().ToString();
      }
    } else {
      PTSNAP_LOG(kInfo) << "no build-id for " << f << ": " << bytes.error().ToString();
    }
    writer.manifest().binaries.push_back(std::move(b));
  }
  if (!host_vdso) return;
  const auto vdso = static_cast<uintptr_t>(::getauxval(AT_SYSINFO_EHDR));
  if (vdso == 0) return;
  auto maps = sys::ReadProcMaps(base::RootPath(), 0);
  if (!maps) return;
  for (const sys::MapEntry& m : *maps) {
    if (m.path != "[vdso]" || m.start != vdso) continue;
    // The vDSO is mapped in this process at the address the auxv gives.
    std::string image(reinterpret_cast<const char*>(vdso),  // NOLINT(performance-no-int-to-ptr)
                      m.end - m.start);
    std::error_code ec;
    (void)trace::MakeTraceDirs(writer.dir() / "vdso");  // WriteFileAtomic says why
    // One file, hard-linked under every pid (system-wide mode lists many).
    std::filesystem::path first;
    for (pid_t pid : pids) {
      const auto path = writer.dir() / "vdso" / (std::to_string(pid) + ".so");
      if (!first.empty()) {
        std::filesystem::create_hard_link(first, path, ec);
        if (!ec) continue;
      }
      if (auto w = base::WriteFileAtomic(path, image, 0600); !w) {
        PTSNAP_LOG(kWarning) << "vdso dump: " << w.error().ToString();
      } else if (first.empty()) {
        first = path;
      }
    }
  }
}

void CopyKernel(const Prepared& p, const base::RootPath& root, trace::TraceWriter& writer) {
  if (p.scope == trace::Scope::kUser) return;
  if (p.sampling) {
    // Samples hold addresses, not code: the kernel's symbols name their
    // kernel frames, no /proc/kcore needed.
    trace::Kcore& k = writer.manifest().kcore;
    auto copied = CopyKernelSymbols(root, writer.dir() / "kcore");
    if (!copied) {
      PTSNAP_LOG(kWarning) << "kernel frames will be shown as addresses: "
                           << copied.error().ToString();
      return;
    }
    k.dir = "kcore";
    if (*copied) writer.manifest().kernel_start = *copied;
    return;
  }
  KernelImage img = SnapshotKernelImage(root, writer.dir(), probe::GetenvFromProcess);
  trace::Kcore& k = writer.manifest().kcore;
  k.status = img.status;
  k.reason = img.reason;
  k.dir = img.dir;
  if (img.kernel_start) writer.manifest().kernel_start = img.kernel_start;
  for (const std::string& w : img.warnings) PTSNAP_LOG(kWarning) << w;
}

void CopyJitdumps(trace::TraceWriter& writer, std::set<std::string>& mapped_files,
                  std::vector<std::string>& warnings) {
  for (auto it = mapped_files.begin(); it != mapped_files.end();) {
    const auto pid = trace::JitdumpMarkerPid(*it);
    if (!pid) {
      ++it;
      continue;
    }
    if (auto r = writer.CopyJitdump(*pid, *it); !r)
      warnings.push_back("jitdump not copied: " + r.error().ToString());
    it = mapped_files.erase(it);
  }
}

}  // namespace ptsnap::record
