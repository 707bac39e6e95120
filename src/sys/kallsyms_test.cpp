#include "sys/kallsyms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasError;
using ::ptsnap::testing::HasValue;

constexpr std::string_view kLive =
    "ffffffff81000000 T _text\n"
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 t helper\n"
    "ffffffff81e00000 T _etext\n"
    "ffffffffc0a01000 t ext4_init\t[ext4]\n"
    "ffffffffc0a05000 T ext4_exit\t[ext4]\n";

TEST(ParseKallsyms, FindsTextBoundsAndModules) {
  Kallsyms k = ParseKallsyms(kLive);
  EXPECT_EQ(k.symbol_count, 6u);
  EXPECT_EQ(k.malformed_lines, 0u);
  EXPECT_FALSE(k.masked);
  EXPECT_EQ(k.stext, 0xffffffff81000000u);
  EXPECT_EQ(k.etext, 0xffffffff81e00000u);
  EXPECT_EQ(k.text, 0xffffffff81000000u);
  EXPECT_EQ(k.modules_start, 0xffffffffc0a01000u);
  EXPECT_EQ(k.modules_end, 0xffffffffc0a05000u);
  ASSERT_EQ(k.symbols.size(), 6u);
  EXPECT_EQ(k.symbols[2].name, "helper");
  EXPECT_EQ(k.symbols[2].type, 't');
  EXPECT_EQ(k.symbols[4].module, "ext4");
}

TEST(ParseKallsyms, ModulePerCpuSymbolsAreNotInTheModuleArea) {
  // As Debian's 6.1 lists a module with a DEFINE_PER_CPU variable.
  Kallsyms k = ParseKallsyms(
      "ffffffff81000000 T _stext\n"
      "0000000000035000 a ptpmu_cpu\t[ptpmu]\n"
      "ffffffffc04a5000 t ptpmu_addr_filters_validate\t[ptpmu]\n"
      "ffffffffc04a8c68 b drop_ptws\t[ptpmu]\n");
  EXPECT_EQ(k.modules_start, 0xffffffffc04a5000u);
  EXPECT_EQ(k.modules_end, 0xffffffffc04a8c68u);
}

TEST(ParseKallsyms, SummaryOnly) {
  Kallsyms k = ParseKallsyms(kLive, /*keep_symbols=*/false);
  EXPECT_TRUE(k.symbols.empty());
  EXPECT_EQ(k.symbol_count, 6u);
  EXPECT_EQ(k.stext, 0xffffffff81000000u);
}

TEST(ParseKallsyms, MaskedAddresses) {
  Kallsyms k = ParseKallsyms(
      "0000000000000000 T _stext\n0000000000000000 T _etext\n0000000000000000 t x\t[mod]\n");
  EXPECT_TRUE(k.masked);
  EXPECT_EQ(k.stext, 0u);
  EXPECT_FALSE(k.modules_start.has_value());
}

TEST(ParseKallsyms, EmptyIsNotMasked) {
  Kallsyms k = ParseKallsyms("");
  EXPECT_FALSE(k.masked);
  EXPECT_EQ(k.symbol_count, 0u);
}

TEST(ParseKallsyms, CountsMalformedLines) {
  Kallsyms k = ParseKallsyms(
      "not a kallsyms line at all\nffffffff81000000 T _stext\nzzzz T foo\n"
      "ffffffff81000000 TT foo\nffffffff81000000 T foo notamodule\n11111111111111111 T big\n");
  EXPECT_EQ(k.symbol_count, 1u);
  EXPECT_EQ(k.malformed_lines, 5u);
  EXPECT_EQ(k.first_malformed, "not a kallsyms line at all");
}

TEST(ReadKallsyms, FromRoot) {
  ptsnap::testing::TempDir dir;
  EXPECT_THAT(ReadKallsyms(base::RootPath(dir.path())), HasError());
  dir.Write("proc/kallsyms", kLive);
  auto k = ReadKallsyms(base::RootPath(dir.path()));
  ASSERT_THAT(k, HasValue());
  EXPECT_EQ(k->etext, 0xffffffff81e00000u);
}

}  // namespace
}  // namespace ptsnap::sys
