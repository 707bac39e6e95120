#include "sys/pmu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fake_intel_pt.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseFormatTerm, SingleBitAndRange) {
  auto t = ParseFormatTerm("config:0\n");
  ASSERT_THAT(t, HasValue());
  EXPECT_EQ(t->word, ConfigWord::kConfig);
  EXPECT_THAT(t->ranges, ElementsAre(BitRange{0, 0}));
  auto r = ParseFormatTerm("config:14-17");
  ASSERT_THAT(r, HasValue());
  EXPECT_THAT(r->ranges, ElementsAre(BitRange{14, 17}));
  EXPECT_EQ(r->width(), 4);
}

TEST(ParseFormatTerm, OtherWordsAndLists) {
  auto t = ParseFormatTerm("config1:0-31");
  ASSERT_THAT(t, HasValue());
  EXPECT_EQ(t->word, ConfigWord::kConfig1);
  auto u = ParseFormatTerm("config2:32-63");
  ASSERT_THAT(u, HasValue());
  EXPECT_EQ(u->word, ConfigWord::kConfig2);
  auto l = ParseFormatTerm("config:0,2");
  ASSERT_THAT(l, HasValue());
  EXPECT_THAT(l->ranges, ElementsAre(BitRange{0, 0}, BitRange{2, 2}));
  auto m = ParseFormatTerm("config:0-7,32-35");
  ASSERT_THAT(m, HasValue());
  EXPECT_EQ(m->width(), 12);
}

TEST(ParseFormatTerm, RejectsGarbage) {
  EXPECT_THAT(ParseFormatTerm(""), HasError());
  EXPECT_THAT(ParseFormatTerm("config"), HasErrorContaining("expected 'config:"));
  EXPECT_THAT(ParseFormatTerm("config3:1"), HasErrorContaining("unknown config word"));
  EXPECT_THAT(ParseFormatTerm("config:"), HasErrorContaining("no bits"));
  EXPECT_THAT(ParseFormatTerm("config:64"), HasErrorContaining("out of range"));
  EXPECT_THAT(ParseFormatTerm("config:5-2"), HasErrorContaining("backwards"));
  EXPECT_THAT(ParseFormatTerm("config:0-3,2"), HasErrorContaining("overlaps"));
  EXPECT_THAT(ParseFormatTerm("config:a-b"), HasErrorContaining("bad bit range"));
  EXPECT_THAT(ParseFormatTerm("config:1,"), HasError());
}

TEST(ParseCapValue, HexWithAndWithoutPrefix) {
  EXPECT_EQ(ParseCapValue("1\n").value_or(99), 1u);
  EXPECT_EQ(ParseCapValue("249\n").value_or(0), 0x249u);
  EXPECT_EQ(ParseCapValue("0x3f").value_or(0), 0x3fu);
  EXPECT_THAT(ParseCapValue("zz"), HasErrorContaining("not a hex number"));
  EXPECT_THAT(ParseCapValue(""), HasError());
}

TEST(ParseTscArtRatio, Pair) {
  auto r = ParseTscArtRatio("200:2\n");
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->numerator, 200u);
  EXPECT_EQ(r->denominator, 2u);
  EXPECT_THAT(ParseTscArtRatio("200"), HasError());
  EXPECT_THAT(ParseTscArtRatio("a:b"), HasError());
}

void WriteSkylakePt(const TempDir& dir) {
  ::ptsnap::testing::WriteIntelPt(dir, ::ptsnap::testing::SkylakeIntelPt());
}

TEST(ReadPmu, ReadsEverything) {
  TempDir dir;
  WriteSkylakePt(dir);
  PmuInfo pmu = ReadPmu(base::RootPath(dir.path()));
  EXPECT_TRUE(pmu.present);
  EXPECT_EQ(pmu.type, 8u);
  EXPECT_EQ(pmu.format.size(), 12u);
  EXPECT_EQ(pmu.Cap("psb_cyc"), 1u);
  EXPECT_EQ(pmu.Cap("mtc_periods"), 0x249u);
  EXPECT_EQ(pmu.Cap("missing"), 0u);
  EXPECT_EQ(pmu.nr_addr_filters, 2u);
  EXPECT_EQ(pmu.max_nonturbo_ratio, 34u);
  ASSERT_TRUE(pmu.tsc_art_ratio.has_value());
  EXPECT_EQ(pmu.tsc_art_ratio->numerator, 200u);
  EXPECT_TRUE(pmu.warnings.empty()) << pmu.warnings.front();
}

TEST(ReadPmu, AbsentPmu) {
  TempDir dir;
  PmuInfo pmu = ReadPmu(base::RootPath(dir.path()));
  EXPECT_FALSE(pmu.present);
  EXPECT_TRUE(pmu.warnings.empty());
}

TEST(ReadPmu, GarbageFilesBecomeWarningsNamingTheFile) {
  TempDir dir;
  WriteSkylakePt(dir);
  const std::string d = ::ptsnap::testing::kIntelPtDir;
  dir.Write(d + "type", "eight\n");
  dir.Write(d + "format/cyc", "config:99\n");
  dir.Write(d + "caps/psb_cyc", "\x01\xff garbage");
  dir.Write(d + "tsc_art_ratio", "nonsense");
  PmuInfo pmu = ReadPmu(base::RootPath(dir.path()));
  EXPECT_TRUE(pmu.present);
  EXPECT_FALSE(pmu.type.has_value());
  EXPECT_FALSE(pmu.HasTerm("cyc"));
  EXPECT_TRUE(pmu.HasTerm("mtc"));
  EXPECT_FALSE(pmu.caps.count("psb_cyc"));
  std::string all;
  for (const auto& w : pmu.warnings) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("intel_pt/type"));
  EXPECT_THAT(all, HasSubstr("intel_pt/format/cyc"));
  EXPECT_THAT(all, HasSubstr("intel_pt/caps/psb_cyc"));
  EXPECT_THAT(all, HasSubstr("intel_pt/tsc_art_ratio"));
}

TEST(SetTerm, PlacesValuesByName) {
  TempDir dir;
  WriteSkylakePt(dir);
  PmuInfo pmu = ReadPmu(base::RootPath(dir.path()));
  uint64_t config = 0;
  // perf's default: tsc,mtc,mtc_period=3,psb_period=3,pt,branch = 0x0300E601.
  for (const char* flag : {"pt", "mtc", "tsc", "branch"}) {
    ASSERT_THAT(SetTerm(pmu, flag, 1, &config), HasValue());
  }
  ASSERT_THAT(SetTerm(pmu, "mtc_period", 3, &config), HasValue());
  ASSERT_THAT(SetTerm(pmu, "psb_period", 3, &config), HasValue());
  EXPECT_EQ(config, 0x0300E601u);
  // Overwrites, not ORs.
  ASSERT_THAT(SetTerm(pmu, "mtc_period", 0, &config), HasValue());
  EXPECT_EQ(config, 0x03002601u);
  EXPECT_THAT(SetTerm(pmu, "mtc_period", 16, &config),
              HasErrorContaining("does not fit in 4 bits"));
  // A term intel_pt does not have (it belongs to other PMUs).
  EXPECT_THAT(SetTerm(pmu, "event", 1, &config), HasErrorContaining("no format term"));
}

TEST(SetTerm, ListsAndOtherWords) {
  PmuInfo pmu;
  pmu.name = "fake";
  pmu.format["split"] = *ParseFormatTerm("config:0,2");
  pmu.format["hi"] = *ParseFormatTerm("config1:60-63");
  uint64_t config = 0;
  ASSERT_THAT(SetTerm(pmu, "split", 3, &config), HasValue());
  EXPECT_EQ(config, 0b101u);
  EXPECT_THAT(SetTerm(pmu, "hi", 1, &config), HasErrorContaining("not in attr.config"));
  perf_event_attr attr{};
  ASSERT_THAT(SetTermInAttr(pmu, "hi", 0xf, &attr), HasValue());
  EXPECT_EQ(attr.config1, 0xf000000000000000u);
  FormatTerm full = *ParseFormatTerm("config2:0-63");
  uint64_t w = 0;
  ASSERT_THAT(PlaceValue(full, ~uint64_t{0}, &w), HasValue());
  EXPECT_EQ(w, ~uint64_t{0});
}

}  // namespace
}  // namespace ptsnap::sys
