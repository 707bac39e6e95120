// libFuzzer target: arbitrary bytes as a Chrome JSON file through `ptsnap
// report FILE.json`'s reader (report/trace_file.h) into a ReportSink with
// every collection on: frames that do not nest, inferred frames and
// "[unknown]" spans in any order, "B"/"E" pairs, odd numbers and nesting.
// The text and JSON renderings run too.
#include <cstddef>
#include <cstdint>

#include "report/report_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptsnap::report::FuzzReport(data, size, ptsnap::report::ReadJsonSlicesFromBytes);
  return 0;
}
