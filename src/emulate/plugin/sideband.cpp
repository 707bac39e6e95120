// Sideband: the event log (events.<pid>, plugin_protocol.h), files in the
// work directory, and what QEMU loaded itself (the program, its
// interpreter), described as the kernel would (MMAP2, COMM).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/file_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

void Die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("ptsnap: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::_Exit(125);
}

// Thread `t` ended (PERF_RECORD_EXIT: pid, ppid, tid, ptid as the kernel
// fills them for a thread).
TaskMessage ExitMessage(const ThreadState* t) {
  return TaskMessage{.exit = true,
                     .time = t->clock,
                     .pid = U32(t->pid),
                     .ppid = U32(t->pid),
                     .tid = U32(t->tid),
                     .ptid = U32(t->tid)};
}

// Appends `m` to this process's event log. One write() per line on an
// O_APPEND file, so lines from threads never mix (WriteAll splits a line
// only after a short write, which a regular file gives only when it cannot
// take more).
void Plugin::Report(const PluginMessage& m) {
  if (detached_.load(std::memory_order_relaxed)) return;
  if (!base::WriteAll(events_.get(), FormatMessage(m), "events")) {
    Die("writing the plugin's events file failed");
  }
}

// Whether opening a file in the work directory failed because the driver
// has gone and removed it (--after=detach; a process forked before the
// detach has no control thread to be told): the recording is over, and
// this process detaches quietly instead of failing.
bool Plugin::DriverGone(int err) {
  if (err != ENOENT || ::access(opts_.out.c_str(), F_OK) == 0) return false;
  Detach();
  return true;
}

// Opens `path` in the work directory to write (O_WRONLY | O_CREAT |
// O_CLOEXEC | `flags`, mode 0600). Not open when the driver has gone
// (DriverGone: this process has detached); any other failure is fatal.
base::UniqueFd Plugin::OpenWorkFile(const std::string& path, int flags) {
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600));
  if (!fd && !DriverGone(errno)) Die("cannot write %s: %s", path.c_str(), std::strerror(errno));
  return fd;
}

// The (new) process's event log. In a forked child this closes the
// parent's, inherited.
void Plugin::OpenEvents() {
  pid_ = ::getpid();
  std::string path = opts_.out + "/events." + std::to_string(pid_);
  events_ = OpenWorkFile(path, O_APPEND);
}

void Plugin::EmitMmap2(uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff, const char* path,
                       int prot, int flags) {
  struct stat st {};
  ::stat(path, &st);
  if (prot & PROT_EXEC) {
    MapFilterRanges(addr, len, pgoff, path);
    MapLibTriggers(addr, len, pgoff, path);
    AddFileCode(addr, addr + len);
  }
  Report(MmapMessage{.time = time,
                     .pid = U32(pid_),
                     .tid = U32(::gettid()),
                     .addr = addr,
                     .len = len,
                     .pgoff = pgoff,
                     .maj = major(st.st_dev),
                     .min = minor(st.st_dev),
                     .ino = st.st_ino,
                     .prot = static_cast<uint32_t>(prot),
                     .flags = static_cast<uint32_t>(flags),
                     .path = path});
}

// Emits MMAP2 records for the executable segments of an ELF QEMU loaded
// itself, at `bias`.
void Plugin::EmitElfMappings(const std::string& path, const elf::LoadLayout& img, uint64_t bias) {
  for (const auto& s : img.segments) {
    if (!s.exec) continue;
    uint64_t start = (bias + s.vaddr) & ~uint64_t{0xfff};
    uint64_t end = (bias + s.vaddr + s.memsz + 0xfff) & ~uint64_t{0xfff};
    EmitMmap2(start_time_, start, end - start, s.offset & ~uint64_t{0xfff}, path.c_str(),
              PROT_READ | PROT_EXEC, MAP_PRIVATE);
  }
}

// Called at the first translation, once QEMU has loaded the guest: the main
// binary and interpreter mappings, the process's comm (an exec's, at the
// execve's time in an image a followed exec started), runtime addresses of
// the trigger and stop-indicator symbols (in the program they were resolved
// in only: a program exec'd from it has other functions at those
// addresses, so its triggers never fire and --only-in never resumes, as
// probes on a file behave on hardware).
void Plugin::DescribeImages() {
  images_done_.store(true);
  std::string bin = qemu_plugin_path_to_binary();
  char real[4096];
  if (::realpath(bin.c_str(), real) != nullptr) bin = real;
  auto img = elf::ParseLoadLayout(base::ReadFileHead(bin, 65536).value_or(""));
  if (!img) Die("cannot read the ELF headers of %s", bin.c_str());
  uint64_t bias = 0;
  if (img->pie) {
    auto lo = elf::LowestExecVaddr(img->segments);
    if (lo) bias = qemu_plugin_start_code() - *lo;
  }
  std::string name = bin.substr(bin.rfind('/') + 1);
  Report(CommMessage{.time = start_time_,
                     .pid = U32(pid_),
                     .tid = U32(pid_),
                     .exec = true,
                     .name = name.substr(0, 15)});
  EmitElfMappings(bin, *img, bias);
  if (!img->interp.empty()) {
    std::string interp = img->interp;
    if (::realpath(interp.c_str(), real) != nullptr) interp = real;
    auto iimg = elf::ParseLoadLayout(base::ReadFileHead(interp, 65536).value_or(""));
    if (iimg) EmitElfMappings(interp, *iimg, qemu_plugin_entry_code() - iimg->entry);
  }
  const bool resolved_here = main_.empty() || main_ == bin;
  if (main_.empty()) main_ = bin;
  if (!resolved_here) return;
  {
    std::lock_guard lock(range_mu_);
    for (uint64_t a : opts_.trigger) trigger_rt_.push_back(a + bias);
  }
  for (uint64_t a : opts_.stop) stop_rt_.push_back(a + bias);
  if (opts_.slow_ns != 0) slow_rt_ = opts_.slow + bias;
  if (opts_.only_in != 0) only_in_rt_ = opts_.only_in + bias;
}

}  // namespace ptsnap::emulate
