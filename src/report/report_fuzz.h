// The body of the report_* fuzz targets: bytes through one of
// trace_file.h's readers into a ReportSink with every collection on
// (slowest calls of "f" and "g", their callers and callees, stacks, per
// thread for odd sizes), then every rendering; and the same bytes into a
// ReplaySink (windowed, depth-limited for odd sizes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "report/replay.h"
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
  o.callers = o.callees = true;
  ReportSink sink(o);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)read(bytes, &sink);
  (void)FormatText(sink, SortKey::kTotal, 0);
  (void)FormatJson(sink, SortKey::kP99, 5);
  (void)sink.FoldedStacks();
  (void)sink.Stacks();
  ReplayOptions r;
  if (size % 2 == 1) {
    r.since_ns = 1000;
    r.until_ns = 100000;
    r.depth = 3;
  }
  size_t out = 0;
  ReplaySink replay(r, [&out](std::string_view line) { out += line.size(); });
  (void)read(bytes, &replay);
}

}  // namespace ptsnap::report
