// The perf PMU description in sysfs: /sys/bus/event_source/devices/<name>/.
//
// ReadPmu() collects `type`, every `format/<term>` (bit ranges in
// perf_event_attr.config/config1/config2), every `caps/<cap>` (hex, as the
// intel_pt driver prints them with "%x"), and the intel_pt timing files
// (`nr_addr_filters`, `max_nonturbo_ratio`, `tsc_art_ratio`). It never fails:
// a missing directory gives present == false, and a file it cannot read or
// parse is skipped with an entry in `warnings` naming the file.
//
// SetTerm() places a value into attr.config by term name, so the recorder
// builds perf_event_attr from the probed format instead of hard-coded bits.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/root_path.h"
#include "ptsnap/result.h"

namespace ptsnap::sys {

// Inclusive bit range [lo, hi] within one 64-bit config word.
struct BitRange {
  int lo = 0;
  int hi = 0;
  [[nodiscard]] int width() const { return hi - lo + 1; }
  bool operator==(const BitRange&) const = default;
};

// Which perf_event_attr word a format term lives in.
enum class ConfigWord { kConfig, kConfig1, kConfig2 };

// A parsed `format/<term>` file: "config:14-17", "config1:0-31", "config:0,2".
// With several ranges the value's low bits go into the first range, the next
// bits into the second, and so on (as perf's pmu_format_value does).
struct FormatTerm {
  ConfigWord word = ConfigWord::kConfig;
  std::vector<BitRange> ranges;
  // Total number of value bits the term can hold.
  [[nodiscard]] int width() const;
};

// Pure. Errors name what is wrong ("bit 64 out of range", "expected config:").
Result<FormatTerm> ParseFormatTerm(std::string_view text);

// A caps/* value: hex with or without "0x", surrounding whitespace allowed.
Result<uint64_t> ParseCapValue(std::string_view text);

// `tsc_art_ratio`: "numerator:denominator" (CPUID.15H EBX:EAX).
struct TscArtRatio {
  uint32_t numerator = 0;
  uint32_t denominator = 0;
};
Result<TscArtRatio> ParseTscArtRatio(std::string_view text);

struct PmuInfo {
  std::string name;
  bool present = false;          // the device directory exists
  std::optional<uint32_t> type;  // attr.type (dynamic for intel_pt)
  std::map<std::string, FormatTerm> format;
  std::map<std::string, uint64_t> caps;
  std::optional<uint32_t> nr_addr_filters;
  std::optional<uint32_t> max_nonturbo_ratio;
  std::optional<TscArtRatio> tsc_art_ratio;
  // "<path>: <what was wrong>" for every file that could not be read or parsed.
  std::vector<std::string> warnings;

  // The cap's value, or 0 when the file is missing (the driver's meaning).
  [[nodiscard]] uint64_t Cap(std::string_view cap) const;
  [[nodiscard]] bool HasTerm(std::string_view term) const;
};

// Reads root/sys/bus/event_source/devices/<name>/. Never fails (see above).
PmuInfo ReadPmu(const base::RootPath& root, std::string_view name = "intel_pt");

// Places `value` into `*config` at the bits of format term `name`, clearing
// those bits first. Fails when the PMU has no such term, the term is not in
// attr.config (use SetTermInAttr), or the value does not fit the term's width.
Result<void> SetTerm(const PmuInfo& pmu, std::string_view name, uint64_t value, uint64_t* config);

// As SetTerm, into attr->config, config1 or config2 as the term says.
Result<void> SetTermInAttr(const PmuInfo& pmu, std::string_view name, uint64_t value,
                           perf_event_attr* attr);

// Pure: places `value` into `*word` at `term`'s bits.
Result<void> PlaceValue(const FormatTerm& term, uint64_t value, uint64_t* word);

}  // namespace ptsnap::sys
