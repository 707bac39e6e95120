// `ptsnap report`: numbers from a decoded trace without a viewer
// (docs/report.md). ReportSink watches the slice stream as calls
// (output/calls.h) and keeps, per function (and per thread when asked):
// calls, inclusive time counted once, self time and a duration histogram;
// for the functions named with --slowest, the N slowest calls with the
// call tree under each; with --callers/--callees, their callers and
// callees; and the folded stacks of a flame graph. Memory
// grows with the number of distinct functions (and stacks, for folded
// output), never with the trace's length.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "elf/symbol_match.h"
#include "output/calls.h"
#include "output/plausibility.h"
#include "report/histogram.h"
#include "report/pprof.h"

namespace ptsnap::report {

struct ReportOptions {
  bool per_thread = false;
  // Functions to show a histogram for (`ptsnap report TRACE FUNC...`);
  // with `slowest` > 0 also their slowest calls.
  std::vector<std::string> functions;
  size_t slowest = 0;
  size_t tree_depth = 3;  // levels of the call tree under each slow call
  // Only calls within [since, until] ns of the trace's first slice count.
  uint64_t since_ns = 0;
  std::optional<uint64_t> until_ns;
  bool folded = false;  // collect stacks (FoldedStacks, Stacks)
  // The named functions' durations per mark in force at each call's start
  // (ByMark; docs/report.md, "Marks").
  bool by_mark = false;
  // For each named function, its callers / callees (Callers, Callees;
  // docs/report.md, "Callers and callees").
  bool callers = false, callees = false;
  // The --trigger of each snapshot a trigger took (the manifest's): a FUNC
  // with no calls that one of them names is explained (the trace ends at
  // that call's first instruction).
  std::vector<std::string> triggers;
  // A sampled trace (the manifest's source "sampled"): its frames are spans
  // of consecutive samples, not calls (docs/decoding.md, "The span rule"),
  // and the report says so; `sample_period_ns` one sample's time, 0 when
  // the manifest does not give it (a fixed period of cycles).
  bool sampled = false;
  uint64_t sample_period_ns = 0;
  // What the times are (trace::ClockName of the manifest); "" where unknown
  // (a decoded file). The header says it, and --diff warns when A's and B's
  // differ: their times do not compare.
  std::string clock;
};

// What the two frames that are no function's mean (report and replay say
// it where they show one; docs/decoding.md, "Call-stack reconstruction").
inline constexpr const char* kPseudoFramesNote =
    "[syscall]: time in the kernel from a syscall instruction, not traced; [untraced]: time "
    "where tracing stopped inside the function around it (an interrupt or page fault in the "
    "kernel, code outside --filter, or the end of the snapshot)";

struct FunctionStats {
  // As the report shows it: the function's name, or DSO:NAME where
  // functions of several files share the name (ld.so's _start and the
  // program's), a row each.
  std::string name;
  std::string function;  // the name alone
  std::string dso;       // the file's name (no folder); "" when the trace does not say
  int32_t tid = 0;       // per_thread: the thread; else 0
  uint64_t calls = 0;    // every call, those whose start was not seen included
  uint64_t total_ns = 0, self_ns = 0;
  // Calls whose start was not seen (the stack a snapshot began in): in
  // calls, total and self, not in the histogram (their length is unknown).
  uint64_t unseen_start = 0;
  // Calls a decode error cut (output::Call::cut; docs/report.md, "Damaged
  // traces"): as unseen_start, in calls (once, however many errors cut
  // them), total and self (the time decoded), not in the histogram.
  uint64_t cut = 0;
  DurationHistogram durations;
};

// One level of the call tree under a slow call: callees merged by name.
struct TreeNode {
  std::string name;
  uint64_t calls = 0, total_ns = 0;
  std::vector<TreeNode> children;  // by total_ns, largest first
};

struct SlowCall {
  std::string name;
  int32_t pid = 0, tid = 0;
  uint64_t begin_ns = 0, duration_ns = 0;  // begin on the trace's clock
  // The thread's last mark before the call began (MarkText's form: "0x1234"
  // or "0x6f6c6c6548 \"Hello\""); empty: none.
  std::string mark;
  TreeNode tree;  // name "", children: its callees
};

// One named function's calls that began under one mark (ByMark).
struct MarkGroup {
  std::string name, mark;  // mark empty: calls before the thread's first mark
  DurationHistogram durations;
};

// One caller or callee of a named function (ReportSink::Callers, Callees).
struct Neighbour {
  std::string name;    // "(root)": a caller-less frame (the thread's outermost)
  uint64_t calls = 0;  // calls of the named function from it (of it from the function)
  // Callers: the named function's time, counted once per outermost
  // activation (output::Call::total_ns), given to the activation's caller:
  // the rows add up to the function's total. Callees: the time the callee
  // was on the stack called from the function, its frames called so from
  // inside another such frame (recursion) counted once.
  uint64_t total_ns = 0;
};
struct Neighbours {
  std::string name;             // the named function
  uint64_t total_ns = 0;        // its total (FunctionStats::total_ns, over threads)
  std::vector<Neighbour> rows;  // by total_ns, then calls, largest first
};

enum class SortKey { kTotal, kSelf, kCalls, kP99, kMax, kName };
// "total", "self", "calls", "p99", "max", "name".
std::optional<SortKey> SortKeyFrom(std::string_view s);
// The value `key` sorts `f` by (0 for kName).
uint64_t SortValue(const FunctionStats& f, SortKey key);

class ReportSink : public output::CallSink {
 public:
  explicit ReportSink(ReportOptions options) : options_(std::move(options)) {}
  Result<void> Finish() override;

  // Every function (per thread with per_thread), sorted, at most `limit`
  // (0: all).
  [[nodiscard]] std::vector<const FunctionStats*> Functions(SortKey key, size_t limit) const;
  // The stats of each FUNC named in the options, matched as users type
  // names (elf/symbol_match.h: risky(int), risky, _Z5riskyi, '*parse*'),
  // one entry per FUNC merged over threads and over the functions it names:
  // its name is the one function's, or "FUNC [a(int), a(double)]"; FUNC
  // itself, with no calls, when it names none.
  [[nodiscard]] std::vector<FunctionStats> Named() const;
  // The functions of the trace that FUNC `typed` names (Named's rules).
  [[nodiscard]] std::vector<std::string> Resolve(const std::string& typed) const;
  // The --trigger (ReportOptions::triggers) that `typed` names, spelled
  // either way round (risky ~ risky(int), a glob on either side), or "".
  [[nodiscard]] std::string TriggerNamed(const std::string& typed) const;
  // The trace's function names nearest to `typed`, for a "did you mean".
  [[nodiscard]] std::vector<std::string> Closest(const std::string& typed) const;
  // Per named function, its slowest calls, slowest first.
  [[nodiscard]] std::vector<SlowCall> Slowest() const;
  // With by_mark: per named function (in the order named), its calls whose
  // start and end were seen, grouped by the mark in force at their start,
  // groups by mark value (in order of first appearance).
  [[nodiscard]] std::vector<const MarkGroup*> ByMark() const;
  // With callers (callees): per named function, in the order named, who
  // called it (what it called), merged over threads. A frame whose start
  // was not seen is the caller of the frames that ended inside it with no
  // seen caller (output/calls.h).
  [[nodiscard]] const std::vector<Neighbours>& Callers() const { return callers_rows_; }
  [[nodiscard]] const std::vector<Neighbours>& Callees() const { return callees_rows_; }
  // "a;b;c SELF_NS" lines, sorted, as flamegraph.pl, inferno and
  // speedscope read them (';' in a name becomes ':').
  [[nodiscard]] std::string FoldedStacks() const;
  // FoldedStacks' lines as stack -> self ns (stacks with no self time left
  // out), for the difffolded output (report/diff.h).
  [[nodiscard]] std::map<std::string, uint64_t> FoldedLines() const;
  // Every distinct stack (outermost frame first) with the calls that ended
  // on it and their self time, for pprof (report/pprof.h). Stacks of frames
  // whose start was not seen are settled as for FoldedStacks.
  [[nodiscard]] std::vector<StackSample> Stacks() const;
  // Time from the first slice to the last (ns).
  [[nodiscard]] uint64_t span_ns() const {
    return last_ns() > first_ns() ? last_ns() - first_ns() : 0;
  }
  // What the table's percentages are of: the time some frame was on a
  // thread's stack, summed over the threads: the sum of every counted
  // call's self time (the calls --since/--until keep). No function's total
  // exceeds it (its frames lie on its threads' stacks, recursion counted
  // once), and the self times of all functions add up to it.
  [[nodiscard]] uint64_t traced_ns() const { return traced_ns_; }
  [[nodiscard]] bool per_thread() const { return options_.per_thread; }
  [[nodiscard]] const ReportOptions& options() const { return options_; }
  // Calls left out by --since/--until.
  [[nodiscard]] uint64_t outside_window() const { return outside_window_; }
  // Results that cannot be true (output/plausibility.h), over every call
  // (the window aside): this sink's own check, or what SetImplausible gave.
  [[nodiscard]] output::Implausible implausible() const {
    return implausible_ ? *implausible_ : check_.Result();
  }
  // The decode's check, which knows the recording (full-execution or not).
  void SetImplausible(output::Implausible i) { implausible_ = std::move(i); }

 protected:
  void OnCall(const output::Call& c) override;
  void OnEnter(int32_t tid, const std::string* name, uint64_t ts, size_t depth) override;
  void OnSegmentEnd(int32_t tid) override;
  void OnMark(int32_t tid, std::string_view text, uint64_t ts) override;

 private:
  struct Capture {  // a call of a --slowest function in progress
    const std::string* name;
    size_t depth;
    uint64_t begin;
    std::string mark;  // in force at its start
    std::map<std::vector<const std::string*>, std::pair<uint64_t, uint64_t>> tree;  // path
  };
  struct Weight {
    uint64_t calls = 0, self_ns = 0;
  };
  // An edge of the call graph: (named function, caller) or (named
  // function, callee), by the decode's name pointers.
  using Edge = std::pair<const std::string*, const std::string*>;
  struct EdgeHash {
    size_t operator()(const Edge& e) const {
      return std::hash<const void*>()(e.first) * 31 + std::hash<const void*>()(e.second);
    }
  };
  // Per thread and (caller, callee) edge whose caller is named: the edge's
  // open frames and the union of its frames' time in the segment, as
  // output::CallSink keeps per function (recursion counted once).
  struct EdgeTime {
    int depth = 0;
    uint64_t segment_total = 0;
  };
  // Per caller name, edge time (segment_total) a frame encloses.
  using Inside = std::vector<std::pair<const std::string*, uint64_t>>;
  // Frames that ended with no seen caller, by function, waiting for it:
  // the next inferred frame to end, or none (the segment's end).
  struct Orphans {
    uint64_t calls = 0, total_ns = 0;    // in the window: calls, Call::total_ns
    uint64_t window_ns = 0, all_ns = 0;  // durations: in the window, all
    // The time of the edges to it from each caller that they enclose (the
    // frames under them of the same edge: counted already).
    Inside inside, window_inside;
  };
  // The last inferred frame that ended, waiting for its caller (the next).
  struct PendingInferred {
    const std::string* name = nullptr;
    uint64_t calls = 0, total_ns = 0, window_ns = 0, dur = 0;
    // segment_total of each edge to it (by caller) when it ended.
    Inside inside;
  };
  struct ThreadState {
    std::vector<Capture> captures;
    // callers/callees: the open frames whose start was seen, by name.
    std::vector<const std::string*> stack;
    std::unordered_map<Edge, EdgeTime, EdgeHash> edges;  // caller named
    std::unordered_map<const std::string*, Orphans> orphans;
    // The open frame with no seen caller: segment_total of each edge to
    // its function when it began.
    Inside root_marks;
    std::optional<PendingInferred> inferred;
    // Folded contributions of this segment, by stack from the lowest frame
    // whose start was seen; inferred frames prefix them as they end.
    std::map<std::vector<const std::string*>, Weight> pending;
    std::string mark;  // the last mark seen
  };
  bool InWindow(const output::Call& c) const;
  bool IsNamed(const std::string* name);
  void Connect(ThreadState& t, const output::Call& c, bool in_window);
  // The frames waiting for a caller get `caller` (nullptr: none).
  void Adopt(ThreadState& t, const std::string* caller);
  struct EdgeSum {
    uint64_t calls = 0, total_ns = 0;
  };
  void AddEdge(std::unordered_map<Edge, EdgeSum, EdgeHash>& to, const std::string* named,
               const std::string* other, uint64_t calls, uint64_t ns);
  std::vector<Neighbours> NeighboursOf(
      const std::unordered_map<Edge, EdgeSum, EdgeHash>& edges) const;
  // Whether any FUNC names `name` in any way (captures are kept for it).
  bool MatchesAnyLoosely(const std::string& name) const;
  // Every function seen, once per (name, file), for the matcher; with
  // `shown`, the name each has in the table.
  std::vector<elf::NamedSymbol> Names(std::vector<std::string>* shown = nullptr) const;
  // The function names (without file) FUNC `typed` names: what the
  // slowest calls, marks and callers are keyed by.
  std::vector<std::string> ResolveFunctions(const std::string& typed) const;
  // Rows of one name in several files are shown as DSO:NAME (Finish).
  void NameRowsByFile();
  void Fold(ThreadState& t, const output::Call& c);
  void Captured(ThreadState& t, const output::Call& c);

  ReportOptions options_;
  output::PlausibilityCheck check_;
  std::optional<output::Implausible> implausible_;
  std::set<std::string> named_;
  using Key = std::tuple<const std::string*, const std::string*, int32_t>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return (std::hash<const void*>()(std::get<0>(k)) * 31 +
              std::hash<const void*>()(std::get<1>(k))) *
                 31 +
             static_cast<size_t>(std::get<2>(k));
    }
  };
  // By (name, dso, tid); tid 0 unless per_thread.
  std::unordered_map<Key, FunctionStats, KeyHash> stats_;
  std::unordered_map<const std::string*, bool> is_named_;
  std::unordered_map<int32_t, ThreadState> threads_;
  std::map<std::string, std::vector<SlowCall>> slowest_;  // by name; a min-heap by duration
  std::vector<MarkGroup> by_mark_;                        // in order of first appearance
  std::map<std::pair<std::string, std::string>, size_t> by_mark_index_;  // (name, mark)
  // By stack, names copied (the Symbolizer's strings die with the decode).
  std::map<std::vector<std::string>, Weight> stacks_;
  std::optional<uint64_t> origin_;  // the first call's begin: the window's zero
  uint64_t outside_window_ = 0;
  uint64_t traced_ns_ = 0;  // traced_ns()
  // (named, caller) and (named, callee), the caller nullptr for "(root)";
  // Finish copies them into rows (the names die with the decode).
  std::unordered_map<Edge, EdgeSum, EdgeHash> callers_, callees_;
  std::vector<Neighbours> callers_rows_, callees_rows_;  // Finish's copies
};

// The report as text: the table, a histogram per named function, the
// slowest calls with their trees. The table's names are ShortName'd to 40
// columns, or with `full_names` printed whole (the column as wide as the
// longest).
std::string FormatText(const ReportSink& r, SortKey key, size_t limit, bool full_names = false);

// `name` in at most `width` columns, shortened as uftrace's
// --demangle=simple reads: the innermost template argument and parameter
// lists first become `<...>` and `(...)`, until it fits; what still does
// not is cut in the middle. Pure.
std::string ShortName(std::string_view name, size_t width);
// The report as JSON (docs/report.md, stable): {"span_ns", "traced_ns",
// "functions": [{"name", "tid"?, "calls", "total_ns", "total_pct",
// "self_ns", "self_pct", "unseen_start", "cut", "min_ns", "p50_ns",
// "p90_ns", "p99_ns", "max_ns"}], "slowest": [...], "callers"?,
// "callees"?}; the percentages are of traced_ns.
std::string FormatJson(const ReportSink& r, SortKey key, size_t limit);

}  // namespace ptsnap::report
