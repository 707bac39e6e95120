// The terminal summary after a decode: time span, threads, hottest functions
// by total and self time, and counts of trouble (docs/decoding.md,
// "The summary"). SummarySink watches the slice stream; memory grows with
// the number of distinct functions and the stack depth only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/slice.h"

namespace ptsnap::output {

struct FunctionTime {
  std::string name;
  uint64_t total_ns = 0;  // inclusive; recursion is counted once (outermost frame)
  uint64_t self_ns = 0;   // exclusive of callees
  uint64_t calls = 0;
};

class SummarySink : public model::SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override;
  void OnSlice(const model::Slice& s) override;
  Result<void> Finish() override { return Ok(); }

  [[nodiscard]] uint64_t first_ns() const { return first_; }
  [[nodiscard]] uint64_t last_ns() const { return last_; }
  [[nodiscard]] size_t threads() const { return threads_.size(); }
  [[nodiscard]] uint64_t slices() const { return slices_; }
  // The `n` hottest functions by total (by_self false) or self time.
  [[nodiscard]] std::vector<FunctionTime> Top(size_t n, bool by_self) const;

 private:
  struct Open {
    FunctionTime* fn;  // node pointers of unordered_map stay valid
    int* depth;        // this thread's count of open frames of fn
    uint64_t child_ns;
  };
  struct ThreadState {
    std::vector<Open> stack;  // non-inferred open frames
    uint64_t orphan_ns = 0;   // time of ended frames with no open parent
    std::unordered_map<const std::string*, int> on_stack;
  };
  FunctionTime& Fn(const std::string* name);
  static void Account(FunctionTime& f, bool outermost, uint64_t dur, uint64_t child_ns);
  uint64_t first_ = UINT64_MAX, last_ = 0;
  uint64_t slices_ = 0;
  std::unordered_map<int32_t, ThreadState> threads_;
  int32_t last_tid_ = 0;
  ThreadState* last_thread_ = nullptr;
  std::unordered_map<const std::string*, FunctionTime> functions_;
};

// "1.234 ms", "56 ns", "2.5 s".
std::string FormatDuration(uint64_t ns);

}  // namespace ptsnap::output
