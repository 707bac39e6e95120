#include "elf/segments.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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

TEST(Segments, ProgramHeadersAreCheckedAgainstTheBytes) {
  std::string head(65536, '\0');
  std::ifstream("/proc/self/exe", std::ios::binary).read(head.data(), 65536);
  auto bytes = std::as_bytes(std::span(head.data(), head.size()));
  auto header = ParseElfHeader(bytes);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->type, ET_DYN);
  auto size = HeadersSize(*header);
  ASSERT_TRUE(size.has_value());
  auto phdrs = ParseProgramHeaders(bytes, *header);
  ASSERT_TRUE(phdrs.has_value());
  EXPECT_EQ(phdrs->size(), header->phnum);
  // The same headers one byte short of their table, and with a PT_LOAD
  // whose file size exceeds its memory size.
  EXPECT_FALSE(ParseProgramHeaders(bytes.first(*size - 1), *header));
  for (size_t i = 0; i < header->phnum; ++i) {
    Elf64_Phdr ph;
    const size_t at = header->phoff + i * sizeof ph;
    std::memcpy(&ph, head.data() + at, sizeof ph);
    if (ph.p_type != PT_LOAD) continue;
    ph.p_filesz = ph.p_memsz + 1;
    std::memcpy(head.data() + at, &ph, sizeof ph);
    break;
  }
  auto bad = ParseProgramHeaders(bytes, *header);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("p_filesz exceeds p_memsz"), std::string::npos);
  EXPECT_FALSE(ParseLoadLayout(head));
}

}  // namespace
}  // namespace ptsnap::elf
