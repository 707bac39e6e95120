#include "export/perf_data.h"

#include <gmock/gmock.h>

#include <gtest/gtest.h>
#include <cstring>

#include "tests/support/result_matchers.h"

namespace ptsnap::exporter {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasErrorContaining;
using ::testing::ElementsAre;

std::string Build() {
  PerfDataWriter w;
  Attr a;
  a.type = 8;
  a.config = 0x2401;
  a.sample_type = 0x10087;
  a.flags = kAttrSampleIdAll;
  a.name = "intel_pt//u";
  a.ids = {100, 101};
  w.AddAttr(a);
  Attr d;
  d.type = 1;
  d.config = 9;
  d.sample_type = 0x10087;
  d.name = "dummy:u";
  d.ids = {1};
  w.AddAttr(d);
  w.AddRecord(MakeTimeConv(0, 1, 0, true));
  w.AddAuxtrace(0, 7, 0, 42, 0xffffffff, "abcde");  // padded to 8
  w.AddRecord(MakeFinishedRound());
  return w.Finish();
}

TEST(PerfDataTest, HeaderHasTheSizesPerfRequires) {
  std::string f = Build();
  auto pd = ParsePerfData(f);
  ASSERT_TRUE(pd.has_value()) << pd.error().ToString();
  EXPECT_EQ(pd->header_size, 104u);
  EXPECT_EQ(pd->attr_size, 144u);
  // attr.size inside the attr is 128: perf 6.1 rejects larger ones.
  EXPECT_EQ(LoadLe<uint32_t>(f, LoadLe<uint64_t>(f, 24) + 4), 128u);
}

TEST(PerfDataTest, AttrsAndIdsRoundTrip) {
  auto pd = ParsePerfData(Build());
  ASSERT_TRUE(pd.has_value());
  ASSERT_EQ(pd->attrs.size(), 2u);
  EXPECT_EQ(pd->attrs[0].type, 8u);
  EXPECT_EQ(pd->attrs[0].config, 0x2401u);
  EXPECT_EQ(pd->attrs[0].sample_type, 0x10087u);
  EXPECT_EQ(pd->attrs[0].flags, kAttrSampleIdAll);
  EXPECT_THAT(pd->attrs[0].ids, ElementsAre(100u, 101u));
  EXPECT_THAT(pd->attrs[1].ids, ElementsAre(1u));
}

TEST(PerfDataTest, AuxtracePayloadIsPaddedAndIndexed) {
  auto pd = ParsePerfData(Build());
  ASSERT_TRUE(pd.has_value());
  ASSERT_EQ(pd->records.size(), 3u);
  const DataRecord& aux = pd->records[1];
  EXPECT_EQ(aux.type, kRecordAuxtrace);
  EXPECT_EQ(aux.bytes.size(), 48u);  // header.size does not count the payload
  EXPECT_EQ(aux.payload, std::string("abcde\0\0\0", 8));
  EXPECT_EQ(LoadLe<uint64_t>(aux.bytes, 8), 8u);            // size
  EXPECT_EQ(LoadLe<uint64_t>(aux.bytes, 24), 7u);           // reference
  EXPECT_EQ(LoadLe<uint32_t>(aux.bytes, 36), 42u);          // tid
  EXPECT_EQ(LoadLe<uint32_t>(aux.bytes, 40), 0xffffffffu);  // cpu: per-thread
  ASSERT_TRUE(pd->features.count(kFeatAuxtrace));
  auto index = ParseAuxtraceIndex(pd->features[kFeatAuxtrace]);
  ASSERT_TRUE(index.has_value());
  EXPECT_THAT(*index, ElementsAre(AuxtraceIndexEntry{aux.file_offset, 48}));
}

TEST(PerfDataTest, EventDescriptionNamesEveryAttr) {
  auto pd = ParsePerfData(Build());
  ASSERT_TRUE(pd.has_value());
  ASSERT_TRUE(pd->features.count(kFeatEventDesc));
  const std::string& body = pd->features[kFeatEventDesc];
  EXPECT_EQ(LoadLe<uint32_t>(body, 0), 2u);
  EXPECT_EQ(LoadLe<uint32_t>(body, 4), 128u);
  // First entry: attr, nr_ids, name string (len padded to 64), ids.
  EXPECT_EQ(LoadLe<uint32_t>(body, 8 + 128), 2u);
  EXPECT_EQ(LoadLe<uint32_t>(body, 8 + 128 + 4), 64u);
  EXPECT_EQ(body.substr(8 + 128 + 8, 11), "intel_pt//u");
  EXPECT_EQ(LoadLe<uint64_t>(body, 8 + 128 + 8 + 64), 100u);
}

TEST(PerfDataTest, BuildIdEntryLayout) {
  std::string e = MakeBuildIdEntry(std::string(20, '\x11'), "/bin/true", false);
  EXPECT_EQ(e.size(), 8u + 4 + 24 + 64);
  EXPECT_EQ(LoadLe<uint16_t>(e, 6), e.size());
  EXPECT_EQ(LoadLe<uint16_t>(e, 4), 2 | (1 << 15));  // user, build-id size valid
  EXPECT_EQ(static_cast<uint8_t>(e[8 + 4 + 20]), 20);
  EXPECT_EQ(e.substr(8 + 4 + 24, 9), "/bin/true");
}

TEST(PerfDataTest, RejectsCorruptFiles) {
  std::string f = Build();
  EXPECT_THAT(ParsePerfData(f.substr(0, 50)), HasErrorContaining("shorter than its 104-byte"));
  std::string bad = f;
  bad[0] = 'X';
  EXPECT_THAT(ParsePerfData(bad), HasErrorContaining("bad magic"));
  // Data section running past the end of the file.
  bad = f;
  uint64_t huge = f.size();
  std::memcpy(bad.data() + 48, &huge, 8);
  EXPECT_THAT(ParsePerfData(bad), HasErrorContaining("data section outside"));
  // A record whose size is below its header.
  bad = f;
  uint64_t data_off = LoadLe<uint64_t>(f, 40);
  bad[data_off + 6] = 4;
  bad[data_off + 7] = 0;
  EXPECT_THAT(ParsePerfData(bad), HasErrorContaining("bad size"));
  EXPECT_THAT(ParseAuxtraceIndex(std::string("\x05\0\0\0\0\0\0\0", 8)),
              HasErrorContaining("count exceeds"));
}

}  // namespace
}  // namespace ptsnap::exporter
