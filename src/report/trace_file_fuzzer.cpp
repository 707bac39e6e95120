// libFuzzer target: arbitrary bytes as an FXT file through `ptsnap report
// FILE.fxt`'s reader (report/trace_file.h) into a ReportSink with every
// collection on: ends without begins, names on ends, begins after their
// ends, markers, windows. The text and JSON renderings run too.
#include <cstddef>
#include <cstdint>

#include "report/report_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptsnap::report::FuzzReport(data, size, ptsnap::report::ReadFxtSlicesFromBytes);
  return 0;
}
