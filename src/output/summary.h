// The terminal summary after a decode: time span, threads, hottest functions
// by total and self time, and counts of trouble (docs/decoding.md,
// "The summary"). SummarySink watches the slice stream (as calls:
// output/calls.h); memory grows with the number of distinct functions and
// the stack depth only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "output/calls.h"
#include "output/plausibility.h"

namespace ptsnap::output {

struct FunctionTime {
  std::string name;       // FILE:NAME where functions of several files share the name
  uint64_t total_ns = 0;  // inclusive; recursion is counted once (outermost frame)
  uint64_t self_ns = 0;   // exclusive of callees
  uint64_t calls = 0;
  uint64_t cut = 0;  // of the calls, those a decode error cut (Call::cut)
};

class SummarySink : public CallSink {
 public:
  // The `n` hottest functions by total (by_self false) or self time.
  [[nodiscard]] std::vector<FunctionTime> Top(size_t n, bool by_self) const;
  // The impossible-results check over the same calls.
  PlausibilityCheck& check() { return check_; }
  // Marks (docs/decoding.md, "Marks") seen, and each thread's last one
  // ({tid, text}, by tid).
  [[nodiscard]] uint64_t marks() const { return marks_; }
  [[nodiscard]] std::vector<std::pair<int32_t, std::string>> LastMarks() const;

 protected:
  void OnCall(const Call& c) override;
  void OnMark(int32_t tid, std::string_view text, uint64_t ts) override;

 private:
  // By (name, file): ld.so's _start and the program's are two functions,
  // as they are two rows in `ptsnap report` (shown FILE:NAME by Top).
  struct Key {
    const std::string* name = nullptr;
    const std::string* dso = nullptr;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.name) * 31 + std::hash<const void*>()(k.dso);
    }
  };
  std::unordered_map<Key, FunctionTime, KeyHash> functions_;
  // In front of functions_, by name pointer (its values never move).
  struct Recent {
    Key key;
    FunctionTime* f = nullptr;
  };
  std::vector<Recent> recent_;
  PlausibilityCheck check_;
  uint64_t marks_ = 0;
  std::map<int32_t, std::string> last_mark_;
};

// "1.234 ms", "56 ns", "2.5 s".
std::string FormatDuration(uint64_t ns);

}  // namespace ptsnap::output
