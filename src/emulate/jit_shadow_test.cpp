#include "emulate/jit_shadow.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptsnap::emulate {
namespace {

using Change = JitShadow::Change;

// What the plugin decides per translated block: capture new code, skip a
// retranslation of the same bytes, and see a rewrite where bytes changed,
// including across a page boundary and for a block that starts mid-way
// into captured code.
TEST(JitShadowTest, TellsNewSameAndRewrittenCode) {
  JitShadow s;
  const std::vector<uint8_t> v1 = {0xb8, 1, 0, 0, 0, 0xc3};
  const std::vector<uint8_t> v2 = {0xb8, 2, 0, 0, 0, 0xc3};
  EXPECT_EQ(s.Update(0x10000, v1), Change::kNew);
  EXPECT_EQ(s.Update(0x10000, v1), Change::kSame);
  EXPECT_EQ(s.Compare(0x10001, std::vector<uint8_t>{1, 0, 0}), Change::kSame);
  EXPECT_EQ(s.Compare(0x10004, std::vector<uint8_t>{0, 0xc3, 0x90}), Change::kNew);
  EXPECT_EQ(s.Compare(0x10000, v2), Change::kReplaces);
  EXPECT_EQ(s.Compare(0x10000, v1), Change::kSame);  // Compare changed nothing
  EXPECT_EQ(s.Update(0x10000, v2), Change::kReplaces);
  EXPECT_EQ(s.Update(0x10000, v1), Change::kReplaces);
  EXPECT_EQ(s.pages(), 1u);
  // Across a page boundary.
  EXPECT_EQ(s.Update(0x20ffe, v1), Change::kNew);
  EXPECT_EQ(s.pages(), 3u);
  EXPECT_EQ(s.Compare(0x20ffe, v1), Change::kSame);
  EXPECT_EQ(s.Compare(0x21000, std::vector<uint8_t>{0, 0, 0, 0xc4}), Change::kReplaces);
}

}  // namespace
}  // namespace ptsnap::emulate
