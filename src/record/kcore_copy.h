// Copying the kernel's code into a trace directory, so kernel-mode PT can be
// decoded against the text that actually ran (alternatives, static keys and
// ftrace patch it at run time; pt-kernel-interface.md section 6).
//
// Like perf record --kcore: copies root/proc/kallsyms and root/proc/modules,
// and writes `kcore`, a small ELF64 core holding only the PT_LOAD regions for
// kernel text (_stext.._etext, page-rounded) and the module area (first module
// symbol .. last + one page) read from root/proc/kcore. Then re-reads
// kallsyms and reports a race when it changed (a module came or went).
// Every file is created mode 0600: they expose kernel memory and addresses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"
#include "sys/kcore.h"

namespace ptsnap::record {

struct KcoreCopy {
  std::vector<sys::ElfLoad> regions;     // as written to the new file (offsets in it)
  std::optional<uint64_t> kernel_start;  // _text, else _stext
  bool kallsyms_changed = false;         // the race check failed: symbols may not match
  uint64_t bytes = 0;                    // kernel bytes copied
};

// The environment switches that disable the copy (PTSNAP_NO_KCORE,
// MAGIC_TRACE_PERF_NO_KCORE): the first one set, or "" when neither is.
std::string KcoreDisabledBy();

// Copies into `out_dir` (created, mode 0700). Errors name the file and the
// cause: kallsyms masked (kptr_restrict / no CAP_SYSLOG), /proc/kcore not
// readable (no CAP_SYS_RAWIO, lockdown, no CONFIG_PROC_KCORE), no kernel
// text symbols, text not covered by any PT_LOAD.
Result<KcoreCopy> CopyKcore(const base::RootPath& root, const std::filesystem::path& out_dir);

}  // namespace ptsnap::record
