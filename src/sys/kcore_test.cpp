#include "sys/kcore.h"

#include <elf.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <cstring>
#include <string>

#include "sys/kcore_image.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;

struct Seg {
  uint32_t type;
  uint64_t vaddr;
  uint64_t size;
};

// A core through the shared writer, each segment's bytes filled with
// (index + 1).
std::string MakeCore(const std::vector<Seg>& segs) {
  std::vector<CoreSegment> out;
  for (size_t i = 0; i < segs.size(); ++i) {
    out.push_back({.type = segs[i].type,
                   .vaddr = segs[i].vaddr,
                   .flags = PF_R | PF_W | PF_X,
                   .bytes = std::string(segs[i].size, static_cast<char>(i + 1))});
  }
  return BuildCoreImage(out);
}

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(ParseKcoreHeader, ParsesLoadsAndNotes) {
  std::string core = MakeCore({{PT_NOTE, 0, 16},
                               {PT_LOAD, 0xffffffff81000000, 0x2000},
                               {PT_LOAD, 0xffffffffc0000000, 0x1000}});
  auto h = ParseKcoreHeader(Bytes(core));
  ASSERT_THAT(h, HasValue());
  EXPECT_EQ(h->machine, EM_X86_64);
  EXPECT_EQ(h->note_count, 1u);
  ASSERT_EQ(h->loads.size(), 2u);
  EXPECT_EQ(h->loads[0].vaddr, 0xffffffff81000000u);
  EXPECT_EQ(FindLoadCovering(*h, 0xffffffff81001000), &h->loads[0]);
  EXPECT_EQ(FindLoadCovering(*h, 0xffffffff81001000, 0x1000), &h->loads[0]);
  EXPECT_EQ(FindLoadCovering(*h, 0xffffffff81001000, 0x1001), nullptr);
  EXPECT_EQ(FindLoadCovering(*h, 0xffffffff80fff000), nullptr);
  EXPECT_EQ(FindLoadCovering(*h, 0xffffffffc0000fff), &h->loads[1]);
}

TEST(ParseKcoreHeader, RejectsBadHeaders) {
  std::string core = MakeCore({{PT_LOAD, 0x1000, 0x10}});
  EXPECT_THAT(ParseKcoreHeader(Bytes(core.substr(0, 10))), HasErrorContaining("truncated"));
  EXPECT_THAT(ParseKcoreHeader(Bytes(core.substr(0, 70))),
              HasErrorContaining("program headers truncated"));
  std::string bad = core;
  bad[0] = 'X';
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("bad magic"));
  bad = core;
  bad[EI_CLASS] = ELFCLASS32;
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("64-bit"));
  bad = core;
  bad[offsetof(Elf64_Ehdr, e_type)] = ET_EXEC;
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("ET_CORE"));
  bad = core;
  bad[offsetof(Elf64_Ehdr, e_phentsize)] = 32;
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("program header size"));
  bad = core;
  uint64_t huge = ~uint64_t{0} - 8;
  std::memcpy(bad.data() + offsetof(Elf64_Ehdr, e_phoff), &huge, 8);
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("beyond"));
  bad = core;
  Elf64_Phdr ph;
  std::memcpy(&ph, bad.data() + sizeof(Elf64_Ehdr), sizeof ph);
  ph.p_offset = ~uint64_t{0};
  std::memcpy(bad.data() + sizeof(Elf64_Ehdr), &ph, sizeof ph);
  EXPECT_THAT(ParseKcoreHeader(Bytes(bad)), HasErrorContaining("overflows"));
}

// The writer lays the file out like /proc/kcore: headers, then each
// segment's bytes at a page-aligned offset, and the parser reads back
// exactly what was written.
TEST(BuildCoreImage, LaysOutSegmentsAtPageAlignedOffsetsAndParsesBack) {
  std::vector<ElfLoad> loads;
  std::string core = BuildCoreImage(
      {{.type = PT_NOTE, .bytes = std::string(20, 'n')},
       {.vaddr = 0xffffffff81000000, .paddr = 0x1000000, .bytes = std::string(0x1800, 't')},
       {.vaddr = 0xffffffffc0000000, .flags = PF_R | PF_W | PF_X, .bytes = std::string(0x10, 'm')}},
      EM_X86_64, &loads);
  Elf64_Ehdr eh;
  std::memcpy(&eh, core.data(), sizeof eh);
  EXPECT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_type, ET_CORE);
  EXPECT_EQ(eh.e_phnum, 3);
  EXPECT_EQ(eh.e_shnum, 0);
  Elf64_Phdr ph[3];
  std::memcpy(ph, core.data() + sizeof eh, sizeof ph);
  EXPECT_EQ(ph[0].p_type, uint32_t{PT_NOTE});
  EXPECT_EQ(ph[0].p_flags, 0u);
  EXPECT_EQ(ph[0].p_offset, 0x1000u);
  EXPECT_EQ(ph[1].p_offset, 0x2000u);
  EXPECT_EQ(ph[1].p_flags, uint32_t{PF_R | PF_X});  // the default for a load
  EXPECT_EQ(ph[1].p_paddr, 0x1000000u);
  EXPECT_EQ(ph[2].p_offset, 0x4000u);  // after 0x1800 bytes, rounded up
  EXPECT_EQ(ph[2].p_flags, uint32_t{PF_R | PF_W | PF_X});
  EXPECT_EQ(core.size(), 0x4010u);
  EXPECT_EQ(core[0x2000], 't');
  EXPECT_EQ(core[0x4000 - 1], '\0');
  EXPECT_EQ(core[0x4000], 'm');
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].offset, 0x2000u);
  EXPECT_EQ(loads[1].filesz, 0x10u);

  auto h = ParseKcoreHeader(Bytes(core));
  ASSERT_THAT(h, HasValue());
  EXPECT_EQ(h->note_count, 1u);
  ASSERT_EQ(h->loads.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(h->loads[i].vaddr, loads[i].vaddr);
    EXPECT_EQ(h->loads[i].offset, loads[i].offset);
    EXPECT_EQ(h->loads[i].filesz, loads[i].filesz);
    EXPECT_EQ(h->loads[i].flags, loads[i].flags);
  }
}

TEST(KcoreFile, OpensAndReadsThroughLoads) {
  ptsnap::testing::TempDir dir;
  dir.Write("proc/kcore", MakeCore({{PT_NOTE, 0, 8}, {PT_LOAD, 0xffffffff81000000, 0x100}}), 0400);
  auto k = KcoreFile::Open(base::RootPath(dir.path()));
  ASSERT_THAT(k, HasValue());
  EXPECT_EQ(k->header().loads.size(), 1u);
  std::byte buf[4];
  ASSERT_THAT(k->ReadAt(0xffffffff810000fc, buf), HasValue());
  EXPECT_EQ(buf[0], std::byte{2});  // second segment's fill byte
  EXPECT_THAT(k->ReadAt(0xffffffff810000fd, buf), HasErrorContaining("no PT_LOAD"));
}

TEST(KcoreFile, MissingAndGarbage) {
  ptsnap::testing::TempDir dir;
  auto missing = KcoreFile::Open(base::RootPath(dir.path()));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().errnum(), ENOENT);
  dir.Write("proc/kcore", "this is not an ELF file at all, just some text padding it to 64+ bytes");
  EXPECT_THAT(KcoreFile::Open(base::RootPath(dir.path())), HasErrorContaining("bad magic"));
}

}  // namespace
}  // namespace ptsnap::sys
