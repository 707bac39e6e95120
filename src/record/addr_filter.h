// --filter SPEC: Intel PT address filters in perf's syntax
// (tools/perf/Documentation/perf-record.txt, --filter; resolved by perf's
// auxtrace.c, here by ptsnap), resolved to the kernel's form
// (kernel/events/core.c perf_event_parse_addr_filter) that
// PERF_EVENT_IOC_SET_FILTER takes, and handed to the emulator as the same
// (file, offset, size) ranges.
//
//   SPEC    := FILTER ([ ,]+ FILTER)*  |  SYMBOL      (short form: filter SYMBOL)
//   FILTER  := ACTION START [/ SIZE] [@ FILE]
//   ACTION  := filter | start | stop | tracestop
//   START   := a number (a file offset in FILE, decimal or 0x hex) or a
//              function symbol, SYMBOL#N picking the Nth of several in
//              address order
//   SIZE    := a number; a symbol's own size when omitted
//   FILE    := the object file (default: the traced program's executable)
//
// Spaces around '/' and '@' are allowed, as perf allows them. Intel PT
// implements `filter` (trace only inside the ranges) and `tracestop` (stop
// tracing when a range is entered) and refuses `start` and `stop` (pt.c
// pt_event_addr_filters_validate: EOPNOTSUPP); CheckAddrFilterSupport says
// so before anything opens. ParseAddrFilters, ResolveAddrFilter,
// CheckAddrFilterSupport and FormatKernelAddrFilters are pure (the parser is
// fuzzed); only ResolveAddrFilters reads files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.h"
#include "elf/segments.h"
#include "ptsnap/result.h"
#include "record/options.h"
#include "sys/pmu.h"

namespace ptsnap::record {

enum class AddrFilterAction { kFilter, kStart, kStop, kTraceStop };

// perf's spelling of the action ("filter", "start", "stop", "tracestop").
std::string_view ToString(AddrFilterAction action);

// One filter as written.
struct AddrFilter {
  AddrFilterAction action = AddrFilterAction::kFilter;
  std::string symbol;   // "" when START is a number
  uint32_t index = 0;   // SYMBOL#N: N (1-based); 0: the symbol must be unique
  uint64_t offset = 0;  // START as a number: a file offset
  uint64_t size = 0;    // 0: not given (a symbol's size is used)
  std::string file;     // "" : the traced program
  bool operator==(const AddrFilter&) const = default;
};

// Parses SPEC. Errors name the offending text and the expected form (an
// unknown action, a missing START or FILE, a SIZE that is not a number or
// is 0, an empty spec).
Result<std::vector<AddrFilter>> ParseAddrFilters(std::string_view spec);

// A filter resolved to an object file's range, as the kernel takes it.
struct ResolvedAddrFilter {
  AddrFilterAction action = AddrFilterAction::kFilter;
  std::string path;     // absolute, canonical path of the object file
  uint64_t offset = 0;  // file offset of the range's first byte
  uint64_t size = 0;    // bytes, > 0
  std::string what;     // for messages: "work_a" or "0x1139/0x2a"
  bool operator==(const ResolvedAddrFilter&) const = default;
};

// What ResolveAddrFilter needs of one object file.
struct AddrFilterObject {
  std::string path;                    // canonical
  const elf::Image* image = nullptr;   // function symbols; nullptr: none could be read
  std::span<const elf::Segment> load;  // PT_LOAD segments
};

// Resolves `f` against `obj`: a symbol to the file offset of its first byte
// (through the PT_LOAD segment holding its address) and its size (or SIZE).
// Errors: no such function (naming the file and the fix), several functions
// of that name at different addresses without #N (listing them), #N beyond
// their number, a symbol of size 0 without SIZE, an address in no segment.
Result<ResolvedAddrFilter> ResolveAddrFilter(const AddrFilter& f, const AddrFilterObject& obj);

// Reads the object files the filters name (FILE, else `program`) and
// resolves every filter; errors as ResolveAddrFilter's, or the file's
// ("--filter: cannot read /x: No such file"), prefixed with the filter.
Result<std::vector<ResolvedAddrFilter>> ResolveAddrFilters(std::span<const AddrFilter> filters,
                                                           const std::filesystem::path& program);

// Parse, then resolve against `program`: what the recorders call.
Result<std::vector<ResolvedAddrFilter>> ParseAndResolveAddrFilters(
    std::string_view spec, const std::filesystem::path& program);

// The filters of a recording: opts.filter resolved against its program
// (run: the command's executable, found as execvp would; attach: the first
// process's /proc/PID/exe). Empty when opts.filter is.
Result<std::vector<ResolvedAddrFilter>> ResolveRecordingFilters(const RecordOptions& opts);

// Whether the intel_pt PMU `pmu` can take these filters: caps/ip_filtering
// present, no `start`/`stop` (Intel PT has neither), and at most
// nr_addr_filters ranges (caps/num_address_ranges when the file is absent).
// Each failure is one error naming the cause and the fix. Pure.
Result<void> CheckAddrFilterSupport(std::span<const ResolvedAddrFilter> filters,
                                    const sys::PmuInfo& pmu);

// The kernel's filter string for PERF_EVENT_IOC_SET_FILTER:
// "filter 0x1139/0x2a@/usr/bin/prog,stop 0x2000/0x10@/usr/lib/libc.so.6"
// (`tracestop` is the kernel's `stop` with a size). Errors: a path the
// kernel's parser would split (a space, comma or newline in it). Pure.
Result<std::string> FormatKernelAddrFilters(std::span<const ResolvedAddrFilter> filters);

}  // namespace ptsnap::record
