// Fake intel_pt PMU trees for tests: the sysfs files of
// /sys/bus/event_source/devices/intel_pt (type, format/*, caps/*,
// nr_addr_filters, max_nonturbo_ratio, tsc_art_ratio) written under a
// TempDir used as a RootPath. The presets hold the values real kernels show
// on those CPUs (the kernel's bit layout in format/*).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tests/support/temp_dir.h"

namespace ptsnap::testing {

// Relative to the fake root.
inline constexpr char kIntelPtDir[] = "sys/bus/event_source/devices/intel_pt/";

struct FakeIntelPt {
  std::string type = "8";
  std::map<std::string, std::string> format;  // term -> "config:lo-hi"
  std::map<std::string, std::string> caps;    // cap -> hex value as the file holds it
  std::optional<std::string> nr_addr_filters;
  std::optional<std::string> max_nonturbo_ratio;
  std::optional<std::string> tsc_art_ratio;
};

// Skylake: every format term and capability (CYC, MTC periods 0,3,6,9, PSB
// periods 0-5, two address ranges).
inline FakeIntelPt SkylakeIntelPt() {
  FakeIntelPt p;
  p.type = "8";
  p.format = {{"pt", "config:0"},
              {"cyc", "config:1"},
              {"pwr_evt", "config:4"},
              {"fup_on_ptw", "config:5"},
              {"mtc", "config:9"},
              {"tsc", "config:10"},
              {"noretcomp", "config:11"},
              {"ptw", "config:12"},
              {"branch", "config:13"},
              {"mtc_period", "config:14-17"},
              {"cyc_thresh", "config:19-22"},
              {"psb_period", "config:24-27"}};
  p.caps = {{"cr3_filtering", "1"},
            {"psb_cyc", "1"},
            {"ip_filtering", "1"},
            {"mtc", "1"},
            {"ptwrite", "0"},
            {"power_event_trace", "0"},
            {"topa_output", "1"},
            {"topa_multiple_entries", "1"},
            {"single_range_output", "1"},
            {"payloads_lip", "0"},
            {"num_address_ranges", "2"},
            {"mtc_periods", "249"},
            {"cycle_thresholds", "3fff"},
            {"psb_periods", "3f"},
            {"max_subleaf", "1"}};
  p.nr_addr_filters = "2";
  p.max_nonturbo_ratio = "34";
  p.tsc_art_ratio = "200:2";
  return p;
}

// Broadwell: no psb_cyc (no CYC, fixed PSB period), no MTC, no address
// filters, no tsc_art_ratio.
inline FakeIntelPt BroadwellIntelPt() {
  FakeIntelPt p;
  p.type = "7";
  p.format = {{"pt", "config:0"},
              {"tsc", "config:10"},
              {"noretcomp", "config:11"},
              {"branch", "config:13"}};
  p.caps = {{"psb_cyc", "0"},     {"ip_filtering", "0"},          {"mtc", "0"},
            {"topa_output", "1"}, {"topa_multiple_entries", "1"}, {"num_address_ranges", "0"}};
  p.nr_addr_filters = "0";
  p.max_nonturbo_ratio = "23";
  return p;
}

// Writes `pmu` under root/sys/bus/event_source/devices/intel_pt; each value
// is followed by a newline, as sysfs shows it.
inline void WriteIntelPt(const TempDir& root, const FakeIntelPt& pmu) {
  const std::string dir = kIntelPtDir;
  root.Write(dir + "type", pmu.type + "\n");
  for (const auto& [term, bits] : pmu.format) root.Write(dir + "format/" + term, bits + "\n");
  for (const auto& [cap, v] : pmu.caps) root.Write(dir + "caps/" + cap, v + "\n");
  if (pmu.nr_addr_filters) root.Write(dir + "nr_addr_filters", *pmu.nr_addr_filters + "\n");
  if (pmu.max_nonturbo_ratio) {
    root.Write(dir + "max_nonturbo_ratio", *pmu.max_nonturbo_ratio + "\n");
  }
  if (pmu.tsc_art_ratio) root.Write(dir + "tsc_art_ratio", *pmu.tsc_art_ratio + "\n");
}

}  // namespace ptsnap::testing
