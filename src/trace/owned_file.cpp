#include "trace/owned_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/file_util.h"

namespace ptsnap::trace {

namespace {

Error LinkError(const std::filesystem::path& path) {
  return Error(path.string() +
               " is a symbolic link: ptsnap reads only a trace directory's own files, never a "
               "link out of it (traces come from other hosts and users); replace the link with "
               "the file it names");
}

}  // namespace

Result<base::UniqueFd> OpenOwnedFile(const std::filesystem::path& dir,
                                     const std::filesystem::path& rel) {
  const std::filesystem::path shown = dir / rel;
  if (rel.empty() || rel.is_absolute())
    return Error(shown.string() + ": not a path inside the trace directory");
  base::UniqueFd cur(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur) return Error::FromErrno("open " + dir.string());
  std::filesystem::path walked = dir;
  auto last = std::prev(rel.end());
  for (auto it = rel.begin(); it != rel.end(); ++it) {
    const std::string part = it->string();
    walked /= part;
    if (part == ".." || part.empty())
      return Error(shown.string() + ": not a path inside the trace directory");
    if (part == ".") continue;
    const bool leaf = it == last;
    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
    const int flags = leaf ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
                           : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    base::UniqueFd next(::openat(cur.get(), part.c_str(), flags));
    if (!next) {
      const int err = errno;
      struct stat st;
      if (::fstatat(cur.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return LinkError(walked);
      if (err == ENOENT) return Error(walked.string() + " does not exist");
      if (err == ENOTDIR) return Error(walked.string() + " is not a directory");
      errno = err;
      return Error::FromErrno("open " + walked.string());
    }
    cur = std::move(next);
  }
  struct stat st;
  if (::fstat(cur.get(), &st) != 0) return Error::FromErrno("stat " + shown.string());
  if (!S_ISREG(st.st_mode))
    return Error(shown.string() + " is not a regular file (a FIFO, device or directory " +
                 "where the trace keeps a file): the trace directory is damaged or not ptsnap's");
  const int fl = ::fcntl(cur.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(cur.get(), F_SETFL, fl & ~O_NONBLOCK);
  return cur;
}

Result<std::string> ReadOwnedFile(const std::filesystem::path& dir,
                                  const std::filesystem::path& rel, size_t max_size) {
  PTSNAP_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenOwnedFile(dir, rel));
  return base::ReadFd(fd.get(), max_size, (dir / rel).string());
}

bool IsOwnedFile(const std::filesystem::path& dir, const std::filesystem::path& rel) {
  return OpenOwnedFile(dir, rel).has_value();
}

}  // namespace ptsnap::trace
