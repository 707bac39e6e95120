// libFuzzer target: arbitrary bytes as a Chrome JSON file through `ptsnap
// report FILE.json`'s reader (report/trace_file.h) into a ReportSink with
// every collection on: frames that do not nest, inferred frames and
// "[unknown]" spans in any order, "B"/"E" pairs, odd numbers and nesting.
// The text and JSON renderings run too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "report/report.h"
#include "report/trace_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptsnap::report::ReportOptions o;
  o.functions = {"f", "g"};
  o.slowest = 2;
  o.folded = true;
  o.per_thread = size % 2 == 1;
  ptsnap::report::ReportSink sink(o);
  auto r = ptsnap::report::ReadJsonSlicesFromBytes(
      std::string_view(reinterpret_cast<const char*>(data), size), &sink);
  (void)r;
  (void)ptsnap::report::FormatText(sink, ptsnap::report::SortKey::kTotal, 0);
  (void)ptsnap::report::FormatJson(sink, ptsnap::report::SortKey::kP99, 5);
  (void)sink.FoldedStacks();
  (void)sink.Stacks();
  return 0;
}
