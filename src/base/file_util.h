// Small file helpers. All return Result with the path in the error context.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ptsnap/result.h"

namespace ptsnap::base {

// Whole file as bytes. Works for /proc and /sys files whose size is reported
// as 0 or 4096 (reads until EOF). Fails beyond `max_size` bytes.
Result<std::string> ReadFile(const std::filesystem::path& path, size_t max_size = size_t{64} << 20);

// ReadFile from an open fd, to its end; `what` names it in errors.
Result<std::string> ReadFd(int fd, size_t max_size, const std::string& what);

// The first `max` bytes of `path` (all of it when shorter), with one pread:
// ELF headers and other prefixes of files too large to read whole.
Result<std::string> ReadFileHead(const std::filesystem::path& path, size_t max);

// The first `dir/name` that is an executable file, over the ':'-separated
// directories of `path_list` as execvp(3) searches $PATH (an empty entry is
// the current directory); nullopt when none is.
std::optional<std::filesystem::path> FindInPath(std::string_view path_list, std::string_view name);

// ReadFile with trailing whitespace (the newline sysfs adds) removed.
Result<std::string> ReadFileTrimmed(const std::filesystem::path& path);

// Writes `data` to `path` through a temporary file in the same directory and
// rename(2), so readers see the old or the new file, never a torn one.
// `mode` is applied to the new file.
Result<void> WriteFileAtomic(const std::filesystem::path& path, std::string_view data,
                             mode_t mode = 0644);

// As WriteFileAtomic, but the bytes come from `produce`, which writes them
// through the function it is handed, piece by piece, as often as it likes:
// a large file is never held whole. An error from `produce` or from a write
// removes the temporary file and is returned. `renamed` (when given) says
// whether the new file took `path`'s place; an error after that is the
// directory's sync.
using WriteChunkFn = std::function<Result<void>(std::string_view)>;
Result<void> WriteFileAtomicWith(const std::filesystem::path& path, mode_t mode,
                                 const std::function<Result<void>(const WriteChunkFn&)>& produce,
                                 bool* renamed = nullptr);

// write(2) all of `data` to `fd`, retrying short writes and EINTR. `what`
// names the destination in the error ("write WHAT: No space left on device").
Result<void> WriteAll(int fd, std::string_view data, const std::string& what);

// write(2) of `data` to a pipe whose reader may be gone (a child killed by
// the same Ctrl-C as we were): EPIPE instead of SIGPIPE, which would end
// ptsnap before it wrote what it recorded. SIGPIPE is blocked in the calling
// thread for the call and a pending one it raised is taken. Returns
// write(2)'s result (errno set on -1).
ssize_t WriteToPipe(int fd, const void* data, size_t size);

// Appends to (creating) `path`.
Result<void> AppendFile(const std::filesystem::path& path, std::string_view data);

// ---- Files for the user who ran sudo ----------------------------------------
// Under `sudo ptsnap ...` every file and directory ptsnap creates belongs to
// the invoking user (SUDO_UID/SUDO_GID), not root, so they can read, decode
// and remove their own traces. Only while ptsnap runs as root (sudo's real
// uid): anyone else's SUDO_UID is ignored.
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};
// The owner from sudo's variables (both must be decimal ids; root's own id
// or a malformed value: nullopt). Pure, for tests.
std::optional<Owner> ParseSudoOwner(const char* sudo_uid, const char* sudo_gid);
// ParseSudoOwner of this process's environment, when its real uid is 0.
std::optional<Owner> InvokingUser();
// Best effort (a failure is logged, never fatal: the file is still
// written, only root's): give `fd`, or `path` without following a link,
// to the invoking user. No-ops without one.
void GiveToInvoker(int fd);
void GiveToInvoker(const std::filesystem::path& path);
// The same for `dir` and everything below it, links themselves not
// followed: files written by others on ptsnap's behalf (the emulator's).
void GiveTreeToInvoker(const std::filesystem::path& dir);

}  // namespace ptsnap::base
