#include "perf/attr.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/hw_breakpoint.h>

#include "tests/support/fake_intel_pt.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/perf_record.h"

namespace ptsnap::perf {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kDev = ::ptsnap::testing::kIntelPtDir;

// A Skylake intel_pt tree: the kernel's real bit layout, all caps.
void WriteFullPmu(const TempDir& d) {
  ::ptsnap::testing::WriteIntelPt(d, ::ptsnap::testing::SkylakeIntelPt());
}

sys::PmuInfo Read(const TempDir& d) { return sys::ReadPmu(base::RootPath(d.path())); }

PtAttrOptions Opts(std::string preset) {
  PtAttrOptions o;
  o.timing.preset = std::move(preset);
  return o;
}

TEST(BuildPtAttr, LowPresetIsPerfsDefaultConfig) {
  TempDir d;
  WriteFullPmu(d);
  auto attr = BuildPtAttr(Read(d), Opts("low"));
  ASSERT_THAT(attr, HasValue());
  // pt|mtc|tsc|branch|mtc_period=3|psb_period=3 (pt-kernel-interface.md 1.2).
  EXPECT_EQ(attr->attr.config, 0x0300E601u);
  EXPECT_EQ(attr->attr.type, 8u);
  EXPECT_EQ(attr->attr.size, sizeof(perf_event_attr));
  EXPECT_EQ(attr->attr.exclude_kernel, 1u);
  EXPECT_EQ(attr->attr.exclude_user, 0u);
  EXPECT_EQ(attr->attr.exclude_hv, 1u);
  EXPECT_EQ(attr->attr.disabled, 1u);
  EXPECT_EQ(attr->attr.sample_id_all, 1u);
  EXPECT_EQ(attr->attr.sample_type, trace::kSampleType);
  EXPECT_EQ(attr->attr.aux_watermark, 0u);
  EXPECT_TRUE(attr->timing.tsc);
  EXPECT_TRUE(attr->timing.mtc);
  EXPECT_EQ(attr->timing.mtc_period, 3u);
  EXPECT_EQ(attr->timing.psb_period, 3u);
  EXPECT_THAT(attr->warnings, IsEmpty());
}

TEST(BuildPtAttr, NormalAndHighAddCycleAccurateMode) {
  TempDir d;
  WriteFullPmu(d);
  auto normal = BuildPtAttr(Read(d), Opts("normal"));
  ASSERT_THAT(normal, HasValue());
  // low with cyc=1 (bit 1), cyc_thresh=1 (bit 19), mtc_period=0.
  EXPECT_EQ(normal->attr.config, 0x0300E601u - (3u << 14) + (1u << 1) + (1u << 19));
  EXPECT_TRUE(normal->timing.cyc);
  EXPECT_EQ(normal->timing.cyc_thresh, 1u);
  EXPECT_EQ(normal->timing.mtc_period, 0u);
  auto high = BuildPtAttr(Read(d), Opts("high"));
  ASSERT_THAT(high, HasValue());
  EXPECT_EQ(high->attr.config, normal->attr.config | (1u << 11));
  EXPECT_TRUE(high->timing.noretcomp);
}

TEST(BuildPtAttr, ScopeMapsToExcludeBits) {
  TempDir d;
  WriteFullPmu(d);
  PtAttrOptions o = Opts("low");
  o.trace_kernel = true;
  auto both = BuildPtAttr(Read(d), o);
  ASSERT_THAT(both, HasValue());
  EXPECT_EQ(both->attr.exclude_kernel, 0u);
  EXPECT_EQ(both->attr.exclude_user, 0u);
  o.trace_user = false;
  auto kernel = BuildPtAttr(Read(d), o);
  ASSERT_THAT(kernel, HasValue());
  EXPECT_EQ(kernel->attr.exclude_kernel, 0u);
  EXPECT_EQ(kernel->attr.exclude_user, 1u);
}

TEST(BuildPtAttr, FullExecutionSetsWatermark) {
  TempDir d;
  WriteFullPmu(d);
  PtAttrOptions o = Opts("low");
  o.full_execution = true;
  o.aux_size = 4 << 20;
  o.enable_on_exec = true;
  auto attr = BuildPtAttr(Read(d), o);
  ASSERT_THAT(attr, HasValue());
  EXPECT_EQ(attr->attr.aux_watermark, 1u << 20);
  EXPECT_EQ(attr->attr.enable_on_exec, 1u);
}

TEST(BuildPtAttr, NoPsbCycDowngradesNormalToLowWithWarning) {
  TempDir d;
  WriteFullPmu(d);
  d.Write(std::string(kDev) + "caps/psb_cyc", "0\n");
  auto attr = BuildPtAttr(Read(d), Opts("normal"));
  ASSERT_THAT(attr, HasValue());
  EXPECT_FALSE(attr->timing.cyc);
  ASSERT_EQ(attr->warnings.size(), 1u);
  EXPECT_THAT(attr->warnings[0], HasSubstr("about 1us"));
  // No psb_period without psb_cyc (the kernel would reject it).
  EXPECT_EQ(attr->attr.config & (0xfu << 24), 0u);
  EXPECT_EQ(attr->attr.config, 0x0000E601u);
}

TEST(BuildPtAttr, CustomCycWithoutPsbCycIsAnError) {
  TempDir d;
  WriteFullPmu(d);
  d.Write(std::string(kDev) + "caps/psb_cyc", "0\n");
  auto timing = ParseTiming("custom:cyc=1");
  ASSERT_THAT(timing, HasValue());
  PtAttrOptions o;
  o.timing = *timing;
  EXPECT_THAT(BuildPtAttr(Read(d), o), HasErrorContaining("cyc=1 needs caps/psb_cyc"));
}

TEST(BuildPtAttr, CustomPeriodsValidatedAgainstCaps) {
  TempDir d;
  WriteFullPmu(d);
  PtAttrOptions o;
  o.timing = *ParseTiming("custom:mtc_period=1");
  EXPECT_THAT(BuildPtAttr(Read(d), o),
              HasErrorContaining("mtc_period=1 is not supported by this CPU (caps/mtc_periods "
                                 "allows: 0,3,6,9)"));
  o.timing = *ParseTiming("custom:psb_period=9");
  EXPECT_THAT(BuildPtAttr(Read(d), o), HasErrorContaining("psb_period=9 is not supported"));
  o.timing = *ParseTiming("custom:cyc=1,cyc_thresh=4,mtc_period=6,psb_period=5,noretcomp=1");
  auto ok = BuildPtAttr(Read(d), o);
  ASSERT_THAT(ok, HasValue());
  EXPECT_EQ((ok->attr.config >> 19) & 0xf, 4u);
  EXPECT_EQ((ok->attr.config >> 14) & 0xf, 6u);
  EXPECT_EQ((ok->attr.config >> 24) & 0xf, 5u);
  EXPECT_EQ((ok->attr.config >> 11) & 1, 1u);
  o.timing = *ParseTiming("custom:cyc_thresh=2");
  EXPECT_THAT(BuildPtAttr(Read(d), o),
              HasErrorContaining("cyc_thresh only makes sense with cyc=1"));
}

TEST(BuildPtAttr, OddBitLayoutIsFollowedNotAssumed) {
  // A made-up layout: terms moved and one split across two ranges.
  TempDir d;
  d.Write(std::string(kDev) + "type", "42\n");
  d.Write(std::string(kDev) + "format/tsc", "config:40");
  d.Write(std::string(kDev) + "format/mtc", "config:33");
  d.Write(std::string(kDev) + "format/mtc_period", "config:50-51,60-61");
  d.Write(std::string(kDev) + "caps/mtc", "1\n");
  d.Write(std::string(kDev) + "caps/mtc_periods", "ff\n");  // 0..7
  auto attr = BuildPtAttr(Read(d), Opts("low"));
  ASSERT_THAT(attr, HasValue());
  EXPECT_EQ(attr->attr.type, 42u);
  // tsc, mtc, mtc_period=3 -> low two bits into 50-51.
  EXPECT_EQ(attr->attr.config, (1ull << 40) | (1ull << 33) | (3ull << 50));
  PtAttrOptions o;
  o.timing = *ParseTiming("custom:mtc_period=6");  // 0b0110: 2 into 50-51, 1 into 60-61
  auto six = BuildPtAttr(Read(d), o);
  ASSERT_THAT(six, HasValue());
  EXPECT_EQ(six->attr.config, (1ull << 40) | (1ull << 33) | (2ull << 50) | (1ull << 60));
}

// caps/mtc without any advertised period (caps/mtc_periods 0, seen on some
// VMs): pt_event_valid() refuses mtc, so it stays off; an explicit mtc=1
// says why it was dropped.
TEST(BuildPtAttr, NoMtcWithoutMtcPeriods) {
  TempDir d;
  auto pmu = ::ptsnap::testing::SkylakeIntelPt();
  pmu.caps["mtc_periods"] = "0";
  ::ptsnap::testing::WriteIntelPt(d, pmu);
  for (const char* preset : {"low", "normal", "high"}) {
    auto attr = BuildPtAttr(Read(d), Opts(preset));
    ASSERT_THAT(attr, HasValue()) << preset;
    EXPECT_FALSE(attr->timing.mtc) << preset;
    EXPECT_EQ(attr->timing.mtc_period, 0u) << preset;
    EXPECT_EQ(attr->attr.config & (1ull << 9), 0u) << preset;     // mtc
    EXPECT_EQ(attr->attr.config & (0xfull << 14), 0u) << preset;  // mtc_period
    EXPECT_THAT(attr->warnings, IsEmpty()) << preset;
  }
  PtAttrOptions o;
  o.timing = *ParseTiming("custom:mtc=1");
  auto custom = BuildPtAttr(Read(d), o);
  ASSERT_THAT(custom, HasValue());
  EXPECT_FALSE(custom->timing.mtc);
  EXPECT_EQ(custom->attr.config & (1ull << 9), 0u);
  ASSERT_EQ(custom->warnings.size(), 1u);
  EXPECT_THAT(custom->warnings[0], HasSubstr("caps/mtc_periods is 0"));
}

TEST(BuildPtAttr, MissingPmuOrTscTermAreErrors) {
  TempDir d;
  EXPECT_THAT(BuildPtAttr(Read(d), Opts("low")), HasErrorContaining("no intel_pt PMU"));
  d.Write(std::string(kDev) + "type", "8\n");
  d.Write(std::string(kDev) + "format/pt", "config:0");
  EXPECT_THAT(BuildPtAttr(Read(d), Opts("low")), HasErrorContaining("no 'tsc' format term"));
}

TEST(ParseTiming, PresetsCustomAndSexp) {
  EXPECT_EQ(ParseTiming("High")->preset, "high");
  auto c = ParseTiming("custom:cyc=true, mtc_period=0,noretcomp=0");
  ASSERT_THAT(c, HasValue());
  EXPECT_EQ(c->preset, "custom");
  EXPECT_EQ(c->cyc, true);
  EXPECT_EQ(c->mtc_period, 0u);
  EXPECT_EQ(c->noretcomp, false);
  auto s = ParseTiming("(Custom (cyc true) (cyc_thresh 2) (psb_period 1))");
  ASSERT_THAT(s, HasValue());
  EXPECT_EQ(s->cyc, true);
  EXPECT_EQ(s->cyc_thresh, 2u);
  EXPECT_EQ(s->psb_period, 1u);
  EXPECT_THAT(ParseTiming("custom:bogus=1"), HasErrorContaining("unknown key 'bogus'"));
  EXPECT_THAT(ParseTiming("custom:cyc=maybe"), HasErrorContaining("not a boolean"));
  EXPECT_THAT(ParseTiming("custom:mtc_period=99"), HasErrorContaining("0 to 15"));
  EXPECT_THAT(ParseTiming("fast"), HasErrorContaining("not low, normal, high"));
}

TEST(BuildTrackingAttr, CarriesSidebandFlags) {
  perf_event_attr a = BuildTrackingAttr(false, true);
  EXPECT_EQ(a.type, PERF_TYPE_SOFTWARE);
  EXPECT_EQ(a.config, PERF_COUNT_SW_DUMMY);
  EXPECT_EQ(a.mmap, 1u);
  EXPECT_EQ(a.mmap2, 1u);
  EXPECT_EQ(a.comm, 1u);
  EXPECT_EQ(a.comm_exec, 1u);
  EXPECT_EQ(a.task, 1u);
  EXPECT_EQ(a.context_switch, 1u);
  EXPECT_EQ(a.sample_id_all, 1u);
  EXPECT_EQ(a.sample_type, trace::kSampleType);
  EXPECT_EQ(a.enable_on_exec, 1u);
  EXPECT_EQ(a.ksymbol, 0u);
  EXPECT_EQ(a.text_poke, 0u);
  perf_event_attr k = BuildTrackingAttr(true, false);
  EXPECT_EQ(k.ksymbol, 1u);
  EXPECT_EQ(k.text_poke, 1u);
  EXPECT_EQ(k.exclude_kernel, 0u);
}

sys::KernelVersion Kernel(std::string_view release) { return *sys::ParseKernelRelease(release); }

// A kernel refuses attr bits it does not know (EINVAL from perf_copy_attr):
// ksymbol needs 5.1, text_poke 5.9.
TEST(BuildTrackingAttr, KernelBitsFollowTheKernelVersion) {
  perf_event_attr old = BuildTrackingAttr(true, false, Kernel("4.19.0-25-amd64"));
  EXPECT_EQ(old.ksymbol, 0u);
  EXPECT_EQ(old.text_poke, 0u);
  for (const char* release : {"5.4.0-1103-aws", "5.8.18"}) {
    perf_event_attr a = BuildTrackingAttr(true, false, Kernel(release));
    EXPECT_EQ(a.ksymbol, 1u) << release;
    EXPECT_EQ(a.text_poke, 0u) << release;
    EXPECT_EQ(a.exclude_kernel, 0u) << release;
  }
  for (const char* release : {"5.9.0", "6.13.2-arch1"}) {
    perf_event_attr a = BuildTrackingAttr(true, false, Kernel(release));
    EXPECT_EQ(a.ksymbol, 1u) << release;
    EXPECT_EQ(a.text_poke, 1u) << release;
  }
  // User scope never sets them, whatever the kernel.
  perf_event_attr user = BuildTrackingAttr(false, false, Kernel("6.13.0"));
  EXPECT_EQ(user.ksymbol, 0u);
  EXPECT_EQ(user.text_poke, 0u);
}

TEST(BuildBreakpointAttr, ExecuteBreakpointOfLongLength) {
  perf_event_attr a = BuildBreakpointAttr(0x401136);
  EXPECT_EQ(a.type, PERF_TYPE_BREAKPOINT);
  EXPECT_EQ(a.bp_type, HW_BREAKPOINT_X);
  EXPECT_EQ(a.bp_addr, 0x401136u);
  EXPECT_EQ(a.bp_len, sizeof(long));
  EXPECT_EQ(a.sample_period, 1u);
  EXPECT_EQ(a.wakeup_events, 1u);
  EXPECT_EQ(a.sample_type, kBreakpointSampleType);
  EXPECT_EQ(a.exclude_kernel, 1u);
}

}  // namespace
}  // namespace ptsnap::perf
