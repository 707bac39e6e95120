#include "decode/symbols.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode/test_stream.h"
#include "tests/support/objdump.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::decode {
namespace {

using ::ptsnap::testing::HasError;
using ::testing::HasSubstr;

TEST(SymbolsTest, KallsymsKeepsTextSymbolsOnly) {
  elf::SymbolTable t =
      KernelSymbols(sys::ParseKallsyms("ffffffff81000000 T _stext\n"
                                       "ffffffff81000100 t do_thing\n"
                                       "ffffffff82000000 D some_data\n"
                                       "ffffffffc0000000 t mod_fn\t[mymod]\n"
                                       "garbage line\n"));
  ASSERT_EQ(t.size(), 3u);
  ASSERT_NE(t.Find(0xffffffff81000150), nullptr);
  EXPECT_EQ(t.Find(0xffffffff81000150)->name, "do_thing");
  EXPECT_EQ(t.Find(0xffffffff81000010)->name, "_stext");
  EXPECT_EQ(t.Find(0xffffffffc0000004)->name, "mod_fn [mymod]");
  EXPECT_EQ(t.Find(0xffffffff80000000), nullptr);
}

TEST(SymbolsTest, PerfMapWithAndWithoutPrefix) {
  elf::SymbolTable t =
      ParsePerfMap("7f0000001000 20 jitted_a\n0x7f0000002000 0x10 Lfoo;::bar (x)\n");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find(0x7f000000101f)->name, "jitted_a");
  EXPECT_EQ(t.Find(0x7f0000001020), nullptr);
  EXPECT_EQ(t.Find(0x7f0000002008)->name, "Lfoo;::bar (x)");
}

// JIT code in a "[jit]" mapping: named by a JIT map where it has a name
// (in every address space the map was given to), else "[jit @ 0xADDR]";
// other code without a symbol stays "[unknown @ ...]".
TEST(SymbolsTest, JitCodeIsNamedByTheMapOrByItsAddress) {
  Symbolizer s;
  s.AddMapping(1, 0x7f0000001000, 0x1000, 0, {}, "[jit]");
  s.AddMapping(2, 0x7f0000001000, 0x1000, 0, {}, "[jit]");
  const int32_t spaces[] = {1, 2};
  s.AddPerfMap(spaces, ParsePerfMap("7f0000001100 20 JS:*hot\n"));
  for (int32_t space : spaces) {
    Resolved named = s.Resolve(space, 0x7f0000001104);
    EXPECT_TRUE(named.known);
    EXPECT_EQ(*named.name, "JS:*hot");
    EXPECT_EQ(*named.dso, "[jit]");
  }
  Resolved unnamed = s.Resolve(1, 0x7f0000001800);
  EXPECT_FALSE(unnamed.known);
  EXPECT_EQ(*unnamed.name, "[jit @ 0x7f0000001800]");
  EXPECT_EQ(*s.Resolve(1, 0x5000).name, "[unknown @ 0x5000]");
}

TEST(SymbolsTest, DemanglesCxxNames) {
  EXPECT_EQ(elf::Demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(elf::Demangle("main"), "main");
  EXPECT_EQ(elf::Demangle("_Zgarbage"), "_Zgarbage");
}

TEST(SymbolsTest, ElfFileReadsSymbolsSegmentsAndBuildId) {
  auto p = testing::LoadCallsProgram();
  auto elf = elf::SymbolFile::Open(p.path);
  ASSERT_TRUE(elf.has_value());
  EXPECT_EQ(elf->build_id().size(), 40u);  // SHA-1 build-id, hex
  EXPECT_TRUE(elf->has_symtab());
  const elf::Symbol* fib = elf->symbols().Find(p.Sym("fib") + 3);
  ASSERT_NE(fib, nullptr);
  EXPECT_EQ(fib->name, "fib");
  bool has_exec = false;
  for (const auto& s : elf->segments()) has_exec |= s.exec;
  EXPECT_TRUE(has_exec);
}

// Every PLT stub named as objdump names it (objdump maps stubs to GOT
// slots): libc's IRELATIVE stubs come first in .plt but last in .rela.plt,
// so naming stubs by position mislabelled them (0x26060, mempcpy's, was
// "__tls_get_addr@plt"). objdump's "*ABS*+0xN@plt" is the IFUNC at N.
TEST(SymbolsTest, PltStubsAreNamedByTheirGotSlot) {
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  auto elf = elf::SymbolFile::Open(libc);
  ASSERT_TRUE(elf.has_value()) << libc;
  ::ptsnap::testing::TempDir tmp;
  const auto out = tmp.path() / "plt.txt";
  ASSERT_EQ(std::system(("objdump -d -j .plt " + libc + " > " + out.string()).c_str()), 0);
  std::ifstream in(out);
  std::string line;
  int named = 0, ifuncs = 0;
  while (std::getline(in, line)) {
    // "0000000000026060 <*ABS*+0x9c6a0@plt>:"
    auto lt = line.find(" <"), gt = line.rfind(">:");
    if (lt == std::string::npos || gt == std::string::npos || line.find("@plt") == line.npos)
      continue;
    const uint64_t addr = std::stoull(line.substr(0, lt), nullptr, 16);
    const std::string label = line.substr(lt + 2, gt - lt - 2);
    if (label.find("@plt-0x") != std::string::npos) continue;  // PLT0: ".plt"
    const elf::Symbol* sym = elf->symbols().Find(addr);
    ASSERT_NE(sym, nullptr) << label;
    EXPECT_EQ(sym->start, addr) << label;
    if (label.rfind("*ABS*+0x", 0) == 0) {
      const uint64_t resolver = std::stoull(label.substr(8), nullptr, 16);
      EXPECT_THAT(sym->name, ::testing::EndsWith("@plt")) << label;
      const std::string ifunc = sym->name.substr(0, sym->name.size() - 4);
      // The IFUNC it names is the one at the relocation's addend.
      const elf::Symbol* target = elf->symbols().Find(resolver);
      ASSERT_NE(target, nullptr) << label;
      EXPECT_EQ(target->start, resolver) << label;
      ++ifuncs;
    } else {
      EXPECT_EQ(sym->name, label.substr(0, label.find('@')) + "@plt") << label;
      ++named;
    }
  }
  EXPECT_GT(named, 10);
  EXPECT_GT(ifuncs, 5);
}

// This test binary is a lazily bound PIE: .init holds a zero-size _init,
// then .plt (PLT0 + stubs), then .plt.got (__cxa_finalize, bound at load).
TEST(SymbolsTest, PltHeaderStubsAndPltGotHaveTheirOwnNames) {
  auto elf = elf::SymbolFile::Open("/proc/self/exe");
  ASSERT_TRUE(elf.has_value());
  const auto& syms = elf->symbols().symbols();
  auto plt =
      std::find_if(syms.begin(), syms.end(), [](const elf::Symbol& s) { return s.name == ".plt"; });
  ASSERT_NE(plt, syms.end()) << "no .plt section in the test binary";
  EXPECT_EQ(plt->size, 16u);
  ASSERT_NE(plt, syms.begin());
  // _init (or whatever precedes .plt) ends where .plt starts: PLT0 is not _init+0x20.
  EXPECT_LE(std::prev(plt)->start + std::prev(plt)->size, plt->start) << std::prev(plt)->name;
  EXPECT_EQ(elf->symbols().Find(plt->start + 6)->name, ".plt");
  const elf::Symbol* stub = elf->symbols().Find(plt->start + 16);
  ASSERT_NE(stub, nullptr);
  EXPECT_THAT(stub->name, ::testing::EndsWith("@plt"));
  EXPECT_TRUE(std::any_of(syms.begin(), syms.end(),
                          [](const elf::Symbol& s) { return s.name == "__cxa_finalize@plt"; }));
}

TEST(SymbolsTest, ElfFileRejectsNonElf) {
  EXPECT_THAT(elf::SymbolFile::Open("/proc/self/status"), HasError());
  EXPECT_THAT(elf::SymbolFile::Open("/nonexistent/file"), HasError());
}

// Code of an ELF file that no symbol covers is named FILE+0xVADDR, its
// link-time address (what objdump --start-address takes), wherever the
// file was loaded. Debian's stripped ls has such code: crtstuff's helpers,
// which no FDE bounds (docs/decoding.md, "Call stacks on optimized code").
TEST(SymbolsTest, UnknownCodeOfAFileIsNamedByItsLinkTimeAddress) {
  const std::string path = "/usr/bin/ls";
  auto elf = elf::SymbolFile::Open(path);
  ASSERT_TRUE(elf.has_value()) << path << " (Debian's coreutils) cannot be read";
  constexpr uint64_t kBias = 0x4000000000;
  Symbolizer s;
  uint64_t unnamed = 0;
  Resolved r;
  for (const auto& seg : elf->segments()) {
    if (!seg.exec) continue;
    s.AddMapping(42, kBias + (seg.vaddr & ~0xfffull), seg.memsz + (seg.vaddr & 0xfff),
                 seg.offset & ~0xfffull, path, path);
    for (uint64_t v = seg.vaddr; v < seg.vaddr + seg.memsz && unnamed == 0; ++v)
      if (r = s.Resolve(42, kBias + v); !r.known) unnamed = v;
  }
  ASSERT_NE(unnamed, 0u) << "no code without a name in " << path;
  char want[64];
  std::snprintf(want, sizeof want, "[unknown @ ls+0x%llx]",
                static_cast<unsigned long long>(unnamed));
  EXPECT_EQ(*r.name, want);
  EXPECT_EQ(*r.dso, path);
}

TEST(SymbolsTest, SymbolizerResolvesMappingsAndUnknown) {
  auto p = testing::LoadCallsProgram();
  Symbolizer s;
  auto elf = elf::SymbolFile::Open(p.path);
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

// The ELF vaddr of `name` in `path` (from its symbol table).
uint64_t SymbolVaddr(const std::filesystem::path& path, const std::string& name) {
  auto elf = elf::SymbolFile::Open(path);
  if (!elf) return 0;
  for (const auto& s : elf->symbols().symbols()) {
    if (s.name == name) return s.start;
  }
  return 0;
}

constexpr uint64_t kSrclineBase = 0x555500000000;

TEST(SourceLinesTest, DwarfFileGivesFunctionEntryLine) {
  const std::filesystem::path prog = PTSNAP_DECODE_SRCLINE;
  auto dw = DwarfFile::Open(prog);
  ASSERT_NE(dw, nullptr);
  uint64_t target = SymbolVaddr(prog, "srcline_target");
  ASSERT_NE(target, 0u);
  const SourceLocation* loc = dw->Lookup(target);
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(std::filesystem::path(loc->file).filename(), "srcline.c");
  EXPECT_EQ(loc->line, 5u);
  EXPECT_EQ(dw->Lookup(target), loc);  // cached
  const SourceLocation* main_loc = dw->Lookup(SymbolVaddr(prog, "main"));
  ASSERT_NE(main_loc, nullptr);
  EXPECT_EQ(main_loc->line, 9u);
  EXPECT_EQ(dw->Lookup(0x10), nullptr);  // no compilation unit there
}

TEST(SourceLinesTest, NoDwarfMeansNoLocation) {
  EXPECT_EQ(DwarfFile::Open("/nonexistent/file"), nullptr);
  EXPECT_EQ(DwarfFile::Open("/proc/self/status"), nullptr);
  // A copy with symbols but without DWARF (and without a debug link).
  const std::filesystem::path prog = PTSNAP_DECODE_SRCLINE;
  ptsnap::testing::TempDir dir;
  std::filesystem::path stripped = dir.path() / "srcline";
  std::string cmd = "objcopy --strip-debug '" + prog.string() + "' '" + stripped.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(DwarfFile::Open(stripped), nullptr);
  Symbolizer s;
  s.SetDebugDirs({dir.path() / "none"});
  s.AddMapping(7, kSrclineBase, 0x10000, 0, stripped, "srcline");
  uint64_t target = kSrclineBase + SymbolVaddr(prog, "srcline_target");
  EXPECT_EQ(s.SourceLine(7, target), nullptr);
  EXPECT_TRUE(s.Resolve(7, target).known);  // symbols still resolve
}

TEST(SourceLinesTest, SymbolizerMapsProcessAddresses) {
  const std::filesystem::path prog = PTSNAP_DECODE_SRCLINE;
  Symbolizer s;
  s.AddMapping(9, kSrclineBase, 0x10000, 0, prog, "srcline");
  uint64_t target = kSrclineBase + SymbolVaddr(prog, "srcline_target");
  const SourceLocation* loc = s.SourceLine(9, target);
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(std::filesystem::path(loc->file).filename(), "srcline.c");
  EXPECT_EQ(loc->line, 5u);
  EXPECT_EQ(s.SourceLine(9, 0x1000), nullptr);                 // unmapped
  EXPECT_EQ(s.SourceLine(9, 0xffffffff81000000ull), nullptr);  // kernel
  EXPECT_EQ(s.SourceLine(10, target), nullptr);                // other process
}

TEST(SourceLinesTest, SeparateDebugFileByDebuglink) {
  const std::filesystem::path prog = PTSNAP_DECODE_SRCLINE;
  ptsnap::testing::TempDir dir;
  std::filesystem::path debug = dir.path() / "srcline.debug";
  std::filesystem::path stripped = dir.path() / "srcline";
  std::string cmd = "objcopy --only-keep-debug '" + prog.string() + "' '" + debug.string() +
                    "' && objcopy --strip-debug --add-gnu-debuglink='" + debug.string() + "' '" +
                    prog.string() + "' '" + stripped.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(DwarfFile::Open(stripped), nullptr);  // no DWARF left in the binary
  Symbolizer s;
  s.SetDebugDirs({dir.path() / "none"});
  s.AddMapping(9, kSrclineBase, 0x10000, 0, stripped, "srcline");
  const SourceLocation* loc = s.SourceLine(9, kSrclineBase + SymbolVaddr(prog, "srcline_target"));
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(std::filesystem::path(loc->file).filename(), "srcline.c");
  EXPECT_EQ(loc->line, 5u);
}

TEST(InlineTest, DeeperScopesWinAndPiecesMerge) {
  InlineTable t;
  InlineScope& outer = t.scopes.emplace_back();
  outer.name = "outer";
  InlineScope& inner = t.scopes.emplace_back();
  inner.name = "inner";
  inner.parent = &outer;
  inner.depth = 2;
  // outer covers [0x10, 0x40) in two adjacent pieces; inner [0x20, 0x28) inside.
  BuildInlineIntervals(t, {{&inner, {0x20, 0x28}}, {&outer, {0x10, 0x20}}, {&outer, {0x20, 0x40}}});
  ASSERT_EQ(t.intervals.size(), 3u);
  EXPECT_EQ(t.intervals[0].lo, 0x10u);
  EXPECT_EQ(t.intervals[0].hi, 0x20u);
  EXPECT_EQ(t.intervals[0].leaf, &outer);
  EXPECT_EQ(t.intervals[1].leaf, &inner);
  EXPECT_EQ(t.intervals[2].lo, 0x28u);
  EXPECT_EQ(t.intervals[2].hi, 0x40u);
  EXPECT_EQ(t.intervals[2].leaf, &outer);
  EXPECT_EQ(t.From(0x27)->leaf, &inner);
  EXPECT_EQ(t.From(0x40), t.intervals.end());
}

TEST(InlineTest, InlinedCallShowsInItsCallersCode) {
  // tests/programs/decode/inline.c, -O2: inl_step is inlined into
  // loop_caller's loop; leaf_call is not inlined anywhere.
  const std::filesystem::path prog = PTSNAP_DECODE_INLINE;
  auto dw = DwarfFile::Open(prog);
  ASSERT_NE(dw, nullptr);
  const uint64_t caller = SymbolVaddr(prog, "loop_caller");
  ASSERT_NE(caller, 0u);
  InlineTable* table = dw->Inlines(caller);
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(dw->Inlines(caller), table);  // cached
  bool found = false;
  for (const auto& i : table->intervals) found |= i.leaf->name == "inl_step";
  EXPECT_TRUE(found);
  EXPECT_EQ(dw->Inlines(SymbolVaddr(prog, "leaf_call")), nullptr);  // nothing inlined into it

  // Through the Symbolizer, at process addresses: the whole function as
  // one straight run enters inl_step once and leaves it before the end.
  Symbolizer s;
  s.AddMapping(9, kSrclineBase, 0x10000, 0, prog, "inline");
  Resolved r = s.Resolve(9, kSrclineBase + caller);
  ASSERT_TRUE(r.known);
  const InlineRuns* runs = s.Inlines(9, r.start, r.start, r.end - 1);
  ASSERT_NE(runs, nullptr);
  EXPECT_EQ(runs->bias, static_cast<int64_t>(kSrclineBase));
  ASSERT_GE(runs->runs.size(), 3u);
  EXPECT_EQ(runs->runs.front().addr, r.start);
  EXPECT_EQ(runs->runs.front().leaf, nullptr);  // the function's own code first
  EXPECT_EQ(runs->runs.back().leaf, nullptr);   // and last (its ret)
  int entered = 0;
  for (const InlineRun& run : runs->runs) {
    if (run.leaf == nullptr) continue;
    ++entered;
    EXPECT_EQ(*run.leaf->display, "inl_step (inlined)");
    EXPECT_EQ(run.leaf->parent, nullptr);
    EXPECT_GT(run.addr, r.start);
    EXPECT_LT(run.addr, r.end);
    EXPECT_EQ(run.leaf->call_line, 27u);  // inline.c: acc += inl_step(i);
  }
  EXPECT_EQ(entered, 1);  // interleaved pieces of the one call count once
  // The block's instructions, and those before each run, as objdump (an
  // independent disassembler) lists loop_caller's.
  std::vector<uint64_t> insns;  // process addresses
  for (const auto& i :
       ::ptsnap::testing::ObjdumpInstructions(prog, caller, caller + (r.end - r.start)))
    insns.push_back(kSrclineBase + i.addr);
  ASSERT_GT(insns.size(), 10u);
  EXPECT_EQ(insns.back(), r.end - 1);  // its one-byte ret
  EXPECT_EQ(runs->insns, insns.size());
  for (const InlineRun& run : runs->runs) {
    const auto before = std::lower_bound(insns.begin(), insns.end(), run.addr) - insns.begin();
    EXPECT_EQ(run.insn, static_cast<uint32_t>(before)) << std::hex << run.addr;
  }
  EXPECT_EQ(s.Inlines(9, r.start, r.start, r.end - 1), runs);  // cached per block
  // A block of the function's own code before the loop: nothing inlined.
  EXPECT_EQ(s.Inlines(9, r.start, r.start, runs->runs[1].addr - 1), nullptr);
  // Without DWARF for it (another process maps nothing): none.
  EXPECT_EQ(s.Inlines(10, r.start, r.start, r.end - 1), nullptr);
}

TEST(SymbolsTest, KernelAddressesUseKallsyms) {
  Symbolizer s;
  s.SetKernelSymbols(KernelSymbols(sys::ParseKallsyms("ffffffff81000000 T entry_SYSCALL_64\n"
                                                      "ffffffff81000200 T do_syscall_64\n")),
                     0xffffffff81000000);
  EXPECT_EQ(*s.Resolve(1, 0xffffffff81000010).name, "entry_SYSCALL_64");
  EXPECT_THAT(*s.Resolve(1, 0xfffffffff0000000).name, HasSubstr("[unknown @ 0xfffffffff0000000"));
}

// JIT code's source lines (a jitdump's JIT_CODE_DEBUG_INFO): an address
// takes the line of the greatest debug entry at or below it within the
// code that covers it; code before its first entry, or outside any code
// with lines, has none. A fork copies them; setting lines (or none) over
// a range replaces what covered it in that space only.
TEST(SymbolsTest, JitCodeHasTheSourceLinesOfItsDebugInfo) {
  Symbolizer s;
  s.AddMapping(1, 0x7f0000001000, 0x1000, 0, {}, "[jit]");
  const JitLines* hot = s.KeepJitLines({{0x4, 0x10}, {{"/app/hot.js", 3}, {"/app/hot.js", 5}}});
  s.SetJitLines(1, 0x7f0000001100, 0x40, hot);
  EXPECT_EQ(s.SourceLine(1, 0x7f0000001100), nullptr);  // before the first entry
  const SourceLocation* entry = s.SourceLine(1, 0x7f0000001104);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->file, "/app/hot.js");
  EXPECT_EQ(entry->line, 3u);
  ASSERT_NE(s.SourceLine(1, 0x7f000000110f), nullptr);
  EXPECT_EQ(s.SourceLine(1, 0x7f000000110f)->line, 3u);
  ASSERT_NE(s.SourceLine(1, 0x7f000000113f), nullptr);
  EXPECT_EQ(s.SourceLine(1, 0x7f000000113f)->line, 5u);
  EXPECT_EQ(s.SourceLine(1, 0x7f0000001140), nullptr);  // past the code
  EXPECT_EQ(s.SourceLine(1, 0x7f0000001800), nullptr);  // JIT code without debug info

  s.ForkProcess(1, 2);
  // New code over the second half of the first, without debug info: its
  // lines are gone there, in space 2 only.
  s.SetJitLines(2, 0x7f0000001120, 0x40, nullptr);
  ASSERT_NE(s.SourceLine(2, 0x7f0000001110), nullptr);
  EXPECT_EQ(s.SourceLine(2, 0x7f0000001110)->line, 5u);
  EXPECT_EQ(s.SourceLine(2, 0x7f000000113f), nullptr);
  ASSERT_NE(s.SourceLine(1, 0x7f000000113f), nullptr);
  EXPECT_EQ(s.SourceLine(1, 0x7f000000113f)->line, 5u);
  // And over its first bytes: the rest keeps the lines at their offsets.
  s.SetJitLines(2, 0x7f00000010f0, 0x18, nullptr);
  EXPECT_EQ(s.SourceLine(2, 0x7f0000001104), nullptr);
  ASSERT_NE(s.SourceLine(2, 0x7f0000001109), nullptr);
  EXPECT_EQ(s.SourceLine(2, 0x7f0000001109)->line, 3u);
  ASSERT_NE(s.SourceLine(2, 0x7f0000001112), nullptr);
  EXPECT_EQ(s.SourceLine(2, 0x7f0000001112)->line, 5u);
  // An exec forgets them.
  s.ResetProcess(1);
  EXPECT_EQ(s.SourceLine(1, 0x7f0000001104), nullptr);
}

// Kernel code named by PERF_RECORD_KSYMBOL (BPF programs) is looked up by
// time: each program has its name while it is loaded; a program loaded
// later over addresses another used earlier does not rename the earlier
// one's code; after the unload the address is unknown again, and a
// program the recording saw only unload (loaded before it began) has its
// name until then. Without a time (0) the latest name is used. Within a
// range KSYMBOL ever named, kallsyms' nearest symbol below is never used.
TEST(SymbolsTest, KsymbolNamesBpfProgramsOverTime) {
  Symbolizer s;
  s.SetKernelSymbols(KernelSymbols(sys::ParseKallsyms("ffffffffc0000000 t last_module_fn\t[m]\n")),
                     0);
  const uint64_t a = 0xffffffffc0010000;
  s.AddKernelSymbol(100, a, 0x200, "bpf_prog_1111_first", "[bpf]");
  s.RemoveKernelSymbol(200, a, 0x200, "bpf_prog_1111_first", "[bpf]");
  s.AddKernelSymbol(300, a + 0x100, 0x200, "bpf_prog_2222_second", "[bpf]");
  s.RemoveKernelSymbol(400, 0xffffffffc0020000, 0x80, "bpf_prog_3333_older", "[bpf]");

  // Before any program was there: unknown, not kallsyms' nearest symbol below.
  EXPECT_FALSE(s.Resolve(1, a + 0x150, 50).known);
  Resolved first = s.Resolve(1, a + 0x150, 150);
  EXPECT_TRUE(first.known);
  EXPECT_EQ(*first.name, "bpf_prog_1111_first");
  EXPECT_EQ(*first.dso, "[bpf]");
  EXPECT_EQ(first.start, a);
  EXPECT_EQ(first.end, a + 0x200);
  Resolved gone = s.Resolve(1, a + 0x150, 250);
  EXPECT_FALSE(gone.known);
  EXPECT_THAT(*gone.name, HasSubstr("[unknown @ 0xffffffffc0010150"));
  Resolved second = s.Resolve(1, a + 0x150, 350);
  EXPECT_EQ(*second.name, "bpf_prog_2222_second");
  EXPECT_EQ(second.start, a + 0x100);
  EXPECT_NE(second.function_id, first.function_id);
  // The earlier code keeps its name after the later program came.
  EXPECT_EQ(*s.Resolve(1, a + 0x150, 150).name, "bpf_prog_1111_first");
  EXPECT_EQ(*s.Resolve(1, a + 0x150, 0).name, "bpf_prog_2222_second");  // no time: the latest
  EXPECT_EQ(*s.Resolve(1, 0xffffffffc0020010, 350).name, "bpf_prog_3333_older");
  EXPECT_FALSE(s.Resolve(1, 0xffffffffc0020010, 450).known);
}

}  // namespace
}  // namespace ptsnap::decode
