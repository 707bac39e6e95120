#include "sys/kcore.h"

#include <elf.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <cstring>
#include <string>

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

// A minimal ELF64 core: header, program headers, then each PT_LOAD's bytes
// filled with (index + 1).
std::string MakeCore(const std::vector<Seg>& segs) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_CORE;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = static_cast<uint16_t>(segs.size());
  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  uint64_t data_off = sizeof(Elf64_Ehdr) + segs.size() * sizeof(Elf64_Phdr);
  std::string data;
  for (size_t i = 0; i < segs.size(); ++i) {
    Elf64_Phdr ph{};
    ph.p_type = segs[i].type;
    ph.p_flags = PF_R | PF_W | PF_X;
    ph.p_vaddr = segs[i].vaddr;
    ph.p_offset = data_off + data.size();
    ph.p_filesz = ph.p_memsz = segs[i].size;
    out.append(reinterpret_cast<const char*>(&ph), sizeof ph);
    data.append(segs[i].size, static_cast<char>(i + 1));
  }
  return out + data;
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
