#include "trace/jitdump.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/support/result_matchers.h"

namespace ptsnap::trace {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;

// Hand-built jitdump bytes, laid out as perf's jitdump.h declares them.
class Dump {
 public:
  explicit Dump(uint64_t flags = 0, uint32_t mach = 62, uint32_t version = 1,
                uint32_t reserved = 0) {
    U32(0x4A695444).U32(version).U32(40).U32(mach).U32(reserved).U32(4242).U64(1000).U64(flags);
  }
  Dump& U32(uint32_t v) { return Raw(&v, 4); }
  Dump& U64(uint64_t v) { return Raw(&v, 8); }
  Dump& I32(int32_t v) { return Raw(&v, 4); }
  Dump& Str(std::string_view s) {
    s_.append(s);
    s_.push_back('\0');
    return *this;
  }
  Dump& Bytes(std::string_view s) {
    s_.append(s);
    return *this;
  }
  // Starts a record; End() fills in its total size.
  Dump& Begin(uint32_t id, uint64_t ts) {
    start_ = s_.size();
    return U32(id).U32(0).U64(ts);
  }
  Dump& End() {
    const auto size = static_cast<uint32_t>(s_.size() - start_);
    std::memcpy(&s_[start_ + 4], &size, 4);
    return *this;
  }
  [[nodiscard]] const std::string& str() const { return s_; }

 private:
  Dump& Raw(const void* p, size_t n) {
    s_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string s_;
  size_t start_ = 0;
};

Dump& Load(Dump& d, uint64_t ts, uint64_t addr, std::string_view name, std::string_view code) {
  return d.Begin(0, ts)
      .U32(4242)
      .U32(4243)
      .U64(addr)
      .U64(addr)
      .U64(code.size())
      .U64(7)
      .Str(name)
      .Bytes(code)
      .End();
}

TEST(JitdumpTest, EveryRecordKindParses) {
  Dump d(kJitdumpFlagArchTimestamp);
  Load(d, 2000, 0x7f0000001000, "LazyCompile:*hot /tmp/a.js:3", std::string("\x55\xc3", 2));
  d.Begin(1, 3000)
      .U32(4242)
      .U32(4243)
      .U64(0)
      .U64(0x7f0000001000)
      .U64(0x7f0000002000)
      .U64(2)
      .U64(7)
      .End();
  d.Begin(2, 4000).U64(0x7f0000002000).U64(2);
  d.U64(0x7f0000002000).I32(3).I32(0).Str("/tmp/a.js");
  d.U64(0x7f0000002001).I32(4).I32(1).Str("\xff");
  d.End();
  d.Begin(4, 5000).U64(4).U64(2).U64(16).Bytes("abcd").End();
  d.Begin(9, 5500).U64(0).End();  // a future record kind
  d.Begin(3, 6000).End();
  auto j = ParseJitdump(d.str());
  ASSERT_THAT(j, HasValue());
  EXPECT_EQ(j->header.pid, 4242u);
  EXPECT_EQ(j->header.timestamp, 1000u);
  EXPECT_TRUE(j->header.arch_timestamp());
  ASSERT_EQ(j->loads.size(), 1u);
  EXPECT_EQ(j->loads[0].timestamp, 2000u);
  EXPECT_EQ(j->loads[0].tid, 4243u);
  EXPECT_EQ(j->loads[0].code_addr, 0x7f0000001000u);
  EXPECT_EQ(j->loads[0].code_index, 7u);
  EXPECT_EQ(j->loads[0].name, "LazyCompile:*hot /tmp/a.js:3");
  EXPECT_EQ(j->loads[0].code, std::string("\x55\xc3", 2));
  ASSERT_EQ(j->moves.size(), 1u);
  EXPECT_EQ(j->moves[0].new_code_addr, 0x7f0000002000u);
  EXPECT_EQ(j->moves[0].code_size, 2u);
  ASSERT_EQ(j->debug.size(), 1u);
  ASSERT_EQ(j->debug[0].entries.size(), 2u);
  EXPECT_EQ(j->debug[0].entries[0].line, 3);
  EXPECT_EQ(j->debug[0].entries[1].file, "/tmp/a.js");  // "\xff": the previous file
  EXPECT_EQ(j->debug[0].entries[1].discriminator, 1);
  ASSERT_EQ(j->unwinding.size(), 1u);
  EXPECT_EQ(j->unwinding[0].data, "abcd");
  EXPECT_EQ(j->unknown_records, 1u);
  EXPECT_TRUE(j->closed);
  EXPECT_FALSE(j->torn_tail);
  EXPECT_TRUE(j->malformed.empty());
}

TEST(JitdumpTest, BadHeadersAreErrorsThatSayWhy) {
  EXPECT_THAT(ParseJitdump(""), HasErrorContaining("not a jitdump"));
  EXPECT_THAT(ParseJitdump("ELF\x7f and more bytes"), HasErrorContaining("not a jitdump"));
  std::string swapped = Dump().str();
  std::swap(swapped[0], swapped[3]);
  std::swap(swapped[1], swapped[2]);
  EXPECT_THAT(ParseJitdump(swapped), HasErrorContaining("byte-swapped"));
  EXPECT_THAT(ParseJitdump(Dump(0, 183).str()), HasErrorContaining("ELF machine 183"));
  EXPECT_THAT(ParseJitdump(Dump(0, 62, 2).str()), HasErrorContaining("version 2"));
  EXPECT_THAT(ParseJitdump(Dump().str().substr(0, 30)), HasErrorContaining("cut short"));
}

// A runtime still writing leaves a partial record: the loads before it are
// kept. A malformed record stops the parse there, keeping the ones before,
// and says what is wrong.
TEST(JitdumpTest, TornAndMalformedRecordsKeepWhatCameBefore) {
  Dump d;
  Load(d, 1, 0x1000, "a", "\xc3");
  std::string one = d.str();
  Load(d, 2, 0x2000, "b", "\x90\xc3");
  const std::string two = d.str();
  for (size_t cut = one.size() + 1; cut < two.size(); cut += 7) {
    auto j = ParseJitdump(two.substr(0, cut));
    ASSERT_THAT(j, HasValue());
    EXPECT_EQ(j->loads.size(), 1u) << cut;
    EXPECT_TRUE(j->torn_tail) << cut;
  }
  // A code size past the record's end.
  Dump bad;
  Load(bad, 1, 0x1000, "a", "\xc3");
  bad.Begin(0, 2).U32(1).U32(1).U64(0x2000).U64(0x2000).U64(100).U64(0).Str("b").End();
  Load(bad, 3, 0x3000, "c", "\xc3");
  auto j = ParseJitdump(bad.str());
  ASSERT_THAT(j, HasValue());
  EXPECT_EQ(j->loads.size(), 1u);
  EXPECT_THAT(j->malformed, ::testing::HasSubstr("code size 100 runs past the record"));
  // A name without its NUL, and a size smaller than the prefix.
  Dump noname;
  noname.Begin(0, 2).U32(1).U32(1).U64(0x2000).U64(0x2000).U64(0).U64(0).Bytes("abc").End();
  EXPECT_THAT(ParseJitdump(noname.str())->malformed, ::testing::HasSubstr("not NUL-terminated"));
  Dump tiny;
  tiny.U32(0).U32(8).U64(0);
  EXPECT_THAT(ParseJitdump(tiny.str())->malformed, ::testing::HasSubstr("smaller than its prefix"));
}

// JIT_CODE_DEBUG_INFO comes before the load it describes (perf's jitdump.c
// keeps it for the next JIT_CODE_LOAD of its code address): a load at
// another address does not take it, and code reused at the same address
// later without debug info of its own gets none.
TEST(JitdumpTest, DebugInfoDescribesTheNextLoadOfItsAddress) {
  Dump d;
  d.Begin(2, 10).U64(0x1000).U64(1).U64(0x1000).I32(7).I32(0).Str("/src/a.js").End();
  Load(d, 11, 0x2000, "other", "\xc3");
  Load(d, 12, 0x1000, "described", "\x90\xc3");
  Load(d, 13, 0x1000, "reused", "\xc3");
  d.Begin(2, 14).U64(0x1000).U64(1).U64(0x1000).I32(9).I32(0).Str("/src/b.js").End();
  d.Begin(2, 15).U64(0x1000).U64(1).U64(0x1000).I32(10).I32(0).Str("/src/c.js").End();
  Load(d, 16, 0x1000, "again", "\xc3");
  auto j = ParseJitdump(d.str());
  ASSERT_THAT(j, HasValue());
  ASSERT_EQ(j->loads.size(), 4u);
  ASSERT_EQ(j->debug.size(), 3u);
  EXPECT_FALSE(j->loads[0].debug.has_value());
  ASSERT_TRUE(j->loads[1].debug.has_value());
  EXPECT_EQ(j->debug[*j->loads[1].debug].entries[0].file, "/src/a.js");
  EXPECT_FALSE(j->loads[2].debug.has_value());
  ASSERT_TRUE(j->loads[3].debug.has_value());  // the latest of two
  EXPECT_EQ(j->debug[*j->loads[3].debug].entries[0].line, 10);
}

// V8 marks its jitdumps (0xDEADBEEF in the header's reserved word) and
// writes each debug entry at code + offset + 0x40, as node v20 does: the
// parser gives the code's own addresses, so the entry at offset 0 names
// the function's first line. Other writers' entries are kept as written.
TEST(JitdumpTest, V8DebugEntriesAreMovedBackOntoTheirCode) {
  for (const uint32_t reserved : {0xDEADBEEFu, 0u}) {
    Dump d(0, 62, 1, reserved);
    d.Begin(2, 10)
        .U64(0x5b80)
        .U64(2)
        .U64(0x5b80 + 0x40)
        .I32(1217)
        .I32(10)
        .Str("node:path")
        .U64(0x5b83 + 0x40)
        .I32(1218)
        .I32(3)
        .Str("\xff")
        .End();
    Load(d, 11, 0x5b80, "JS:^resolve node:path:1217:10", "\x90\x90\x90\xc3");
    auto j = ParseJitdump(d.str());
    ASSERT_THAT(j, HasValue());
    EXPECT_EQ(j->header.from_v8(), reserved != 0);
    ASSERT_EQ(j->debug.size(), 1u);
    ASSERT_EQ(j->debug[0].entries.size(), 2u);
    const uint64_t bias = reserved != 0 ? 0 : 0x40;
    EXPECT_EQ(j->debug[0].entries[0].addr, 0x5b80 + bias);
    EXPECT_EQ(j->debug[0].entries[1].addr, 0x5b83 + bias);
    EXPECT_EQ(j->debug[0].entries[1].file, "node:path");
  }
}

TEST(JitdumpTest, MarkerMappingsNameTheirProcess) {
  EXPECT_EQ(JitdumpMarkerPid("/home/u/jit-4242.dump"), 4242);
  EXPECT_EQ(JitdumpMarkerPid("jit-7.dump"), 7);
  EXPECT_EQ(JitdumpMarkerPid("/tmp/jit-.dump"), std::nullopt);
  EXPECT_EQ(JitdumpMarkerPid("/tmp/jit-12x.dump"), std::nullopt);
  EXPECT_EQ(JitdumpMarkerPid("/usr/lib/libjit-1.so"), std::nullopt);
}

}  // namespace
}  // namespace ptsnap::trace
