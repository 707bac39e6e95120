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

// --ptw: the ptw and fup_on_ptw terms at the bits sysfs names, nothing else
// changed; off by default.
TEST(BuildPtAttr, PtwSetsPtwAndFupOnPtwFromSysfsFormat) {
  TempDir d;
  WriteFullPmu(d);
  d.Write(std::string(kDev) + "caps/ptwrite", "1\n");
  PtAttrOptions o = Opts("low");
  auto off = BuildPtAttr(Read(d), o);
  ASSERT_THAT(off, HasValue());
  EXPECT_EQ(off->attr.config & ((1u << 12) | (1u << 5)), 0u) << "off unless asked for";
  o.ptw = true;
  auto on = BuildPtAttr(Read(d), o);
  ASSERT_THAT(on, HasValue());
  EXPECT_EQ(on->attr.config, off->attr.config | (1u << 12) | (1u << 5));
  // The bits come from format/, not from the Skylake layout.
  d.Write(std::string(kDev) + "format/ptw", "config:30\n");
  d.Write(std::string(kDev) + "format/fup_on_ptw", "config:31\n");
  auto moved = BuildPtAttr(Read(d), o);
  ASSERT_THAT(moved, HasValue());
  EXPECT_EQ(moved->attr.config, off->attr.config | (1u << 30) | (1u << 31));
}

TEST(BuildPtAttr, PtwWithoutCapsPtwriteIsAnErrorNamingTheCauseAndTheFix) {
  TempDir d;
  WriteFullPmu(d);  // Skylake: caps/ptwrite 0
  PtAttrOptions o = Opts("low");
  o.ptw = true;
  auto attr = BuildPtAttr(Read(d), o);
  EXPECT_THAT(attr, HasErrorContaining("--ptw needs the PTWRITE instruction, which this CPU lacks "
                                       "(intel_pt's caps/ptwrite is 0 or missing)"));
  EXPECT_THAT(attr, HasErrorContaining("drop --ptw; ptsnap_mark()"));
  EXPECT_THAT(attr, HasErrorContaining("emulated encoding"));
  TempDir broadwell;
  ::ptsnap::testing::WriteIntelPt(broadwell, ::ptsnap::testing::BroadwellIntelPt());  // no file
  EXPECT_THAT(BuildPtAttr(Read(broadwell), o), HasErrorContaining("caps/ptwrite is 0 or missing"));
}

TEST(BuildPtAttr, PtwWithoutItsFormatTermNamesTheTerm) {
  TempDir d;
  auto pt = ::ptsnap::testing::SkylakeIntelPt();
  pt.caps["ptwrite"] = "1";
  pt.format.erase("fup_on_ptw");
  ::ptsnap::testing::WriteIntelPt(d, pt);
  PtAttrOptions o = Opts("low");
  o.ptw = true;
  EXPECT_THAT(BuildPtAttr(Read(d), o), HasErrorContaining("no 'fup_on_ptw' format term"));
}

// --pwr-evt: the pwr_evt term at the bit sysfs names, nothing else changed;
// off by default.
TEST(BuildPtAttr, PwrEvtSetsPwrEvtFromSysfsFormat) {
  TempDir d;
  WriteFullPmu(d);
  d.Write(std::string(kDev) + "caps/power_event_trace", "1\n");
  PtAttrOptions o = Opts("low");
  auto off = BuildPtAttr(Read(d), o);
  ASSERT_THAT(off, HasValue());
  EXPECT_EQ(off->attr.config & (1u << 4), 0u) << "off unless asked for";
  o.pwr_evt = true;
  auto on = BuildPtAttr(Read(d), o);
  ASSERT_THAT(on, HasValue());
  EXPECT_EQ(on->attr.config, off->attr.config | (1u << 4));
  // The bit comes from format/, not from the Skylake layout.
  d.Write(std::string(kDev) + "format/pwr_evt", "config:30\n");
  auto moved = BuildPtAttr(Read(d), o);
  ASSERT_THAT(moved, HasValue());
  EXPECT_EQ(moved->attr.config, off->attr.config | (1u << 30));
}

TEST(BuildPtAttr, PwrEvtWithoutCapsPowerEventTraceIsAnErrorNamingTheCauseAndTheFix) {
  TempDir d;
  WriteFullPmu(d);  // Skylake: caps/power_event_trace 0
  PtAttrOptions o = Opts("low");
  o.pwr_evt = true;
  auto attr = BuildPtAttr(Read(d), o);
  EXPECT_THAT(attr, HasErrorContaining("--pwr-evt needs Power Event Trace, which this CPU lacks "
                                       "(intel_pt's caps/power_event_trace is 0 or missing)"));
  EXPECT_THAT(attr, HasErrorContaining("record without --pwr-evt"));
  TempDir broadwell;
  ::ptsnap::testing::WriteIntelPt(broadwell, ::ptsnap::testing::BroadwellIntelPt());
  EXPECT_THAT(BuildPtAttr(Read(broadwell), o),
              HasErrorContaining("caps/power_event_trace is 0 or missing"));
}

TEST(BuildPtAttr, PwrEvtWithoutItsFormatTermNamesTheTerm) {
  TempDir d;
  auto pt = ::ptsnap::testing::SkylakeIntelPt();
  pt.caps["power_event_trace"] = "1";
  pt.format.erase("pwr_evt");
  ::ptsnap::testing::WriteIntelPt(d, pt);
  PtAttrOptions o = Opts("low");
  o.pwr_evt = true;
  EXPECT_THAT(BuildPtAttr(Read(d), o), HasErrorContaining("no 'pwr_evt' format term"));
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

TEST(ParseTiming, SampleForms) {
  auto n = ParseTiming("sample:5000");
  ASSERT_THAT(n, HasValue());
  EXPECT_EQ(n->preset, "sample");
  EXPECT_EQ(n->sample_freq, 5000u);
  auto sexp = ParseTiming("(Sample (freq 250))");
  ASSERT_THAT(sexp, HasValue());
  EXPECT_EQ(sexp->preset, "sample");
  EXPECT_EQ(sexp->sample_freq, 250u);
  EXPECT_THAT(ParseTiming("sample"), HasErrorContaining("sample:N, e.g. sample:5000"));
  EXPECT_THAT(ParseTiming("sample:0"), HasErrorContaining("needs a frequency"));
  EXPECT_THAT(ParseTiming("sample:fast"), HasErrorContaining("needs a frequency"));
  EXPECT_THAT(ParseTiming("(Sample (period 3))"), HasErrorContaining("(Sample (freq N))"));
  EXPECT_THAT(ParseTiming("fast"), HasErrorContaining("or sample:N"));
}

TEST(BuildPtAttr, SamplePresetNeedsSampling) {
  TempDir d;
  WriteFullPmu(d);
  PtAttrOptions o;
  o.timing = *ParseTiming("sample:100");
  EXPECT_THAT(BuildPtAttr(Read(d), o),
              HasErrorContaining("--timer-resolution sample:N can only be used with --sampling "
                                 "(did you forget --sampling?)"));
}

TEST(SamplingFrequency, MagicTracesPresetsCappedAtTheMaxRate) {
  std::vector<std::string> w;
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("low"), 100000, &w), 1000u);
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("normal"), 100000, &w), 10000u);
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("high"), 31750, &w), 31750u);
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("sample:777"), 100000, &w), 777u);
  EXPECT_THAT(w, IsEmpty());
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("sample:200000"), 100000, &w), 100000u);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("200000 samples per second is above "
                              "kernel.perf_event_max_sample_rate (100000)"));
  // normal on a kernel that lowered its rate (perf_event_max_sample_rate
  // drops when interrupts take long).
  EXPECT_EQ(*SamplingFrequency(*ParseTiming("normal"), 4000, &w), 4000u);
  EXPECT_THAT(SamplingFrequency(*ParseTiming("custom:cyc=1"), 100000, &w),
              HasErrorContaining("cannot be used with --sampling"));
}

TEST(ChooseCallgraph, MagicTracesDefaultAndSpellings) {
  auto lbr = ChooseCallgraph("", true);
  ASSERT_THAT(lbr, HasValue());
  EXPECT_EQ(lbr->mode, CallgraphMode::kLbr);
  EXPECT_THAT(lbr->note, HasSubstr("defaulting to lbr, which may lose data and has limited call "
                                   "stack depth"));
  auto dwarf = ChooseCallgraph("", false);
  ASSERT_THAT(dwarf, HasValue());
  EXPECT_EQ(dwarf->mode, CallgraphMode::kDwarf);
  EXPECT_THAT(dwarf->note,
              HasSubstr("defaulting to dwarf, which may have high overhead and decoding time"));
  EXPECT_EQ(ChooseCallgraph("fp", false)->mode, CallgraphMode::kFp);
  EXPECT_THAT(ChooseCallgraph("fp", false)->note, IsEmpty());
  EXPECT_EQ(ChooseCallgraph("Dwarf", false)->mode, CallgraphMode::kDwarf);
  EXPECT_EQ(ChooseCallgraph("(Lbr)", true)->mode, CallgraphMode::kLbr);
  auto no_stitch = ChooseCallgraph("lbr-no-stitch", true);
  ASSERT_THAT(no_stitch, HasValue());
  EXPECT_EQ(no_stitch->mode, CallgraphMode::kLbr);
  EXPECT_THAT(no_stitch->note, HasSubstr("records as lbr"));
  EXPECT_THAT(ChooseCallgraph("lbr", false),
              HasErrorContaining("no LBR call-stack support (needs a hardware PMU and the pdcm "
                                 "flag on every CPU in /proc/cpuinfo); use --callgraph-mode fp or "
                                 "dwarf"));
  EXPECT_THAT(ChooseCallgraph("stack", false),
              HasErrorContaining("unknown mode 'stack'; valid: lbr, lbr-no-stitch, fp, dwarf"));
}

// sample_type per callgraph mode, as docs/trace-format.md lays samples out.
TEST(BuildSamplingAttr, SampleTypePerCallgraphMode) {
  SamplingAttrOptions o;
  o.frequency = 10000;
  o.callgraph = CallgraphMode::kFp;
  perf_event_attr fp = BuildSamplingAttr(o);
  EXPECT_EQ(fp.type, PERF_TYPE_SOFTWARE);
  EXPECT_EQ(fp.config, PERF_COUNT_SW_CPU_CLOCK);
  EXPECT_EQ(fp.freq, 1u);
  EXPECT_EQ(fp.sample_freq, 10000u);
  // IDENTIFIER|IP|TID|TIME|CPU|PERIOD|CALLCHAIN, and REGS_USER|STACK_USER
  // for the decoder's leaf mend (perf's -g has neither: docs/perf-interop.md).
  EXPECT_EQ(fp.sample_type, 0x131a7u);
  EXPECT_EQ(fp.exclude_callchain_user, 0u);
  EXPECT_EQ(fp.sample_regs_user, 0x1c0u);  // PERF_REG_X86_BP, SP, IP
  EXPECT_EQ(fp.sample_stack_user, 512u);
  EXPECT_EQ(fp.branch_sample_type, 0u);

  o.callgraph = CallgraphMode::kDwarf;
  perf_event_attr dwarf = BuildSamplingAttr(o);
  EXPECT_EQ(dwarf.sample_type, 0x131a7u);  // + REGS_USER|STACK_USER
  EXPECT_EQ(dwarf.exclude_callchain_user, 1u);
  // AX..R15 but DS, ES, FS, GS: perf's PERF_REGS_MASK.
  EXPECT_EQ(dwarf.sample_regs_user, 0xff0fffu);
  EXPECT_EQ(__builtin_popcountll(dwarf.sample_regs_user), 20);
  EXPECT_EQ(dwarf.sample_stack_user, 8192u);

  o.callgraph = CallgraphMode::kLbr;
  o.event = SamplingEvent::kCycles;
  perf_event_attr lbr = BuildSamplingAttr(o);
  EXPECT_EQ(lbr.type, PERF_TYPE_HARDWARE);
  EXPECT_EQ(lbr.config, PERF_COUNT_HW_CPU_CYCLES);
  EXPECT_EQ(lbr.sample_type, 0x109a7u);  // + BRANCH_STACK
  EXPECT_EQ(lbr.branch_sample_type,
            static_cast<uint64_t>(PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_CALL_STACK));
  EXPECT_EQ(lbr.exclude_callchain_user, 0u);
}

// One event carries samples and sideband: the tracking bits, and a trailer
// that is sideband.data's.
TEST(BuildSamplingAttr, CarriesTheSidebandBitsAndTheScope) {
  SamplingAttrOptions o;
  o.enable_on_exec = true;
  perf_event_attr a = BuildSamplingAttr(o);
  EXPECT_EQ(a.mmap, 1u);
  EXPECT_EQ(a.mmap2, 1u);
  EXPECT_EQ(a.comm, 1u);
  EXPECT_EQ(a.comm_exec, 1u);
  EXPECT_EQ(a.task, 1u);
  EXPECT_EQ(a.context_switch, 1u);
  EXPECT_EQ(a.sample_id_all, 1u);
  EXPECT_EQ(a.disabled, 1u);
  EXPECT_EQ(a.enable_on_exec, 1u);
  EXPECT_EQ(a.exclude_kernel, 1u);
  EXPECT_EQ(a.exclude_user, 0u);
  EXPECT_EQ(a.exclude_hv, 1u);
  EXPECT_EQ(a.ksymbol, 0u);
  // The sample_id trailer keeps the bits among TID, TIME, ID, STREAM_ID,
  // CPU, IDENTIFIER: exactly kSampleType's.
  constexpr uint64_t kTrailerBits = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
                                    PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
                                    PERF_SAMPLE_IDENTIFIER;
  EXPECT_EQ(a.sample_type & kTrailerBits, trace::kSampleType);
  o.trace_kernel = true;
  o.trace_user = false;
  o.enable_on_exec = false;
  o.kernel = sys::KernelVersion{6, 1, 0, "6.1.0"};
  perf_event_attr k = BuildSamplingAttr(o);
  EXPECT_EQ(k.exclude_kernel, 0u);
  EXPECT_EQ(k.ksymbol, 1u);
  EXPECT_EQ(k.text_poke, 1u);
  EXPECT_EQ(k.exclude_user, 1u);
  EXPECT_EQ(k.enable_on_exec, 0u);
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

// perf's text_poke dummy (record__config_text_poke): what the kernel
// delivers to it and when it starts are what a user would notice.
TEST(BuildKernelSidebandAttr, ACpuWideDummyForKsymbolAndTextPokeEnabledFromTheOpen) {
  auto a = BuildKernelSidebandAttr(Kernel("6.13.0"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->type, PERF_TYPE_SOFTWARE);
  EXPECT_EQ(a->config, PERF_COUNT_SW_DUMMY);
  EXPECT_EQ(a->ksymbol, 1u);
  EXPECT_EQ(a->text_poke, 1u);
  // Enabled at the open (perf's `immediate`): a patch between the kcore
  // copy and the start of tracing is recorded.
  EXPECT_EQ(a->disabled, 0u);
  EXPECT_EQ(a->enable_on_exec, 0u);
  // Only the two record types: no task's mmaps, comms or switches (those
  // come from the per-thread tracking events; here they would be every
  // task's on the CPU).
  EXPECT_EQ(a->mmap, 0u);
  EXPECT_EQ(a->mmap2, 0u);
  EXPECT_EQ(a->comm, 0u);
  EXPECT_EQ(a->task, 0u);
  EXPECT_EQ(a->context_switch, 0u);
  // The trailer every record of sideband.data carries (TIME orders them).
  EXPECT_EQ(a->sample_id_all, 1u);
  EXPECT_EQ(a->sample_type, trace::kSampleType);
  EXPECT_EQ(a->sample_period, 1u);
  EXPECT_EQ(a->exclude_kernel, 1u);  // dummy:u, as perf's
}

TEST(BuildKernelSidebandAttr, BitsFollowTheKernelVersion) {
  EXPECT_FALSE(BuildKernelSidebandAttr(Kernel("4.19.0-25-amd64")).has_value());
  for (const char* release : {"5.4.0-1103-aws", "5.8.18"}) {
    auto a = BuildKernelSidebandAttr(Kernel(release));
    ASSERT_TRUE(a.has_value()) << release;
    EXPECT_EQ(a->ksymbol, 1u) << release;
    EXPECT_EQ(a->text_poke, 0u) << release;
  }
  auto unknown = BuildKernelSidebandAttr(std::nullopt);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->text_poke, 1u);
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

namespace ptsnap::perf {
namespace {

sys::PmuInfo UprobePmu() {
  sys::PmuInfo pmu;
  pmu.name = "uprobe";
  pmu.present = true;
  pmu.type = 8;
  pmu.format["retprobe"] = *sys::ParseFormatTerm("config:0");
  return pmu;
}

TEST(BuildUprobeAttr, EntryProbeNamesTheFileAndOffset) {
  const char* path = "/usr/bin/server";
  auto a = BuildUprobeAttr(UprobePmu(), path, 0x1139, false, true);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->type, 8u);
  EXPECT_EQ(a->config, 0u);
  EXPECT_EQ(a->config1, reinterpret_cast<uintptr_t>(path));
  EXPECT_EQ(a->config2, 0x1139u);
  EXPECT_EQ(a->sample_period, 1u);
  EXPECT_EQ(a->sample_type, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER);
  EXPECT_EQ(a->sample_regs_user, uint64_t{1} << 7);  // PERF_REG_X86_SP
  EXPECT_EQ(a->wakeup_events, 1u);
  EXPECT_EQ(a->inherit, 1u);
  EXPECT_EQ(a->disabled, 0u);
}

TEST(BuildUprobeAttr, ReturnProbeSetsTheRetprobeFormatBit) {
  sys::PmuInfo pmu = UprobePmu();
  auto a = BuildUprobeAttr(pmu, "/x", 16, true, false);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->config, 1u);
  EXPECT_EQ(a->inherit, 0u);
  pmu.format["retprobe"] = *sys::ParseFormatTerm("config:5");
  EXPECT_EQ(BuildUprobeAttr(pmu, "/x", 16, true, false)->config, 32u);
}

TEST(BuildUprobeAttr, MissingPmuOrRetprobeTermIsAnError) {
  sys::PmuInfo none;
  EXPECT_THAT(BuildUprobeAttr(none, "/x", 0, false, false), HasErrorContaining("no uprobe PMU"));
  sys::PmuInfo pmu = UprobePmu();
  pmu.format.clear();
  EXPECT_TRUE(BuildUprobeAttr(pmu, "/x", 0, false, false));
  EXPECT_THAT(BuildUprobeAttr(pmu, "/x", 0, true, false),
              HasErrorContaining("no usable retprobe format term"));
}

// Linux 6.13's aux_action word: the u32 at byte 116, after aux_sample_size
// (uapi linux/perf_event.h: aux_start_paused bit 0, aux_pause 1, aux_resume
// 2), whatever the build's header calls it.
TEST(AuxAction, BitsSitInTheWordAfterAuxSampleSize) {
  perf_event_attr a{};
  SetAuxAction(a, kAuxPause);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&a);
  EXPECT_EQ(bytes[116], 2u);
  EXPECT_EQ(bytes[115], 0u);
  EXPECT_EQ(bytes[117], 0u);
  EXPECT_EQ(a.aux_sample_size, 0u);
  EXPECT_EQ(a.sig_data, 0u);
  EXPECT_EQ(AuxAction(a), kAuxPause);
  EXPECT_EQ(kAuxStartPaused | kAuxPause | kAuxResume, 7u);
}

TEST(AuxAction, OnlyLinux613AndLaterHaveIt) {
  EXPECT_FALSE(HasAuxPause(std::nullopt));
  EXPECT_FALSE(HasAuxPause(sys::KernelVersion{6, 12, 9}));
  EXPECT_TRUE(HasAuxPause(sys::KernelVersion{6, 13, 0}));
  EXPECT_TRUE(HasAuxPause(sys::KernelVersion{7, 0, 0}));
}

TEST(BuildPtAttr, StartPausedOnlyWhenAsked) {
  TempDir d;
  WriteFullPmu(d);
  auto plain = BuildPtAttr(Read(d), Opts("low"));
  ASSERT_THAT(plain, HasValue());
  EXPECT_EQ(AuxAction(plain->attr), 0u);  // kernels before 6.13 refuse any bit of it
  PtAttrOptions o = Opts("low");
  o.start_paused = true;
  auto paused = BuildPtAttr(Read(d), o);
  ASSERT_THAT(paused, HasValue());
  EXPECT_EQ(AuxAction(paused->attr), kAuxStartPaused);
  EXPECT_EQ(paused->attr.config, plain->attr.config);
}

TEST(BuildBreakpointAttr, PausesTheGroupsAuxOnlyWhenAsked) {
  EXPECT_EQ(AuxAction(BuildBreakpointAttr(0x401000)), 0u);
  perf_event_attr a = BuildBreakpointAttr(0x401000, true);
  EXPECT_EQ(AuxAction(a), kAuxPause);
  EXPECT_EQ(a.sample_period, 1u);  // every hit overflows, so every hit pauses
  EXPECT_EQ(a.bp_addr, 0x401000u);
}

TEST(BuildAuxActionUprobeAttr, EntryResumesReturnPauses) {
  auto entry = BuildAuxActionUprobeAttr(UprobePmu(), nullptr, 0x1139, false);
  ASSERT_TRUE(entry) << entry.error().ToString();
  EXPECT_EQ(AuxAction(*entry), kAuxResume);
  EXPECT_EQ(entry->type, 8u);
  EXPECT_EQ(entry->config, 0u);
  EXPECT_EQ(entry->config2, 0x1139u);
  EXPECT_EQ(entry->sample_period, 1u);
  EXPECT_EQ(entry->sample_type, 0u);  // never read: unmapped group members
  EXPECT_EQ(entry->wakeup_events, 0u);
  EXPECT_EQ(entry->inherit, 0u);
  EXPECT_EQ(entry->disabled, 0u);  // on with its group's leader
  auto ret = BuildAuxActionUprobeAttr(UprobePmu(), nullptr, 0x1139, true);
  ASSERT_TRUE(ret) << ret.error().ToString();
  EXPECT_EQ(AuxAction(*ret), kAuxPause);  // never both: the kernel's EINVAL
  EXPECT_EQ(ret->config, 1u);             // the retprobe format bit
  EXPECT_THAT(BuildAuxActionUprobeAttr(sys::PmuInfo{}, nullptr, 0, false),
              HasErrorContaining("no uprobe PMU"));
}

TEST(BuildTriggerUprobeAttr, AnEntryProbeThatSamplesLikeABreakpoint) {
  auto a = BuildTriggerUprobeAttr(UprobePmu(), "/bin/prog", 0x1139, false);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->type, 8u);
  EXPECT_EQ(a->config, 0u);  // entry, not the retprobe bit
  EXPECT_EQ(a->config2, 0x1139u);
  EXPECT_EQ(a->sample_type, kBreakpointSampleType);  // TriggerBreakpoints::Poll reads both alike
  EXPECT_EQ(a->sample_regs_user, 0u);
  EXPECT_EQ(a->sample_period, 1u);
  EXPECT_EQ(a->wakeup_events, 1u);
  EXPECT_EQ(a->exclude_kernel, 1u);
  EXPECT_EQ(a->disabled, 1u);  // armed by ENABLE or REFRESH
  EXPECT_EQ(AuxAction(*a), 0u);
  auto paused = BuildTriggerUprobeAttr(UprobePmu(), "/bin/prog", 0x1139, true);
  ASSERT_TRUE(paused) << paused.error().ToString();
  EXPECT_EQ(AuxAction(*paused), AuxAction(BuildBreakpointAttr(0x1139, true)));
}

}  // namespace
}  // namespace ptsnap::perf
