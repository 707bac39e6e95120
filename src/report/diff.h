// `ptsnap report A --diff B` (docs/report.md, "Comparing two recordings:
// --diff"): two finished ReportSinks, A the baseline, compared per
// function by name. Pure functions of the sinks: nothing here reads a
// trace. The sinks must have been built without per_thread (a row is a
// function, merged over threads) and outlive the rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/report.h"

namespace ptsnap::report {

// One function in A, B or both. A side the function has no row in (no
// call of it ended in that trace) is null.
struct DiffRow {
  std::string name;
  const FunctionStats* a = nullptr;
  const FunctionStats* b = nullptr;
  // total B - total A, a missing side counting 0.
  [[nodiscard]] int64_t total_change_ns() const;
};

// What the text and JSON say about each recording.
struct DiffTrace {
  std::string path;  // as given on the command line
  const ReportSink* sink = nullptr;
};

// Every function of A or B, sorted by the absolute change from A to B of
// the `key` column (total, the default: of the total time; kName: by
// name), the larger first, ties by name; at most `limit` (0: all).
std::vector<DiffRow> DiffFunctions(const ReportSink& a, const ReportSink& b, SortKey key,
                                   size_t limit);

// The comparison as text: a header naming A (the baseline) and B with
// their spans, the table (names ShortName'd to 40 columns unless
// `full_names`), then, per function named in A's options, the two duration
// histograms side by side.
std::string FormatDiffText(const DiffTrace& a, const DiffTrace& b, SortKey key, size_t limit,
                           bool full_names = false);

// The comparison as JSON (docs/report.md, stable): {"a": {"path",
// "span_ns", "threads", "calls", "outside_window"}, "b": {...},
// "functions": [{"name", "a": {"calls", "total_ns", "self_ns", "p50_ns",
// "p99_ns"} or null, "b": ... or null, "total_change_ns"}]}; p50_ns and
// p99_ns are null where no call began and ended in that trace.
std::string FormatDiffJson(const DiffTrace& a, const DiffTrace& b, SortKey key, size_t limit);

// Brendan Gregg's difffolded format (FlameGraph's difffolded.pl, read by
// flamegraph.pl and inferno-flamegraph): one "stack SELF_NS_A SELF_NS_B"
// line per stack either trace folds to (ReportSink::FoldedLines), sorted,
// 0 where a trace has none. Both sinks need options.folded.
std::string DiffFolded(const ReportSink& a, const ReportSink& b);

}  // namespace ptsnap::report
