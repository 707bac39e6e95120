#include "probe/facts.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "base/string_util.h"
#include "probe/checks.h"
#include "sys/cpus.h"
#include "sys/perf_event.h"
#include "sys/proc_maps.h"

// The live breakpoint and uprobe checks aim at this function: it is part of
// every binary that links the probe, so its address is in our own text and
// its file offset is in /proc/self/exe. extern "C" and noinline keep one
// real, unmangled copy.
extern "C" __attribute__((noinline, used)) int ptsnap_probe_target(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ptsnap::probe {
namespace {

// An opened event is closed again at once: only whether it opened counts.
Result<void> Opened(const Result<base::UniqueFd>& fd) {
  if (fd) return Ok();
  return fd.error();
}

Result<void> OpenDummy() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return Opened(sys::PerfEventOpen(attr, 0, -1, -1));
}

Result<void> OpenBreakpoint(uint64_t addr) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.bp_type = HW_BREAKPOINT_X;
  attr.bp_addr = addr;
  attr.bp_len = sizeof(long);
  attr.sample_period = 1;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return Opened(sys::PerfEventOpen(attr, 0, -1, -1));
}

// The uprobe PMU's type, this program's file and the target's offset in it
// (from /proc/self/maps), then the open; stops at the first step that fails.
UprobeFacts OpenUprobe(const base::RootPath& root) {
  UprobeFacts u;
  auto text = base::ReadFile(root.Resolve("/sys/bus/event_source/devices/uprobe/type"), 4096);
  if (!text) return u;
  u.type_readable = true;
  auto type = base::ParseUint(*text);
  if (!type || *type > UINT32_MAX) return u;
  u.type = static_cast<uint32_t>(*type);
  auto maps = sys::ReadProcMaps(root, 0);
  if (!maps) {
    u.maps_error = maps.error();
    return u;
  }
  uint64_t addr = reinterpret_cast<uintptr_t>(&ptsnap_probe_target);
  const sys::MapEntry* hit = nullptr;
  for (const auto& m : *maps) {
    if (addr >= m.start && addr < m.end && !m.path.empty() && m.path.front() == '/') hit = &m;
  }
  if (hit == nullptr) return u;
  u.path = hit->path;
  u.offset = addr - hit->start + hit->offset;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = *u.type;
  attr.disabled = 1;
  attr.uprobe_path = reinterpret_cast<uintptr_t>(u.path.c_str());
  attr.probe_offset = u.offset;
  u.open = Opened(sys::PerfEventOpen(attr, 0, -1, -1));
  return u;
}

KcoreFacts ReadKcore(const base::RootPath& root, const sys::Privileges& priv,
                     const Result<sys::Kallsyms>& kallsyms) {
  KcoreFacts k;
  std::error_code ec;
  const std::string path = root.Resolve("/proc/kcore");
  k.exists = std::filesystem::exists(path, ec);
  if (!k.exists) return k;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) k.mode = st.st_mode & 07777;
  // Not tried when something refuses it: the check names the refusal
  // instead (and under lockdown the kernel would log the refused open).
  if (!KcoreRefusals(k.mode, priv).empty()) return k;
  auto file = sys::KcoreFile::Open(root);
  if (!file) {
    k.header = file.error();
    return k;
  }
  k.header = file->header();
  std::optional<TextRange> text = KernelTextRange(kallsyms);
  if (!text ||
      sys::FindLoadCovering(file->header(), text->start, text->end - text->start) == nullptr) {
    return k;
  }
  std::byte probe_bytes[16];
  k.text_read = file->ReadAt(text->start, probe_bytes);
  return k;
}

// The executable `name` the environment's $PATH finds.
std::optional<std::string> FindInPath(const ProbeEnv& env, std::string_view name) {
  if (!env.getenv) return std::nullopt;
  auto path = env.getenv("PATH");
  if (!path) return std::nullopt;
  auto found = base::FindInPath(*path, name);
  return found ? std::optional<std::string>(found->string()) : std::nullopt;
}

}  // namespace

ProbeFacts GatherFacts(const ProbeEnv& env) {
  ProbeFacts f;
  const base::RootPath& root = env.root;
  std::error_code ec;

  f.kernel = sys::ReadKernelVersion(root);
  f.osrelease_exists = std::filesystem::exists(root.Resolve("/proc/sys/kernel/osrelease"), ec);

  f.cpuid_read = env.cpuid != nullptr;
  if (env.cpuid != nullptr) f.cpu = sys::DecodeCpu(*env.cpuid);

  f.pmu = sys::ReadPmu(root, "intel_pt");
  f.priv = sys::ReadPrivileges(root);

  if (env.getenv) {
    f.ptsnap_no_kcore = env.getenv("PTSNAP_NO_KCORE");
    f.magic_trace_perf_no_kcore = env.getenv("MAGIC_TRACE_PERF_NO_KCORE");
  }
  f.kallsyms = sys::ReadKallsyms(root, /*keep_symbols=*/false);
  f.kcore = ReadKcore(root, f.priv, f.kallsyms);

  f.online_cpus = sys::ReadOnlineCpus(root);
  f.online_cpus_exists =
      std::filesystem::exists(root.Resolve("/sys/devices/system/cpu/online"), ec);

  if (env.live_syscalls) {
    LiveFacts live;
    live.dummy = OpenDummy();
    live.breakpoint_addr = reinterpret_cast<uintptr_t>(&ptsnap_probe_target);
    live.breakpoint = OpenBreakpoint(live.breakpoint_addr);
    live.uprobe = OpenUprobe(root);
    f.live = std::move(live);
  }

  f.qemu = FindInPath(env, "qemu-x86_64");
  return f;
}

}  // namespace ptsnap::probe
