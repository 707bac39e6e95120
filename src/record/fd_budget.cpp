#include "record/fd_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>
#include <string>

namespace ptsnap::record {

Result<void> FdBudget::TakeForThread() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return Ok();
  const auto limit = static_cast<int64_t>(lim.rlim_cur);
  if (counted_ < 0 || counted_ + kFdsPerThread * (added_ + 1) + kFdsForWriting > limit) {
    counted_ = CountOpenFds();
    added_ = 0;
    if (counted_ < 0) return Ok();  // no /proc/self/fd: the kernel's EMFILE decides
    if (counted_ + kFdsPerThread + kFdsForWriting > limit) {
      return Error("keeping " + std::to_string(kFdsForWriting) +
                       " fds free for writing the trace (" + std::to_string(counted_) + " of " +
                       std::to_string(limit) + " open)",
                   EMFILE);
    }
  }
  ++added_;
  return Ok();
}

int64_t FdBudget::CountOpenFds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int64_t n = -1;  // the directory's own fd
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

}  // namespace ptsnap::record
