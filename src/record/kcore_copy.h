// Copying the kernel's code into a trace directory, so kernel-mode PT can be
// decoded against the text that actually ran (alternatives, static keys and
// ftrace patch it at run time; pt-kernel-interface.md section 6).
//
// Like perf record --kcore: copies root/proc/kallsyms and root/proc/modules,
// and writes `kcore`, a small ELF64 core holding only the PT_LOAD regions for
// kernel text (_stext.._etext, page-rounded) and the module area (first module
// symbol .. last + one page) read from root/proc/kcore. Then re-reads
// kallsyms and /proc/modules (name, size, address) and reports a race when
// either changed (a module came or went).
// Every file is created mode 0600: they expose kernel memory and addresses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"
#include "sys/kcore.h"
#include "trace/manifest.h"

namespace ptsnap::record {

struct KcoreCopy {
  std::vector<sys::ElfLoad> regions;     // as written to the new file (offsets in it)
  std::optional<uint64_t> kernel_start;  // _text, else _stext
  bool kallsyms_changed = false;         // the race check failed: symbols may not match
  uint64_t bytes = 0;                    // kernel bytes copied
};

// Environment lookup, injectable for tests (std::getenv by default).
using Getenv = std::function<std::optional<std::string>(std::string_view)>;

// The environment switches that disable the copy (PTSNAP_NO_KCORE,
// MAGIC_TRACE_PERF_NO_KCORE): the first one set (non-empty), or "" when
// neither is.
std::string KcoreDisabledBy(const Getenv& getenv);
std::string KcoreDisabledBy();  // from the process environment

// What a kernel-scope recording got for a kernel image: the manifest's
// `kcore` fields and the user's warnings.
struct KernelImage {
  trace::KcoreStatus status = trace::KcoreStatus::kUnavailable;
  std::string reason;                    // why not copied: the first failing kcore.* probe check
  std::string dir;                       // "kcore" when copied
  std::optional<uint64_t> kernel_start;  // _text (else _stext) when kallsyms is unmasked
  std::vector<std::string> warnings;     // one line each, printed as "warning: ..."
};

// The kcore gate of `ptsnap probe` (kcore.* checks: the environment
// switches, kernel >= 5.5, kallsyms unmasked, /proc/kcore openable by this
// process's capabilities and mode bits, no confidentiality lockdown), all
// read under `root`; then CopyKcore into trace_dir/kcore. Never fails: a
// skipped or failed copy is a status and a warning (KernelImageSkipped).
KernelImage SnapshotKernelImage(const base::RootPath& root, const std::filesystem::path& trace_dir,
                                const Getenv& getenv);

// The warning for a recording without a kernel image. The decoder has no
// other source of kernel code (no vmlinux), so kernel code is not decoded.
std::string KernelImageSkipped(const std::string& reason);

// The race check on /proc/modules: true when a module was loaded, unloaded
// or moved between the two texts. Compares name, size and address only:
// refcounts (and the state column) change all the time on a busy machine,
// which made perf drop its whole-text compare. Pure.
bool ModulesChanged(std::string_view before, std::string_view after);

// Sampled recordings with a kernel scope: only root/proc/kallsyms and
// root/proc/modules into `out_dir` (created, mode 0700; files 0600), which
// name the samples' kernel frames. Returns the kernel's start (_text, else
// _stext; 0 when unknown). Fails when kallsyms is masked (kptr_restrict, no
// CAP_SYSLOG) or unreadable.
Result<uint64_t> CopyKernelSymbols(const base::RootPath& root,
                                   const std::filesystem::path& out_dir);

// Copies into `out_dir` (created, mode 0700). Errors name the file and the
// cause: kallsyms masked (kptr_restrict / no CAP_SYSLOG), /proc/kcore not
// readable (no CAP_SYS_RAWIO, lockdown, no CONFIG_PROC_KCORE), no kernel
// text symbols, text not covered by any PT_LOAD.
Result<KcoreCopy> CopyKcore(const base::RootPath& root, const std::filesystem::path& out_dir);

}  // namespace ptsnap::record
