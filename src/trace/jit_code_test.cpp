#include "trace/jit_code.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/result_matchers.h"

namespace ptsnap::trace {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;

// Two records written as the plugin writes them read back in order, code
// bytes and all; the layout is the documented one (offsets checked by hand).
TEST(JitCodeTest, RecordsRoundTripInFileOrder) {
  std::string text = JitCodeHeader();
  EXPECT_EQ(text.size(), kJitCodeHeaderSize);
  EXPECT_EQ(text.substr(0, 8), "PTSNAPJC");
  const std::string a("\x55\x48\x89\xe5\xc3", 5), b("\xb8\x02\x00\x00\x00\xc3", 6);
  text += FormatJitCodeRecord({.time = 100, .addr = 0x7f0000001000, .tid = 42, .code = a});
  EXPECT_EQ(text.size(), kJitCodeHeaderSize + 40);  // 32 + 5, padded to 8
  EXPECT_EQ(static_cast<uint8_t>(text[kJitCodeHeaderSize]), 40);
  text += FormatJitCodeRecord(
      {.time = 200, .addr = 0x7f0000001000, .tid = 43, .flags = kJitCodeReplaces, .code = b});
  auto f = ParseJitCode(text);
  ASSERT_THAT(f, HasValue());
  ASSERT_EQ(f->loads.size(), 2u);
  EXPECT_FALSE(f->torn_tail);
  EXPECT_EQ(f->loads[0].time, 100u);
  EXPECT_EQ(f->loads[0].addr, 0x7f0000001000u);
  EXPECT_EQ(f->loads[0].tid, 42u);
  EXPECT_EQ(f->loads[0].flags, 0u);
  EXPECT_EQ(f->loads[0].code, a);
  EXPECT_EQ(f->loads[1].time, 200u);
  EXPECT_EQ(f->loads[1].flags, kJitCodeReplaces);
  EXPECT_EQ(f->loads[1].code, b);
}

// A process killed while writing leaves a partial last record: the records
// before it are kept and the tear is reported, never an error.
TEST(JitCodeTest, TornLastRecordIsIgnoredAndReported) {
  std::string text = JitCodeHeader() + FormatJitCodeRecord({.addr = 0x1000, .code = "\xc3"});
  const std::string second = FormatJitCodeRecord({.addr = 0x2000, .code = "\x90\xc3"});
  for (size_t cut : {size_t{1}, size_t{31}, second.size() - 1}) {
    auto f = ParseJitCode(text + second.substr(0, cut));
    ASSERT_THAT(f, HasValue());
    EXPECT_EQ(f->loads.size(), 1u);
    EXPECT_TRUE(f->torn_tail) << cut;
  }
  auto header_only = ParseJitCode(JitCodeHeader());
  ASSERT_THAT(header_only, HasValue());
  EXPECT_TRUE(header_only->loads.empty());
}

TEST(JitCodeTest, MalformedFilesAreErrorsThatSayWhy) {
  EXPECT_THAT(ParseJitCode(""), HasErrorContaining("bad magic"));
  EXPECT_THAT(ParseJitCode("PTSNAPJX" + std::string(8, '\0')), HasErrorContaining("bad magic"));
  std::string v2 = JitCodeHeader();
  v2[8] = 2;
  EXPECT_THAT(ParseJitCode(v2), HasErrorContaining("unsupported version 2"));
  std::string rec = FormatJitCodeRecord({.addr = 0x1000, .code = "\xc3"});
  rec[0] = 48;  // record size beyond code size + padding
  EXPECT_THAT(ParseJitCode(JitCodeHeader() + rec),
              HasErrorContaining("record at offset 16: record size 48"));
  std::string empty = FormatJitCodeRecord({.addr = 0x1000, .code = ""});
  EXPECT_THAT(ParseJitCode(JitCodeHeader() + empty), HasErrorContaining("no code"));
  std::string wraps = FormatJitCodeRecord({.addr = ~uint64_t{0}, .code = "\x90\xc3"});
  EXPECT_THAT(ParseJitCode(JitCodeHeader() + wraps), HasErrorContaining("wraps"));
}

TEST(JitCodeTest, PathsAreUnderJit) {
  EXPECT_EQ(JitCodePath("/t", 42), std::filesystem::path("/t/jit/code-42.bin"));
  EXPECT_EQ(JitCodeWorkName(42), "jit-code.42");
}

}  // namespace
}  // namespace ptsnap::trace
