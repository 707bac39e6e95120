#include "export/perf_data.h"

#include <gmock/gmock.h>

#include <gtest/gtest.h>
#include <linux/perf_event.h>

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

TEST(PerfDataTest, SamplingAttrFieldsRoundTrip) {
  PerfDataWriter w;
  Attr a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = 4000;
  a.flags = kAttrFreq | kAttrSampleIdAll | kAttrExcludeCallchainUser;
  a.sample_type = 0x131a7;
  a.sample_regs_user = 0xff0fff;
  a.sample_stack_user = 8192;
  a.sample_max_stack = 127;
  a.branch_sample_type = 3;
  a.ids = {1};
  w.AddAttr(a);
  std::string f = w.Finish();
  auto pd = ParsePerfData(f);
  ASSERT_TRUE(pd.has_value()) << pd.error().ToString();
  ASSERT_EQ(pd->attrs.size(), 1u);
  EXPECT_EQ(pd->attrs[0], a);
  // uapi offsets: sample_freq 16, sample_regs_user 80, sample_stack_user 88.
  uint64_t attr_off = LoadLe<uint64_t>(f, 24);
  EXPECT_EQ(LoadLe<uint64_t>(f, attr_off + 16), 4000u);
  EXPECT_EQ(LoadLe<uint64_t>(f, attr_off + 80), 0xff0fffu);
  EXPECT_EQ(LoadLe<uint32_t>(f, attr_off + 88), 8192u);
  EXPECT_EQ(LoadLe<uint16_t>(f, attr_off + 108), 127u);
}

// A PERF_RECORD_SAMPLE with IDENTIFIER, IP, TID, TIME, CPU, PERIOD.
std::string Sample(uint64_t id, uint32_t tid, uint64_t time) {
  std::string r = MakeHeader(PERF_RECORD_SAMPLE, 2, 8 + 6 * 8);
  auto put = [&](uint64_t v) { r.append(reinterpret_cast<const char*>(&v), 8); };
  put(id);
  put(0x401000);
  put((static_cast<uint64_t>(tid) << 32) | 42);
  put(time);
  put(0);
  put(250000);
  return r;
}
constexpr uint64_t kSixFields = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                                PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;

TEST(PerfDataTest, SplitSampleStreamFindsEachSampleItsThreadAndTime) {
  std::string other = MakeHeader(PERF_RECORD_LOST, 0, 16) + std::string(8, '\0');
  std::string s = Sample(7, 43, 500) + other + Sample(7, 44, 600) + std::string("abcde");
  auto split = SplitSampleStream(s, kSixFields);
  ASSERT_TRUE(split.has_value()) << split.error().ToString();
  ASSERT_EQ(split->samples.size(), 2u);
  EXPECT_EQ(split->samples[0].pid, 42u);
  EXPECT_EQ(split->samples[0].tid, 43u);
  EXPECT_EQ(split->samples[0].time, 500u);
  EXPECT_EQ(split->samples[1].tid, 44u);
  EXPECT_EQ(split->samples[1].time, 600u);
  EXPECT_EQ(split->samples[1].bytes, Sample(7, 44, 600));
  EXPECT_EQ(split->other_records, 1u);
  EXPECT_EQ(split->torn_bytes, 5u);
  EXPECT_THAT(SplitSampleStream(s, PERF_SAMPLE_IP | PERF_SAMPLE_TIME),
              HasErrorContaining("TID and TIME"));
}

// REGS_USER and STACK_USER cut out of a sample, whatever follows them kept:
// the sample as a recording without them lays it out.
TEST(PerfDataTest, WithoutUserRegsAndStackCutsBothFields) {
  const uint64_t st = kSixFields | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
                      PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT;
  auto u64s = [](std::initializer_list<uint64_t> v) {
    return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * 8);
  };
  const std::string chain = u64s({2, static_cast<uint64_t>(PERF_CONTEXT_USER), 0x401000});
  const std::string regs = u64s({PERF_SAMPLE_REGS_ABI_64, 1, 2, 3});  // mask 0x1c0: 3 registers
  const std::string stack = u64s({16, 0xaa, 0xbb, 16});
  const std::string weight = u64s({77});
  auto record = [](const std::string& body) {
    return MakeHeader(PERF_RECORD_SAMPLE, 2, static_cast<uint16_t>(8 + 48 + body.size())) +
           Sample(7, 43, 500).substr(8) + body;
  };
  const std::string full = record(chain + regs + stack + weight);
  const std::optional<std::string> cut = WithoutUserRegsAndStack(full, st, 0x1c0);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, record(chain + weight));
  // No user registers (abi 0) and an empty stack copy: only their u64 heads.
  const std::string bare = record(chain + u64s({0}) + u64s({0}) + weight);
  EXPECT_EQ(WithoutUserRegsAndStack(bare, st, 0x1c0), record(chain + weight));
  // Cut short anywhere inside the fields: nullopt, never a read past the end.
  for (size_t n = 56; n < full.size() - 8; ++n)
    EXPECT_FALSE(WithoutUserRegsAndStack(full.substr(0, n), st, 0x1c0).has_value()) << n;
  EXPECT_FALSE(WithoutUserRegsAndStack(full, st | PERF_SAMPLE_READ, 0x1c0).has_value());
}

TEST(PerfDataTest, WithSampleIdRewritesIdentifierAndId) {
  std::string r = WithSampleId(Sample(7, 43, 500), kSixFields, 1);
  EXPECT_EQ(r, Sample(1, 43, 500));
  // With ID too (after IP, TID, TIME): both fields.
  uint64_t st =
      PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID;
  std::string with_id = MakeHeader(PERF_RECORD_SAMPLE, 2, 48) + std::string(40, '\x07');
  std::string out = WithSampleId(with_id, st, 1);
  EXPECT_EQ(LoadLe<uint64_t>(out, 8), 1u);
  EXPECT_EQ(LoadLe<uint64_t>(out, 40), 1u);
  EXPECT_EQ(LoadLe<uint64_t>(out, 16), 0x0707070707070707u);
  // Too short: unchanged.
  EXPECT_EQ(WithSampleId("12345678", kSixFields, 1), "12345678");
}

}  // namespace
}  // namespace ptsnap::exporter
