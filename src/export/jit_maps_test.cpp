#include "export/jit_maps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/string_util.h"
#include "elf/elf_file.h"
#include "elf/symbol_file.h"
#include "export/jit_elf.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::exporter {
namespace {

using ::testing::ElementsAre;

// The file perf reads: code at file offset and address 64, the symbols
// over it, the build-id in a note; read back with ptsnap's own ELF reader.
TEST(JitElf, HoldsTheCodeItsSymbolsAndItsBuildId) {
  const std::string code = "\x55\x48\x89\xe5\x90\x90\x5d\xc3\xc3";  // 9 bytes
  std::vector<JitElfSymbol> syms = {{0, 8, "JS:*hot"}, {8, 100, "tail"}, {20, 4, "outside"}};
  std::string elf = MakeJitElf(0x7f0000001000, code, syms);
  ASSERT_GT(elf.size(), kJitElfTextOffset + code.size());
  EXPECT_EQ(elf.substr(kJitElfTextOffset, code.size()), code);
  ptsnap::testing::TempDir tmp;
  const auto path = tmp.path() / "jitted-1-0.so";
  std::ofstream(path, std::ios::binary) << elf;
  EXPECT_EQ(elf::ReadBuildIdOf(path), base::HexBytes(JitBuildId(0x7f0000001000, code)));
  auto file = elf::SymbolFile::Open(path);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const auto& s = file->symbols().symbols();
  ASSERT_EQ(s.size(), 2u);  // "outside" lies past the code
  EXPECT_EQ(s[0].name, "JS:*hot");
  EXPECT_EQ(s[0].start, kJitElfTextOffset);
  EXPECT_EQ(s[0].size, 8u);
  EXPECT_EQ(s[1].name, "tail");
  EXPECT_EQ(s[1].start, kJitElfTextOffset + 8);
  EXPECT_EQ(s[1].size, 1u);  // clipped to the code
}

TEST(JitElf, BuildIdsTellCodeAndAddressApart) {
  EXPECT_EQ(JitBuildId(0x1000, "abc").size(), kJitBuildIdSize);
  EXPECT_EQ(JitBuildId(0x1000, "abc"), JitBuildId(0x1000, "abc"));
  EXPECT_NE(JitBuildId(0x1000, "abc"), JitBuildId(0x1000, "abd"));
  EXPECT_NE(JitBuildId(0x1000, "abc"), JitBuildId(0x2000, "abc"));
}

trace::Record Mmap2At(uint32_t pid, uint64_t time, uint64_t addr, uint64_t len,
                      const std::string& file) {
  trace::Record r;
  r.type = 10;  // PERF_RECORD_MMAP2
  trace::Mmap2 m;
  m.pid = m.tid = pid;
  m.addr = addr;
  m.len = len;
  m.filename = file;
  r.body = m;
  r.sample_id.pid = r.sample_id.tid = pid;
  r.sample_id.time = time;
  return r;
}

trace::Record ExecAt(uint32_t pid, uint64_t time) {
  trace::Record r;
  r.type = 3;  // PERF_RECORD_COMM
  r.body = trace::Comm{pid, pid, "prog", true};
  r.sample_id.pid = r.sample_id.tid = pid;
  r.sample_id.time = time;
  return r;
}

std::vector<uint64_t> MapTimes(const std::vector<JitMap>& maps) {
  std::vector<uint64_t> out;
  for (const JitMap& m : maps) out.push_back(m.map_time);
  return out;
}

// New code is mapped as early as harmless: right after the exec, or after a
// file mapping that covered its addresses; rewritten code and a runtime's
// loads at their own time; later code over earlier code after it.
TEST(PlaceJitMaps, EarlyWhereHarmlessExactWhereCodeChanged) {
  std::vector<trace::Record> sideband = {
      ExecAt(7, 100),
      Mmap2At(7, 200, 0x5000, 0x1000, "/lib/libfoo.so"),  // a file over 0x5000..0x6000
      Mmap2At(7, 300, 0x9000, 0x1000, "//anon"),          // anonymous: no bound
      ExecAt(8, 50),
  };
  std::vector<JitMap> maps = {
      {7, 7, 1000, 0x9000, 16, false, false, 0, 0},  // fresh: after the exec
      {7, 7, 2000, 0x5800, 16, false, false, 0, 0},  // over the file: after its mapping
      {7, 7, 3000, 0x9000, 16, true, false, 0, 0},   // rewritten: at its first run
      {7, 7, 4000, 0x9008, 16, false, false, 0, 0},  // overlaps the rewrite: after it
      {8, 8, 500, 0x9000, 16, false, false, 0, 0},   // another process
      {8, 8, 600, 0x1000, 16, false, true, 0, 0},    // a jitdump load: its own time
  };
  PlaceJitMaps(&maps, sideband);
  EXPECT_THAT(MapTimes(maps), ElementsAre(100, 200, 3000, 3000, 50, 600));
}

}  // namespace
}  // namespace ptsnap::exporter
