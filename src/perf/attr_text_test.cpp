#include "perf/attr_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "perf/attr.h"

namespace ptsnap::perf {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// perf 6.1's `perf record -vv --per-thread -e intel_pt//u -- true` under a
// fake Skylake intel_pt node (type 8): the PT event, opened, then its
// tracking dummy after a first refused attempt.
constexpr char kPerfOutput[] =
    R"(intel_pt default config: tsc,mtc,mtc_period=3,psb_period=3,pt,branch
------------------------------------------------------------
perf_event_attr:
  type                             8
  size                             128
  config                           0x300e601
  { sample_period, sample_freq }   1
  sample_type                      IP|TID|IDENTIFIER
  read_format                      ID|LOST
  disabled                         1
  exclude_kernel                   1
  exclude_hv                       1
  enable_on_exec                   1
  sample_id_all                    1
  aux_watermark                    1048576
------------------------------------------------------------
sys_perf_event_open: pid 22749  cpu -1  group_fd -1  flags 0x8 = 5
------------------------------------------------------------
perf_event_attr:
  type                             1
  size                             128
  config                           0x9
  { sample_period, sample_freq }   1
  sample_type                      IP|TID|IDENTIFIER
  read_format                      ID|LOST
  mmap                             1
------------------------------------------------------------
sys_perf_event_open: pid 22749  cpu -1  group_fd -1  flags 0x8
sys_perf_event_open failed, error -22
switching off PERF_FORMAT_LOST support
------------------------------------------------------------
perf_event_attr:
  type                             1
  size                             128
  config                           0x9
  { sample_period, sample_freq }   1
  sample_type                      IP|TID|IDENTIFIER
  read_format                      ID
  mmap                             1
------------------------------------------------------------
sys_perf_event_open: pid -1  cpu 0  group_fd -1  flags 0x8 = 7
sys_perf_event_open: pid -1  cpu 1  group_fd -1  flags 0x8 = 9
failed to mmap with 95 (Operation not supported)
)";

TEST(AttrText, ParsesPerfVerboseOutput) {
  auto blocks = ParsePerfAttrText(kPerfOutput);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].fields.at("type"), "8");
  EXPECT_EQ(blocks[0].fields.at("config"), "0x300e601");
  EXPECT_EQ(blocks[0].fields.at("{ sample_period, sample_freq }"), "1");
  EXPECT_EQ(blocks[0].fields.at("sample_type"), "IP|TID|IDENTIFIER");
  EXPECT_EQ(blocks[0].fields.at("aux_watermark"), "1048576");
  EXPECT_EQ(blocks[0].fields.size(), 12u);
  EXPECT_THAT(blocks[0].opened, ElementsAre(Pair(22749, -1)));
  EXPECT_TRUE(blocks[1].opened.empty());  // refused (error -22), retried
  EXPECT_EQ(blocks[1].fields.at("read_format"), "ID|LOST");
  EXPECT_EQ(blocks[2].fields.at("read_format"), "ID");
  EXPECT_THAT(blocks[2].opened, ElementsAre(Pair(-1, 0), Pair(-1, 1)));
}

TEST(AttrText, FormatsInPerfsLayoutAndOrder) {
  perf_event_attr a{};
  a.type = 8;
  a.size = 128;
  a.config = 0x300e601;
  a.sample_period = 1;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_IDENTIFIER;
  a.read_format = PERF_FORMAT_ID | (1u << 4);  // PERF_FORMAT_LOST (6.0)
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.enable_on_exec = 1;
  a.sample_id_all = 1;
  a.aux_watermark = 1048576;
  // Byte for byte perf's block above.
  const std::string perf_block = std::string(kPerfOutput)
                                     .substr(std::string(kPerfOutput).find("  type"),
                                             std::string(kPerfOutput).find("-----", 200) -
                                                 std::string(kPerfOutput).find("  type"));
  EXPECT_EQ(FormatAttrLikePerf(a), perf_block);
}

TEST(AttrText, RoundTripsPtsnapsAttrs) {
  perf_event_attr t = BuildTrackingAttr(true, true);
  auto blocks = ParsePerfAttrText("perf_event_attr:\n" + FormatAttrLikePerf(t));
  ASSERT_EQ(blocks.size(), 1u);
  const auto& f = blocks[0].fields;
  EXPECT_EQ(f.at("type"), "1");
  EXPECT_EQ(f.at("config"), "0x9");
  EXPECT_EQ(f.at("sample_type"), "TID|TIME|CPU|IDENTIFIER");
  EXPECT_EQ(f.at("text_poke"), "1");
  EXPECT_EQ(f.at("context_switch"), "1");
  EXPECT_EQ(f.count("exclude_kernel"), 0u);  // zero fields are not printed
  EXPECT_EQ(f.count("read_format"), 0u);
}

TEST(AttrText, FlagsWithoutANameAreHex) {
  perf_event_attr a{};
  a.sample_type = PERF_SAMPLE_TID | (uint64_t{1} << 40);
  a.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_CALL_STACK;
  a.clockid = -1;
  a.use_clockid = 1;
  const std::string text = FormatAttrLikePerf(a);
  EXPECT_THAT(text, ::testing::HasSubstr("sample_type                      TID|0x10000000000\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("branch_sample_type               USER|CALL_STACK\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("clockid                          -1\n"));
  EXPECT_THAT(SplitFlags("IP|TID|IDENTIFIER"), ElementsAre("IP", "TID", "IDENTIFIER"));
  EXPECT_TRUE(SplitFlags("").empty());
}

}  // namespace
}  // namespace ptsnap::perf
