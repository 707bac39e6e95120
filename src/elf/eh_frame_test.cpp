#include "elf/eh_frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
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

// A hand-made .eh_frame at `vaddr`: one CIE at offset 0 ("zR",
// pc-relative sdata4 pointers, code align 1, data align -8, RA r16; its
// initial instructions def_cfa rsp+8 and r16 at cfa-8), the FDEs added,
// and the zero terminator.
class HandMadeEhFrame {
 public:
  explicit HandMadeEhFrame(uint64_t vaddr) : vaddr_(vaddr) {
    // length, id 0, version 1, "zR", code align 1, data align -8, RA reg 16,
    // aug length 1, encoding 0x1b; def_cfa rsp+8; offset r16 at cfa-8.
    const std::string cie_body = std::string(
        "\x00\x00\x00\x00\x01zR\x00\x01\x78\x10\x01\x1b"
        "\x0c\x07\x08\x90\x01",
        18);
    U32(static_cast<uint32_t>(cie_body.size()));
    b_ += cie_body;
  }
  // An FDE of [vaddr + start_rel, + range) with call frame instructions `insns`.
  void Fde(int32_t start_rel, uint32_t range, const std::string& insns) {
    const size_t at = b_.size();
    U32(static_cast<uint32_t>(4 + 4 + 4 + 1 + insns.size()));
    U32(static_cast<uint32_t>(at + 4));  // back to the CIE at 0
    const uint64_t field = vaddr_ + b_.size();
    U32(static_cast<uint32_t>(start_rel - static_cast<int32_t>(field - vaddr_)));
    U32(range);
    b_.push_back(0);  // augmentation length
    b_ += insns;
  }
  std::string Finish() {
    U32(0);  // terminator
    return b_;
  }

 private:
  void U32(uint32_t v) { b_.append(reinterpret_cast<const char*>(&v), 4); }
  uint64_t vaddr_;
  std::string b_;
};

// Hand-made: one CIE ("zR", pc-relative sdata4 pointers, CFA rsp+8) and two
// FDEs, one that keeps the CIE's CFA and one that sets CFA offset 16 before
// its first advance.
TEST(EhFrame, ParsesAHandMadeSection) {
  const uint64_t vaddr = 0x2000;
  HandMadeEhFrame frame(vaddr);
  frame.Fde(0x100, 0x40, std::string("\x41\x0e\x10", 3));  // advance 1; def_cfa_offset 16
  frame.Fde(0x200, 0x20, std::string("\x0e\x30\x41", 3));  // def_cfa_offset 48; advance 1
  const std::string b = frame.Finish();
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

// The CFA and return-address columns as readelf --debug-dump=frames-interp
// prints them: "rsp+8", "exp"; "c-8", "u".
std::string CfaText(const FrameRule& r) {
  static const char* const kNames[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
                                       "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip"};
  if (!r.cfa_known) return "exp";
  const std::string reg =
      r.cfa_reg < std::size(kNames) ? kNames[r.cfa_reg] : "r" + std::to_string(r.cfa_reg);
  return reg + (r.cfa_offset >= 0 ? "+" : "") + std::to_string(r.cfa_offset);
}
std::string RaText(const FrameRule& r) {
  switch (r.ra) {
    case FrameRule::Ra::kSaved:
      return "c" + std::string(r.ra_offset >= 0 ? "+" : "") + std::to_string(r.ra_offset);
    case FrameRule::Ra::kUndefined: return "u";
    case FrameRule::Ra::kOther: return "other";
  }
  return "";
}

// One row readelf (binutils, an independent reader) interprets: [start,
// end) with its CFA and return-address columns as printed.
struct ReadelfRow {
  uint64_t start = 0, end = 0;
  std::string cfa, ra;
};

// Every row of `path`'s .eh_frame as readelf --debug-dump=frames-interp
// prints them. An FDE without instructions of its own has its CIE's row
// over its whole range.
std::vector<ReadelfRow> ReadelfRows(const std::string& path) {
  auto run = RunShell("readelf --debug-dump=frames-interp " + path);
  EXPECT_EQ(run.status, 0);
  static const std::regex kCie(R"(^([0-9a-f]+) [0-9a-f]+ 0+ CIE)");
  static const std::regex kFde(
      R"(^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  static const std::regex kHead(R"(^\s+LOC\s+CFA\s+(.*?)\s*$)");
  static const std::regex kRow(R"(^([0-9a-f]{16}) (\S+)\s+(.*?)\s*$)");
  std::vector<ReadelfRow> out;
  std::map<std::string, std::pair<std::string, std::string>> cie_rule;  // offset -> cfa, ra
  std::string cie;  // the CIE being read, or the current FDE's
  bool in_cie = false;
  uint64_t fde_start = 0, fde_end = 0;
  size_t ra_col = 0, fde_first = 0;
  auto end_fde = [&] {
    if (in_cie || fde_end == 0) return;
    if (fde_first == out.size()) {
      auto it = cie_rule.find(cie);
      if (it != cie_rule.end())
        out.push_back({fde_start, fde_end, it->second.first, it->second.second});
    }
    for (size_t i = fde_first; i < out.size(); ++i)
      out[i].end = i + 1 < out.size() ? out[i + 1].start : fde_end;
    fde_end = 0;
  };
  std::istringstream in(run.out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kCie)) {
      end_fde();
      in_cie = true;
      cie = m[1];
    } else if (std::regex_search(line, m, kFde)) {
      end_fde();
      in_cie = false;
      cie = m[1];
      fde_start = std::stoull(m[2], nullptr, 16);
      fde_end = std::stoull(m[3], nullptr, 16);
      fde_first = out.size();
    } else if (std::regex_search(line, m, kHead)) {
      // The return-address column is the last ("ra").
      std::istringstream cols(m[1].str());
      std::vector<std::string> names;
      for (std::string c; cols >> c;) names.push_back(c);
      ra_col = names.size() - 1;
    } else if (std::regex_search(line, m, kRow)) {
      std::istringstream cols(m[3].str());
      std::vector<std::string> v;
      for (std::string c; cols >> c;) v.push_back(c);
      const std::string ra = ra_col < v.size() ? v[ra_col] : "";
      if (in_cie) {
        cie_rule[cie] = {m[2], ra};
      } else if (fde_end != 0) {
        out.push_back({std::stoull(m[1], nullptr, 16), 0, m[2], ra});
      }
    }
  }
  end_fde();
  return out;
}

// Every row readelf interprets has the rule ParseCfaTable finds, at its first
// and last address: this test binary and a Debian binary (prologues,
// epilogues with remember/restore_state, PLT expressions).
TEST(CfaTable, AgreesWithReadelfOnEveryRow) {
  for (std::string path : {std::string("/proc/self/exe"), std::string("/usr/bin/ls")}) {
    if (path == "/proc/self/exe") path = std::filesystem::read_symlink(path).string();
    auto table = ReadCfaTable(path);
    ASSERT_TRUE(table.has_value()) << path;
    const std::vector<ReadelfRow> rows = ReadelfRows(path);
    EXPECT_GT(rows.size(), 200u) << path;
    size_t checked = 0;
    for (const ReadelfRow& row : rows) {
      if (row.end <= row.start) continue;  // an advance past the FDE's end
      // readelf's "u" column is an undefined rule; other letters (s, r, exp)
      // are a rule ParseCfaTable does not follow.
      const std::string want_ra =
          row.ra == "u" || row.ra.starts_with("c") ? row.ra : std::string("other");
      for (uint64_t at : {row.start, row.end - 1}) {
        const std::optional<FrameRule> got = table->Find(at);
        ASSERT_TRUE(got.has_value()) << path << " at " << std::hex << at;
        EXPECT_EQ(CfaText(*got), row.cfa) << path << " at " << std::hex << at;
        EXPECT_EQ(RaText(*got), want_ra) << path << " at " << std::hex << at;
      }
      ++checked;
    }
    EXPECT_GT(checked, 200u) << path;
  }
}

// A hand-made FDE through a prologue, a body, an early return inside
// remember/restore_state, an epilogue; a PLT-like expression; an undefined
// return address; and an FDE cut short by an unknown opcode.
TEST(CfaTable, FollowsAHandMadeSection) {
  const uint64_t vaddr = 0x2000;
  HandMadeEhFrame frame(vaddr);  // the CIE of ParsesAHandMadeSection
  // 0x100: push %rbp (1 byte): CFA rsp+16, rbp at cfa-16; mov %rsp,%rbp
  // (3 bytes): CFA rbp+16; at 0x110 remember_state, pop %rbp: CFA rsp+8,
  // ret; at 0x112 restore_state (rbp+16 again); at 0x120 pop: rsp+8.
  frame.Fde(0x100, 0x30,
            std::string("\x41\x0e\x10\x86\x02"  // advance 1; def_cfa_offset 16; offset r6 cfa-16
                        "\x43\x0d\x06"          // advance 3; def_cfa_register r6
                        "\x4c\x0a\x0c\x07\x08"  // advance 12 (0x110); remember; def_cfa rsp+8
                        "\x42\x0b"              // advance 2 (0x112); restore_state
                        "\x4e\x0c\x07\x08",     // advance 14 (0x120); def_cfa rsp+8
                        19));
  // 0x200: a PLT stub's CFA expression (DW_OP_breg7 8; ...), after one row.
  frame.Fde(0x200, 0x10, std::string("\x46\x0f\x03\x77\x08\x9c", 6));
  // 0x300: _start: the return address undefined (DW_CFA_undefined r16).
  frame.Fde(0x300, 0x08, std::string("\x07\x10", 2));
  // 0x400: an unknown opcode (0x3f) after the first row: the rest unknown.
  frame.Fde(0x400, 0x20, std::string("\x44\x0e\x10\x3f\x44\x0e\x08", 7));
  const std::string b = frame.Finish();
  const CfaTable table = ParseCfaTable(Bytes(b), vaddr);
  auto cfa_at = [&](uint64_t off) -> std::string {
    auto r = table.Find(vaddr + off);
    return r ? CfaText(*r) + " " + RaText(*r) : "none";
  };
  EXPECT_EQ(cfa_at(0x0ff), "none");
  EXPECT_EQ(cfa_at(0x100), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x101), "rsp+16 c-8");
  EXPECT_EQ(cfa_at(0x103), "rsp+16 c-8");
  EXPECT_EQ(cfa_at(0x104), "rbp+16 c-8");
  EXPECT_EQ(cfa_at(0x10f), "rbp+16 c-8");
  EXPECT_EQ(cfa_at(0x110), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x111), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x112), "rbp+16 c-8");
  EXPECT_EQ(cfa_at(0x11f), "rbp+16 c-8");
  EXPECT_EQ(cfa_at(0x120), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x12f), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x130), "none");
  EXPECT_EQ(cfa_at(0x205), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x206), "exp c-8");
  EXPECT_EQ(cfa_at(0x20f), "exp c-8");
  EXPECT_EQ(cfa_at(0x300), "rsp+8 u");
  EXPECT_EQ(cfa_at(0x403), "rsp+8 c-8");
  EXPECT_EQ(cfa_at(0x404), "none");
  EXPECT_EQ(cfa_at(0x41f), "none");
  // Cut anywhere: never a crash, never an overlap.
  for (size_t n = 0; n < b.size(); ++n) {
    const CfaTable cut = ParseCfaTable(Bytes(b.substr(0, n)), vaddr);
    for (size_t i = 1; i < cut.row_list().size(); ++i)
      EXPECT_GE(cut.row_list()[i].start, cut.row_list()[i - 1].end);
  }
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
