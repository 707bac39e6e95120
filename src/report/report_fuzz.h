// The body of the report_* fuzz targets: bytes through one of
// trace_file.h's readers into a ReportSink with every collection on
// (slowest calls of "f" and "g", stacks, per thread for odd sizes), then
// every rendering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "report/report.h"
#include "report/trace_file.h"

namespace ptsnap::report {

inline void FuzzReport(const uint8_t* data, size_t size,
                       Result<void> (*read)(std::string_view, model::SliceSink*)) {
  ReportOptions o;
  o.functions = {"f", "g"};
  o.slowest = 2;
  o.folded = true;
  o.per_thread = size % 2 == 1;
  ReportSink sink(o);
  (void)read(std::string_view(reinterpret_cast<const char*>(data), size), &sink);
  (void)FormatText(sink, SortKey::kTotal, 0);
  (void)FormatJson(sink, SortKey::kP99, 5);
  (void)sink.FoldedStacks();
  (void)sink.Stacks();
}

}  // namespace ptsnap::report
