#include "record/processes.h"

#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <filesystem>

#include "base/file_util.h"
#include "base/string_util.h"
#include "sys/proc_maps.h"
#include "trace/perf_record.h"

namespace ptsnap::record {

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

int CountThreads(const base::RootPath& root, pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it(root.Resolve("/proc/" + std::to_string(pid) + "/task"),
                                         ec);
  int n = 0;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) ++n;
  return std::max(n, 1);
}

Result<std::vector<pid_t>> ListThreads(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return Error::FromErrno("listing threads of process " + std::to_string(pid), ec.value());
  for (const auto& entry : it) {
    auto tid = base::ParseUint(entry.path().filename().string());
    if (tid) tids.push_back(static_cast<pid_t>(*tid));
  }
  std::sort(tids.begin(), tids.end(), [pid](pid_t a, pid_t b) {
    if ((a == pid) != (b == pid)) return a == pid;
    return a < b;
  });
  return tids;
}

std::vector<pid_t> ListProcesses(const base::RootPath& root) {
  std::vector<pid_t> pids;
  std::error_code ec;
  std::filesystem::directory_iterator it(root.Resolve("/proc"), ec);
  if (ec) return pids;
  for (const auto& entry : it) {
    auto pid = base::ParseUint(entry.path().filename().string());
    if (pid && *pid > 0 && *pid <= INT32_MAX) pids.push_back(static_cast<pid_t>(*pid));
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

Result<std::string> SynthesizeSideband(pid_t pid, uint64_t time) {
  auto maps = sys::ReadProcMaps(base::RootPath(), pid);
  if (!maps && !ProcessExists(pid)) {
    // Gone between attach's checks and this read (the raw error was ENOENT
    // on /proc/PID/maps, naming no cause).
    return Error("process " + std::to_string(pid) +
                 " exited while ptsnap was attaching to it: nothing of it was traced (" +
                 maps.error().ToString() + ")")
        .WithKind(ErrorKind::kProcessGone);
  }
  if (!maps) return std::move(maps).error();
  std::string out;
  trace::SampleId sid;
  sid.pid = static_cast<uint32_t>(pid);
  sid.tid = static_cast<uint32_t>(pid);
  sid.time = time;
  auto tids = ListThreads(pid);
  for (pid_t tid : tids ? *tids : std::vector<pid_t>{pid}) {
    auto comm = base::ReadFileTrimmed("/proc/" + std::to_string(pid) + "/task/" +
                                      std::to_string(tid) + "/comm");
    if (!comm) continue;
    trace::Record r;
    r.type = PERF_RECORD_COMM;
    r.sample_id = sid;
    r.sample_id.tid = static_cast<uint32_t>(tid);
    r.body = trace::Comm{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), *comm, false};
    out += trace::SerializeRecord(r);
  }
  for (const sys::MapEntry& m : *maps) {
    if (!m.exec || m.path.empty()) continue;
    trace::Mmap2 mm;
    mm.pid = static_cast<uint32_t>(pid);
    mm.tid = static_cast<uint32_t>(pid);
    mm.addr = m.start;
    mm.len = m.end - m.start;
    mm.pgoff = m.offset;
    mm.maj = m.dev_major;
    mm.min = m.dev_minor;
    mm.ino = m.inode;
    mm.prot = (m.read ? PROT_READ : 0) | (m.write ? PROT_WRITE : 0) | (m.exec ? PROT_EXEC : 0);
    mm.flags = m.shared ? MAP_SHARED : MAP_PRIVATE;
    mm.filename = m.path;
    trace::Record r;
    r.type = PERF_RECORD_MMAP2;
    r.misc = PERF_RECORD_MISC_USER;
    r.sample_id = sid;
    r.body = mm;
    out += trace::SerializeRecord(r);
  }
  return out;
}

}  // namespace ptsnap::record
