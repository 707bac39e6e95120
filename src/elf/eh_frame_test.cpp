#include "elf/eh_frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "elf/symbol_file.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

// A static function (no .dynsym entry) that the stripped copy of this binary
// must still bound, through its FDE.
static __attribute__((noinline, used)) int eh_frame_test_static_fn(int x) {
  __asm__ __volatile__("" : "+r"(x) : : "memory");
  return x * 7 + 1;
}

namespace ptsnap::elf {
namespace {

using ::ptsnap::testing::RunShell;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// The test's static function in `full`, where both files opened and `bare`
// has no .symtab; nullptr (with a failure) otherwise.
const Symbol* StaticFnOfBoth(const Result<SymbolFile>& full, const Result<SymbolFile>& bare) {
  EXPECT_TRUE(full.has_value() && bare.has_value());
  if (!full.has_value() || !bare.has_value()) return nullptr;
  EXPECT_FALSE(bare->has_symtab());
  for (const Symbol& s : full->symbols().symbols())
    if (s.name.starts_with("eh_frame_test_static_fn")) return &s;
  return nullptr;
}

// The FDE ranges readelf (binutils, an independent reader) lists for `path`.
std::set<std::pair<uint64_t, uint64_t>> ReadelfFdes(const std::string& path) {
  auto run = RunShell("readelf --debug-dump=frames " + path);
  EXPECT_EQ(run.status, 0) << run.out;
  std::set<std::pair<uint64_t, uint64_t>> out;
  static const std::regex kFde(R"( FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  for (std::sregex_iterator it(run.out.begin(), run.out.end(), kFde), end; it != end; ++it) {
    const uint64_t lo = std::stoull((*it)[1].str(), nullptr, 16);
    const uint64_t hi = std::stoull((*it)[2].str(), nullptr, 16);
    if (hi > lo) out.emplace(lo, hi);
  }
  return out;
}

// This test binary (GCC -O2, GoogleTest: many split `.cold` parts) and a
// Debian binary: every FDE readelf lists, and no other.
TEST(EhFrame, FindsTheFdesReadelfLists) {
  for (std::string path : {std::string("/proc/self/exe"), std::string("/usr/bin/ls")}) {
    if (path == "/proc/self/exe") path = std::filesystem::read_symlink(path).string();
    auto file = SymbolFile::Open(path);
    ASSERT_TRUE(file.has_value()) << path;
    std::set<std::pair<uint64_t, uint64_t>> ours;
    for (const FdeRange& f : file->fdes()) ours.emplace(f.start, f.end);
    const auto theirs = ReadelfFdes(path);
    EXPECT_GT(theirs.size(), 50u) << path;
    EXPECT_EQ(ours, theirs) << path;
  }
}

// A function's FDE starts at its entry (CFA = %rsp + 8); a `.cold` part's
// starts inside its function's frame.
TEST(EhFrame, TellsEntriesFromSplitParts) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto file = SymbolFile::Open(self);
  ASSERT_TRUE(file.has_value());
  std::map<uint64_t, bool> entry_at;
  for (const FdeRange& f : file->fdes()) entry_at[f.start] = f.entry;
  size_t cold = 0, functions = 0, cold_split = 0, functions_entry = 0;
  for (const Symbol& s : file->symbols().symbols()) {
    auto it = entry_at.find(s.start);
    if (it == entry_at.end() || s.unnamed) continue;
    if (s.split) {
      ++cold;
      cold_split += !it->second;
    } else {
      ++functions;
      functions_entry += it->second;
    }
  }
  EXPECT_GT(cold, 10u) << "GoogleTest code at -O2 has .cold parts";
  EXPECT_EQ(cold_split, cold);
  EXPECT_GT(functions, 100u);
  // Hand-written assembly (crt's _start, _init) may set its own CFA: a
  // handful at most.
  EXPECT_GE(functions_entry + 5, functions);
  auto sym = [&](const std::string& name) -> const Symbol* {
    for (const Symbol& s : file->symbols().symbols())
      if (s.name == name) return &s;
    return nullptr;
  };
  const Symbol* fn = sym("eh_frame_test_static_fn(int)");
  if (fn == nullptr) fn = sym("eh_frame_test_static_fn");
  ASSERT_NE(fn, nullptr);
  EXPECT_TRUE(entry_at.at(fn->start));
  EXPECT_EQ(eh_frame_test_static_fn(1), 8);
}

// Stripped (no .symtab): the static function is still a function, bounded
// by its FDE and named FILE+0xVADDR, where the unstripped file has it.
TEST(EhFrame, BoundsFunctionsOfAStrippedBinary) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  ptsnap::testing::TempDir dir;
  const std::string stripped = (dir.path() / "stripped_copy").string();
  ASSERT_EQ(RunShell("strip --strip-all -o " + stripped + " " + self).status, 0);
  auto full = SymbolFile::Open(self);
  auto bare = SymbolFile::Open(stripped);
  const Symbol* fn = StaticFnOfBoth(full, bare);
  ASSERT_NE(fn, nullptr);
  const Symbol* got = bare->symbols().Find(fn->start + 1);
  ASSERT_NE(got, nullptr);
  EXPECT_TRUE(got->unnamed);
  EXPECT_FALSE(got->split);
  EXPECT_EQ(got->start, fn->start);
  EXPECT_EQ(got->size, fn->size);
  char want[64];
  std::snprintf(want, sizeof want, "stripped_copy+0x%llx",
                static_cast<unsigned long long>(fn->start));
  EXPECT_EQ(got->name, want);
  // Every split part of the full file is a split part, unnamed, when stripped.
  size_t cold = 0, matched = 0;
  for (const Symbol& s : full->symbols().symbols()) {
    if (!s.split) continue;
    ++cold;
    const Symbol* b = bare->symbols().Find(s.start);
    matched += b != nullptr && b->start == s.start && b->split;
  }
  EXPECT_GT(cold, 10u);
  EXPECT_EQ(matched, cold);
}

// MiniDebugInfo, as Fedora builds it: the stripped file carries an
// xz-compressed ELF with a .symtab in .gnu_debugdata. Its names come back,
// static functions included, where .eh_frame alone would give FILE+0xVADDR.
TEST(EhFrame, MiniDebugInfoNamesAStrippedBinarysFunctions) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  ptsnap::testing::TempDir dir;
  const std::string d = dir.path().string();
  const auto run = RunShell("cd " + d + " && objcopy --only-keep-debug " + self +
                            " mini && objcopy --strip-debug mini && xz -k mini && "
                            "strip --strip-all -o bare " +
                            self + " && objcopy --add-section .gnu_debugdata=mini.xz bare");
  ASSERT_EQ(run.status, 0) << run.out;
  auto full = SymbolFile::Open(self);
  auto bare = SymbolFile::Open(d + "/bare");
  const Symbol* fn = StaticFnOfBoth(full, bare);
  ASSERT_NE(fn, nullptr);
  const Symbol* got = bare->symbols().Find(fn->start);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->name, fn->name);
  EXPECT_FALSE(got->unnamed);
  // Not xz, or xz of something that is no ELF: nothing, no crash.
  EXPECT_EQ(ParseMiniDebugInfo(Bytes(std::string("not xz at all"))).size(), 0u);
}

// Hand-made: one CIE ("zR", pc-relative sdata4 pointers, CFA rsp+8) and two
// FDEs, one that keeps the CIE's CFA and one that sets CFA offset 16 before
// its first advance.
TEST(EhFrame, ParsesAHandMadeSection) {
  std::string b;
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u8 = [&](uint8_t v) { b.push_back(static_cast<char>(v)); };
  // CIE at 0: length, id 0, version 1, "zR", code align 1, data align -8,
  // RA reg 16, aug length 1, encoding 0x1b; def_cfa rsp+8; offset r16 at cfa-8.
  const std::string cie_body = std::string(
      "\x00\x00\x00\x00\x01zR\x00\x01\x78\x10\x01\x1b"
      "\x0c\x07\x08\x90\x01",
      18);
  u32(static_cast<uint32_t>(cie_body.size()));
  b += cie_body;
  const uint64_t vaddr = 0x2000;
  auto fde = [&](int32_t start_rel, uint32_t range, const std::string& insns) {
    const size_t at = b.size();
    u32(static_cast<uint32_t>(4 + 4 + 4 + 1 + insns.size()));
    u32(static_cast<uint32_t>(at + 4));  // back to the CIE at 0
    const uint64_t field = vaddr + b.size();
    u32(static_cast<uint32_t>(start_rel - static_cast<int32_t>(field - vaddr)));
    u32(range);
    u8(0);  // augmentation length
    b += insns;
  };
  fde(0x100, 0x40, std::string("\x41\x0e\x10", 3));  // advance 1; def_cfa_offset 16
  fde(0x200, 0x20, std::string("\x0e\x30\x41", 3));  // def_cfa_offset 48; advance 1
  u32(0);                                            // terminator
  auto fdes = ParseEhFrame(Bytes(b), vaddr);
  ASSERT_EQ(fdes.size(), 2u);
  EXPECT_EQ(fdes[0].start, vaddr + 0x100);
  EXPECT_EQ(fdes[0].end, vaddr + 0x140);
  EXPECT_TRUE(fdes[0].entry);
  EXPECT_EQ(fdes[1].start, vaddr + 0x200);
  EXPECT_EQ(fdes[1].end, vaddr + 0x220);
  EXPECT_FALSE(fdes[1].entry);
  // Cut anywhere: fewer entries, never a crash.
  for (size_t n = 0; n < b.size(); ++n)
    EXPECT_LE(ParseEhFrame(Bytes(b.substr(0, n)), vaddr).size(), 2u);
}

TEST(EhFrame, SplitPartNames) {
  EXPECT_TRUE(IsSplitPartName("foo.cold"));
  EXPECT_TRUE(IsSplitPartName("foo.cold.3"));
  EXPECT_TRUE(IsSplitPartName("_Z3fooi.cold"));
  EXPECT_FALSE(IsSplitPartName("foo.coldness"));
  EXPECT_FALSE(IsSplitPartName("cold_path"));
  EXPECT_FALSE(IsSplitPartName("foo.part.0"));
}

}  // namespace
}  // namespace ptsnap::elf
