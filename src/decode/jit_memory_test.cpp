#include "decode/jit_memory.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptsnap::decode {
namespace {

// What libipt's read callback gets: bytes up to the first byte not held,
// across pages; nothing where no code was held.
TEST(JitMemoryTest, ReadsHeldBytesAcrossPagesAndStopsAtAGap) {
  JitMemory m;
  std::vector<uint8_t> code(20);
  for (size_t i = 0; i < code.size(); ++i) code[i] = static_cast<uint8_t>(i + 1);
  m.Write(0x10ff6, code);  // 10 bytes in one page, 10 in the next
  EXPECT_EQ(m.bytes(), 20u);
  EXPECT_TRUE(m.HoldsPage(0x10000));
  EXPECT_TRUE(m.HoldsPage(0x11fff));
  EXPECT_FALSE(m.HoldsPage(0x12000));
  uint8_t buf[16] = {};
  EXPECT_EQ(m.Read(buf, sizeof buf, 0x10ffe), 12u);  // up to the end of the code
  EXPECT_EQ(buf[0], 9);
  EXPECT_EQ(buf[11], 20);
  EXPECT_EQ(m.Read(buf, sizeof buf, 0x10ff5), 0u);
  EXPECT_EQ(ReadJitMemory(buf, sizeof buf, nullptr, 0x20000, &m), -pte_nomap);
  EXPECT_EQ(ReadJitMemory(buf, 4, nullptr, 0x10ff6, &m), 4);
}

// A rewrite is told from an addition; a copy keeps the old bytes when the
// original is written (pages are shared until then).
TEST(JitMemoryTest, ConflictsAndCopiesAreIndependent) {
  JitMemory m;
  const std::vector<uint8_t> v1 = {0xb8, 1, 0, 0, 0, 0xc3}, v2 = {0xb8, 2, 0, 0, 0, 0xc3};
  m.Write(0x1000, v1);
  EXPECT_FALSE(m.Conflicts(0x1000, v1));
  EXPECT_FALSE(m.Conflicts(0x1006, v2));  // next to it: an addition
  EXPECT_TRUE(m.Conflicts(0x1000, v2));
  JitMemory copy = m;
  m.Write(0x1000, v2);
  uint8_t b = 0;
  ASSERT_EQ(copy.Read(&b, 1, 0x1001), 1u);
  EXPECT_EQ(b, 1);
  ASSERT_EQ(m.Read(&b, 1, 0x1001), 1u);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(m.bytes(), 6u);  // rewritten bytes are not counted twice
}

}  // namespace
}  // namespace ptsnap::decode
