// perf_event_attr as text, in the layout `perf record -vv` prints before
// each perf_event_open (tools/perf/util/perf_event_attr_fprintf.c,
// perf_event_attr__fprintf): one "  name  value" line per non-zero field, in
// perf's order and with perf's names, sample_type, read_format and
// branch_sample_type as '|'-joined flag names. The same text is parsed
// back, so ptsnap's attrs and perf's printed ones compare field by field
// (tests/perf/perf_attr_agree_test.cpp, docs/perf-interop.md).
#pragma once

#include <linux/perf_event.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ptsnap::perf {

// The lines perf prints between its "perf_event_attr:" header and the
// closing dashes, each "  NAME VALUE\n" with NAME padded to 32 columns as
// perf does. Unsigned fields in decimal, config / bp_addr / bp_len /
// sample_regs_* in hex ("0x..."), flag words as names ("IP|TID"); a flag
// bit without a name is printed as its hex value ("0x100000000"). Pure.
std::string FormatAttrLikePerf(const perf_event_attr& attr);

// One attr block of perf's -vv output, and where it was opened.
struct PerfAttrBlock {
  std::map<std::string, std::string> fields;  // name -> value text, as printed
  // "pid P  cpu C" of each sys_perf_event_open line that followed the block
  // and returned an fd (" = N"); failed attempts are not listed.
  std::vector<std::pair<int, int>> opened;
};

// Every "perf_event_attr:" block in `text` (perf's stderr with -vv, or
// FormatAttrLikePerf's lines under such a header), in order. perf prints a
// block again when it retries an open with a feature switched off; each
// retry is its own block (only the one that opened has `opened`). Lines
// outside blocks are ignored. Pure.
std::vector<PerfAttrBlock> ParsePerfAttrText(std::string_view text);

// A flag word as perf prints it ("IP|TID|IDENTIFIER") split into its
// names; "" gives none. Pure.
std::vector<std::string> SplitFlags(std::string_view value);

}  // namespace ptsnap::perf
