// --trigger FUNC --slower-than DURATION on real programs (the PT and
// sampling sources alike): SlowCallTracker pairs FUNC's entries and returns
// per thread and says which calls were slow (pure, unit-tested);
// SlowCallProbes opens the entry and return probes (uprobe/uretprobe perf
// events, perf::BuildUprobeAttr) and feeds their samples to a tracker.
// docs/recording.md, "Catching the slow call".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/root_path.h"
#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "ptsnap/result.h"
#include "sys/pmu.h"

namespace ptsnap::record {

// A call of FUNC that ran at least the threshold.
struct SlowCall {
  uint32_t pid = 0, tid = 0;
  uint64_t begin = 0, end = 0;  // perf clock ns: entry and return
  uint64_t skipped_before = 0;  // this thread's slow calls the rate limit skipped since the last
};

// One probe hit, as the probes report it.
struct ProbeHit {
  bool is_return = false;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  uint64_t sp = 0;  // the stack pointer, 0 when the kernel gave no user registers
};

// Pairs entries and returns per thread: an entry pushes onto the thread's
// stack, a return pops (recursion nests). With stack pointers, a return
// first drops the entries of frames below the returning one (left by
// longjmp or an exception, whose returns never come; the returning frame's
// entry sp is the return's sp - 8, the return address popped). A return
// with no entry (the call began before the probes were in place) is
// counted and ignored. A call is slow when it ran at least `threshold_ns`;
// with `rate_limit`, a thread's slow call is reported only when it returns
// at least SlowCallGapNs(threshold) after that thread's previous reported
// one (the others are counted in `skipped`).
class SlowCallTracker {
 public:
  SlowCallTracker(uint64_t threshold_ns, bool rate_limit);

  // Hits in time order per ring read (the caller merges the two probes'
  // rings). A return pairs with the thread's innermost entry at or before
  // its time, so an entry read before an earlier return stays open.
  std::optional<SlowCall> Feed(const ProbeHit& hit);

  [[nodiscard]] uint64_t unmatched_returns() const { return unmatched_returns_; }
  [[nodiscard]] uint64_t unwound() const { return unwound_; }
  [[nodiscard]] uint64_t skipped() const { return skipped_; }
  [[nodiscard]] uint64_t calls() const { return calls_; }
  // Calls still open (entered, not returned) on `tid`.
  [[nodiscard]] size_t depth(uint32_t tid) const;

 private:
  struct Entry {
    uint64_t time = 0, sp = 0;
  };
  struct Thread {
    std::vector<Entry> open;
    bool reported = false;
    uint64_t last_reported = 0;
    uint64_t skipped = 0;
  };
  uint64_t threshold_ns_;
  bool rate_limit_;
  std::map<uint32_t, Thread> threads_;
  uint64_t unmatched_returns_ = 0, unwound_ = 0, skipped_ = 0, calls_ = 0;
};

// Where a function's code is in a file, for a uprobe.
struct ProbeTarget {
  std::filesystem::path file;  // the ELF file (the executable or a mapped library)
  uint64_t offset = 0;         // file offset of the function's first instruction
  std::string symbol;
};

// FUNC in process `pid`: its executable (/proc/PID/exe) first, then every
// other file mapped executable in /proc/PID/maps (shared libraries); the
// file offset from the PT_LOAD segment that holds the symbol's address.
// Errors: not found anywhere (naming the files searched), no segment.
Result<ProbeTarget> ResolveProbeTarget(std::string_view symbol, pid_t pid);

// The file offset of link-time address `vaddr` in the ELF bytes `head` (a
// prefix holding the ELF and program headers): the PT_LOAD segment with
// p_vaddr <= vaddr < p_vaddr + p_filesz gives p_offset + (vaddr - p_vaddr).
// Pure.
Result<uint64_t> FileOffsetOf(std::string_view head, uint64_t vaddr);

class SlowCallProbes {
 public:
  // The uprobe PMU read from `root` (type, format/retprobe) and the target.
  static Result<std::unique_ptr<SlowCallProbes>> Create(const base::RootPath& root,
                                                        ProbeTarget target, uint64_t threshold_ns,
                                                        bool rate_limit);

  // An entry and a return probe on thread `tid` (cpu -1, not inherited:
  // the caller adds threads created later; calls they make before that are
  // not timed). Again for the same tid: nothing. Errors name the thread and
  // what the kernel refused.
  Result<void> AddThread(pid_t tid);
  // The thread exited: its probes are read one last time and closed.
  void ThreadExited(pid_t tid);
  // Reads both rings (returns first, so every return read has its entry
  // read too), merges by time and returns the slow calls found.
  std::vector<SlowCall> Poll();
  void AppendFds(std::vector<int>& fds) const;
  [[nodiscard]] const SlowCallTracker& tracker() const { return tracker_; }
  [[nodiscard]] const ProbeTarget& target() const { return target_; }
  [[nodiscard]] uint64_t lost() const { return lost_; }

 private:
  SlowCallProbes(ProbeTarget target, uint64_t threshold_ns, bool rate_limit)
      : target_(std::move(target)), tracker_(threshold_ns, rate_limit) {}
  struct Probe {
    std::unique_ptr<perf::PerfEvent> event;
    std::unique_ptr<perf::DataRingReader> ring;
    bool is_return = false;
    pid_t tid = 0;
  };
  ProbeTarget target_;
  std::string path_;  // config1 points here while the events open
  sys::PmuInfo pmu_;
  std::vector<SlowCall> pending_;  // found while a thread's probes were closed
  SlowCallTracker tracker_;
  std::vector<Probe> probes_;
  uint64_t lost_ = 0;
};

}  // namespace ptsnap::record
