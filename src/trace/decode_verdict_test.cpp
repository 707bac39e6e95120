#include "trace/decode_verdict.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace ptsnap::trace {
namespace {

TEST(DecodeVerdict, RoundTrips) {
  const DecodeVerdict v{.by = "decode",
                        .ptsnap_version = "0.9",
                        .decoded_unix_ns = 1'700'000'000'000'000'000ull,
                        .output = "out/trace.fxt.gz",
                        .slices = 12345,
                        .damaged_bytes = 7,
                        .impossible = 2,
                        .first_impossible = "main on thread 7: 12 ms in a 3 ms span"};
  auto back = ParseDecodeVerdict(SerializeDecodeVerdict(v));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, v);
}

TEST(DecodeVerdict, UnknownKeysAreIgnoredWrongTypesAreNot) {
  auto v = ParseDecodeVerdict(R"({"slices": 3, "later": [1]})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->slices, 3u);
  auto bad = ParseDecodeVerdict(R"({"impossible": -1})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find("\"impossible\""), std::string::npos);
  EXPECT_FALSE(ParseDecodeVerdict(R"({"by": 3})"));
  EXPECT_FALSE(ParseDecodeVerdict("[]"));
  EXPECT_FALSE(ParseDecodeVerdict("{"));
}

TEST(DecodeVerdict, ReadsWhatWasWrittenAndNothingWhereNoneWas) {
  ::ptsnap::testing::TempDir tmp;
  auto none = ReadDecodeVerdict(tmp.path());
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  const DecodeVerdict v{.by = "report", .slices = 1};
  ASSERT_TRUE(WriteDecodeVerdict(tmp.path(), v));
  auto got = ReadDecodeVerdict(tmp.path());
  ASSERT_TRUE(got);
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, v);
  std::ofstream(tmp.path() / kDecodeVerdictFile) << "{\"slices\": \"x\"}";
  auto bad = ReadDecodeVerdict(tmp.path());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find(kDecodeVerdictFile), std::string::npos);
}

}  // namespace
}  // namespace ptsnap::trace
