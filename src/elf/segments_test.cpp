#include "elf/segments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace ptsnap::elf {
namespace {

TEST(Segments, RejectsGarbageAndReadsOwnBinary) {
  EXPECT_FALSE(ParseLoadLayout("not an elf"));
  EXPECT_FALSE(ParseLoadLayout(std::string(64, '\0')));
  // This test binary: a PIE with an interpreter and an executable segment
  // that holds this very function.
  std::string head(65536, '\0');
  std::ifstream("/proc/self/exe", std::ios::binary).read(head.data(), 65536);
  auto layout = ParseLoadLayout(head);
  ASSERT_TRUE(layout.has_value());
  EXPECT_TRUE(layout->pie);
  EXPECT_NE(layout->interp.find("ld-linux"), std::string::npos) << layout->interp;
  EXPECT_TRUE(std::any_of(layout->segments.begin(), layout->segments.end(),
                          [](const Segment& s) { return s.exec; }));
  EXPECT_TRUE(LowestExecVaddr(layout->segments).has_value());
}

TEST(Segments, OffsetToVaddrUsesTheSegmentThatMapsTheOffset) {
  const std::vector<Segment> segments = {
      {.vaddr = 0x400000, .offset = 0, .filesz = 0x1000, .memsz = 0x1000, .exec = false},
      {.vaddr = 0x401000, .offset = 0x1000, .filesz = 0x2345, .memsz = 0x2345, .exec = true},
      {.vaddr = 0x404e10, .offset = 0x3e10, .filesz = 0x200, .memsz = 0x400, .exec = false}};
  EXPECT_EQ(OffsetToVaddr(segments, 0x1000), 0x401000u);
  EXPECT_EQ(OffsetToVaddr(segments, 0x1234), 0x401234u);
  EXPECT_EQ(OffsetToVaddr(segments, 0x3000), 0x403000u);
  // Past the code, in the data segment that starts mid-page.
  EXPECT_EQ(OffsetToVaddr(segments, 0x3e20), 0x404e20u);
  EXPECT_EQ(OffsetToVaddr(segments, 0x9000), std::nullopt);
  EXPECT_EQ(LowestExecVaddr(segments), 0x401000u);
  EXPECT_EQ(LowestExecVaddr(std::span<const Segment>(segments).first(1)), std::nullopt);
}

}  // namespace
}  // namespace ptsnap::elf
