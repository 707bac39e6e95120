#include "base/file_util.h"

#include <pthread.h>

#include <csignal>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "base/log.h"
#include "base/string_util.h"
#include "base/unique_fd.h"

namespace ptsnap::base {
Result<void> WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::FromErrno("write " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Ok();
}

Result<std::string> ReadFd(int fd, size_t max_size, const std::string& what) {
  // Straight into the string, one kernel copy: a regular file in one piece
  // of its size and one byte more (to see its end; growing the string from
  // a small buffer copied a 31 MB PT stream about three times, 5% of its
  // `ptsnap decode`), anything else (/proc and /sys files, whose size says
  // nothing; pipes; a file that grew) 4 KiB first, then 64 KiB at a time.
  struct stat st;
  const bool sized = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  size_t step = sized ? std::min(static_cast<size_t>(st.st_size), max_size) + 1 : 4096;
  std::string out;
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      out.resize(have + step);
      step = 65536;
    }
    ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::FromErrno("read " + what);
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
    if (have > max_size) {
      return Error(what + " is larger than " + std::to_string(max_size) + " bytes");
    }
  }
  out.resize(have);
  return out;
}

Result<std::string> ReadFile(const std::filesystem::path& path, size_t max_size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("open " + path.string());
  return ReadFd(fd.get(), max_size, path.string());
}

Result<std::string> ReadFileHead(const std::filesystem::path& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("open " + path.string());
  std::string out(max, '\0');
  ssize_t n;
  do {
    n = ::pread(fd.get(), out.data(), max, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::FromErrno("read " + path.string());
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::filesystem::path> FindInPath(std::string_view path_list, std::string_view name) {
  for (std::string_view dir : Split(path_list, ':')) {
    std::filesystem::path p = std::filesystem::path(dir.empty() ? "." : dir) / std::string(name);
    std::error_code ec;
    if (::access(p.c_str(), X_OK) == 0 && !std::filesystem::is_directory(p, ec)) return p;
  }
  return std::nullopt;
}

Result<std::string> ReadFileTrimmed(const std::filesystem::path& path) {
  PTSNAP_ASSIGN_OR_RETURN(std::string s, ReadFile(path));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\r' || s.back() == '\0')) {
    s.pop_back();
  }
  return s;
}

Result<void> WriteFileAtomic(const std::filesystem::path& path, std::string_view data,
                             mode_t mode) {
  return WriteFileAtomicWith(path, mode, [data](const WriteChunkFn& write) { return write(data); });
}

Result<void> WriteFileAtomicWith(const std::filesystem::path& path, mode_t mode,
                                 const std::function<Result<void>(const WriteChunkFn&)>& produce,
                                 bool* renamed) {
  if (renamed != nullptr) *renamed = false;
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    // O_EXCL | O_NOFOLLOW: a link planted at the temporary name (a shared
    // directory) is never written through; a stale file of ours is removed.
    ::unlink(tmp.c_str());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd) return Error::FromErrno("create " + tmp.string());
    if (::fchmod(fd.get(), mode) != 0) return Error::FromErrno("chmod " + tmp.string());
    GiveToInvoker(fd.get());
    const std::string what = tmp.string();
    if (auto r = produce([&](std::string_view data) { return WriteAll(fd.get(), data, what); });
        !r) {
      ::unlink(tmp.c_str());
      return r;
    }
    if (::fsync(fd.get()) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      return Error::FromErrno("fsync " + tmp.string(), e);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Error::FromErrno("rename to " + path.string(), e);
  }
  if (renamed != nullptr) *renamed = true;
  // The rename itself reaches the disk with the directory (power loss must
  // not bring back the old file, or none).
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir && ::fsync(dir.get()) != 0 && errno != EINVAL)
    return Error::FromErrno("fsync " + parent.string());
  return Ok();
}

ssize_t WriteToPipe(int fd, const void* data, size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const bool was_pending = ::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  ssize_t n;
  do {
    n = ::write(fd, data, size);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EPIPE && !was_pending) {
    const int saved = errno;
    const struct timespec zero {};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
    errno = saved;
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return n;
}

Result<void> AppendFile(const std::filesystem::path& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) return Error::FromErrno("open " + path.string());
  return WriteAll(fd.get(), data, path.string());
}

namespace {
std::optional<uint32_t> ParseId(const char* s) {
  if (s == nullptr || *s == '\0') return std::nullopt;
  uint64_t v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
    if (v >= UINT32_MAX) return std::nullopt;  // (uid_t)-1 means "unchanged" to chown
  }
  return static_cast<uint32_t>(v);
}

void ReportChownFailure(const std::string& what) {
  const int err = errno;
  static bool said = false;  // once: the same cause fails for every file
  if (said) return;
  said = true;
  PTSNAP_LOG(kWarning) << "could not give " << what << " to the user who ran sudo ("
                       << std::strerror(err) << "); files stay root's";
}
}  // namespace

std::optional<Owner> ParseSudoOwner(const char* sudo_uid, const char* sudo_gid) {
  const auto uid = ParseId(sudo_uid);
  const auto gid = ParseId(sudo_gid);
  if (!uid || !gid || *uid == 0) return std::nullopt;
  return Owner{*uid, *gid};
}

std::optional<Owner> InvokingUser() {
  static const std::optional<Owner> owner = []() -> std::optional<Owner> {
    if (::getuid() != 0) return std::nullopt;
    return ParseSudoOwner(std::getenv("SUDO_UID"),
                          std::getenv("SUDO_GID"));  // NOLINT(concurrency-mt-unsafe)
  }();
  return owner;
}

void GiveToInvoker(int fd) {
  const auto owner = InvokingUser();
  if (owner && ::fchown(fd, owner->uid, owner->gid) != 0) ReportChownFailure("a file");
}

void GiveToInvoker(const std::filesystem::path& path) {
  const auto owner = InvokingUser();
  if (owner && ::lchown(path.c_str(), owner->uid, owner->gid) != 0)
    ReportChownFailure(path.string());
}

void GiveTreeToInvoker(const std::filesystem::path& dir) {
  if (!InvokingUser()) return;
  GiveToInvoker(dir);
  std::error_code ec;
  // The iterator does not follow directory links; lchown changes a link, never its target.
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    GiveToInvoker(it->path());
}

}  // namespace ptsnap::base
