// Files a trace directory holds (streams, sideband, manifest, kernel image,
// binary copies, JIT maps), opened without following a symbolic link below
// the directory. Traces travel between hosts and users: a stream that is a
// link to /etc/shadow, or a `pt/` that is a link to another user's files,
// must be refused, not read as PT. The directory itself is the user's path
// and is followed as given. FIFOs and devices are refused too (a FIFO would
// block the decode forever).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::trace {

// `rel` is relative to `dir` without `..` (the manifest's rule). Errors:
// "DIR/pt/0.pt does not exist", "... is a symbolic link: ...", "... is not a
// regular file: ...", or the errno of the open.
Result<base::UniqueFd> OpenOwnedFile(const std::filesystem::path& dir,
                                     const std::filesystem::path& rel);

// The whole file; fails beyond `max_size` bytes.
Result<std::string> ReadOwnedFile(const std::filesystem::path& dir,
                                  const std::filesystem::path& rel,
                                  size_t max_size = size_t{64} << 20);

// Whether `dir/rel` is a regular file reached without a symbolic link: for
// files handed to libelf/libdw by path (binary copies, the vDSO, kcore).
bool IsOwnedFile(const std::filesystem::path& dir, const std::filesystem::path& rel);

}  // namespace ptsnap::trace
