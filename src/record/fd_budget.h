// FdBudget: how many more threads a recording may trace before the fds it
// needs to write the trace run out.
#pragma once

#include <cstdint>

#include "ptsnap/result.h"

namespace ptsnap::record {

// Every traced thread holds fds (its events, its ring, its breakpoints and
// probes) and the trace's files need a few of their own (a snapshot's stream,
// the manifest's temporary, the directory to fsync, binary copies). Threads
// are only added while kFdsForWriting stay free: running out leaves threads
// untraced (or fails attach before recording) instead of failing the
// snapshot that keeps the rest. Counting /proc/self/fd is O(fds), so it is
// recounted only when an estimate (kFdsPerThread per thread added since)
// comes near the limit.
class FdBudget {
 public:
  static constexpr int64_t kFdsForWriting = 16;
  static constexpr int64_t kFdsPerThread = 4;

  // Ok while a thread's events fit; an EMFILE error naming the count when
  // they would not.
  Result<void> TakeForThread();

 private:
  static int64_t CountOpenFds();

  int64_t counted_ = -1;
  int64_t added_ = 0;
};

}  // namespace ptsnap::record
