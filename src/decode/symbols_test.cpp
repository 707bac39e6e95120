#include "decode/symbols.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode/test_stream.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::decode {
namespace {

using ::ptsnap::testing::HasError;
using ::testing::HasSubstr;

TEST(SymbolsTest, KallsymsKeepsTextSymbolsOnly) {
  SymbolTable t = ParseKallsyms(
      "ffffffff81000000 T _stext\n"
      "ffffffff81000100 t do_thing\n"
      "ffffffff82000000 D some_data\n"
      "ffffffffc0000000 t mod_fn\t[mymod]\n"
      "garbage line\n");
  ASSERT_EQ(t.size(), 3u);
  ASSERT_NE(t.Find(0xffffffff81000150), nullptr);
  EXPECT_EQ(t.Find(0xffffffff81000150)->name, "do_thing");
  EXPECT_EQ(t.Find(0xffffffff81000010)->name, "_stext");
  EXPECT_EQ(t.Find(0xffffffffc0000004)->name, "mod_fn [mymod]");
  EXPECT_EQ(t.Find(0xffffffff80000000), nullptr);
}

TEST(SymbolsTest, PerfMapWithAndWithoutPrefix) {
  SymbolTable t = ParsePerfMap("7f0000001000 20 jitted_a\n0x7f0000002000 0x10 Lfoo;::bar (x)\n");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find(0x7f000000101f)->name, "jitted_a");
  EXPECT_EQ(t.Find(0x7f0000001020), nullptr);
  EXPECT_EQ(t.Find(0x7f0000002008)->name, "Lfoo;::bar (x)");
}

TEST(SymbolsTest, DemanglesCxxNames) {
  EXPECT_EQ(Demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(Demangle("main"), "main");
  EXPECT_EQ(Demangle("_Zgarbage"), "_Zgarbage");
}

TEST(SymbolsTest, ElfFileReadsSymbolsSegmentsAndBuildId) {
  auto p = testing::LoadCallsProgram();
  auto elf = ElfFile::Open(p.path);
  ASSERT_TRUE(elf.has_value());
  EXPECT_EQ(elf->build_id().size(), 40u);  // SHA-1 build-id, hex
  EXPECT_TRUE(elf->has_symtab());
  const Symbol* fib = elf->symbols().Find(p.Sym("fib") + 3);
  ASSERT_NE(fib, nullptr);
  EXPECT_EQ(fib->name, "fib");
  bool has_exec = false;
  for (const auto& s : elf->segments()) has_exec |= s.exec;
  EXPECT_TRUE(has_exec);
}

TEST(SymbolsTest, ElfFileRejectsNonElf) {
  EXPECT_THAT(ElfFile::Open("/proc/self/status"), HasError());
  EXPECT_THAT(ElfFile::Open("/nonexistent/file"), HasError());
}

TEST(SymbolsTest, SymbolizerResolvesMappingsAndUnknown) {
  auto p = testing::LoadCallsProgram();
  Symbolizer s;
  auto elf = ElfFile::Open(p.path);
  for (const auto& seg : elf->segments()) {
    if (!seg.exec) continue;
    s.AddMapping(42, seg.vaddr & ~0xfffull, seg.memsz + (seg.vaddr & 0xfff), seg.offset & ~0xfffull,
                 p.path, p.path);
  }
  Resolved r = s.Resolve(42, p.Sym("mid") + 1);
  ASSERT_TRUE(r.known);
  EXPECT_EQ(*r.name, "mid");
  EXPECT_EQ(r.start, p.Sym("mid"));
  Resolved same = s.Resolve(42, p.Sym("mid"));
  EXPECT_EQ(same.function_id, r.function_id);
  Resolved u = s.Resolve(42, 0x1234);
  EXPECT_FALSE(u.known);
  EXPECT_EQ(*u.name, "[unknown @ 0x1234]");
  s.AddMapping(42, 0x7000000, 0x1000, 0, "", "//anon");
  EXPECT_EQ(*s.Resolve(42, 0x7000010).name, "[unknown @ 0x7000010 (//anon)]");
  // Fork copies, exec forgets.
  s.ForkProcess(42, 43);
  EXPECT_EQ(*s.Resolve(43, p.Sym("leaf")).name, "leaf");
  s.ResetProcess(43);
  EXPECT_FALSE(s.Resolve(43, p.Sym("leaf")).known);
}

TEST(SymbolsTest, KernelAddressesUseKallsyms) {
  Symbolizer s;
  s.SetKernelSymbols(ParseKallsyms("ffffffff81000000 T entry_SYSCALL_64\n"
                                   "ffffffff81000200 T do_syscall_64\n"),
                     0xffffffff81000000);
  EXPECT_EQ(*s.Resolve(1, 0xffffffff81000010).name, "entry_SYSCALL_64");
  EXPECT_THAT(*s.Resolve(1, 0xfffffffff0000000).name, HasSubstr("[unknown @ 0xfffffffff0000000"));
}

}  // namespace
}  // namespace ptsnap::decode
