#include "record/elf_symbols.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/result_matchers.h"

extern "C" __attribute__((noinline, used)) int elf_symbols_test_probe_fn(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x * 3;
}

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;

TEST(ElfSymbols, ResolvesOwnFunctionToItsRuntimeAddress) {
  // The test binary is PIE on Debian: this checks the load-base arithmetic
  // against the address the loader actually chose.
  auto points = ResolveTrigger("elf_symbols_test_probe_fn", getpid());
  ASSERT_THAT(points, HasValue());
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ((*points)[0].address, reinterpret_cast<uint64_t>(&elf_symbols_test_probe_fn));
  EXPECT_EQ((*points)[0].symbol, "elf_symbols_test_probe_fn");
  EXPECT_THAT((*points)[0].description, HasSubstr("elf_symbols_test_probe_fn @ 0x"));
}

TEST(ElfSymbols, MissingSymbolNamesItAndTheExecutable) {
  EXPECT_THAT(ResolveTrigger("no_such_function_xyz", getpid()),
              HasErrorContaining("trigger symbol 'no_such_function_xyz' not found"));
}

TEST(ElfSymbols, StopIndicatorMissingSaysHowToAddIt) {
  EXPECT_THAT(ResolveTrigger(".", getpid()),
              HasErrorContaining("include <ptsnap/stop_indicator.h>"));
}

TEST(ElfSymbols, AddrSelector) {
  auto points = ResolveTrigger("addr:0x401136", getpid());
  ASSERT_THAT(points, HasValue());
  EXPECT_EQ((*points)[0].address, 0x401136u);
  points = ResolveTrigger("addr:deadbeef", getpid());
  ASSERT_THAT(points, HasValue());
  EXPECT_EQ((*points)[0].address, 0xdeadbeefu);
  EXPECT_THAT(ResolveTrigger("addr:zz", getpid()), HasErrorContaining("expected addr:HEX"));
}

TEST(ElfSymbols, RuntimeAddressArithmetic) {
  elf::Image pie{true, 0x0, {}};
  elf::Function fn{"f", 0x1139, 10};
  EXPECT_EQ(RuntimeAddress(pie, fn, 0x555555554000), 0x555555555139u);
  elf::Image exec{false, 0x400000, {}};
  elf::Function fn2{"g", 0x401136, 10};
  EXPECT_EQ(RuntimeAddress(exec, fn2, 0x400000), 0x401136u);
}

TEST(ElfSymbols, LowestMappingStartPicksTheFirstMappingOfThePath) {
  const char* maps =
      "555555556000-555555557000 r-xp 00001000 08:01 42  /usr/bin/my prog\n"
      "555555554000-555555556000 r--p 00000000 08:01 42  /usr/bin/my prog\n"
      "7ffff7dd3000-7ffff7dfc000 r-xp 00000000 08:01 7   /lib/ld.so\n"
      "7ffff7ff0000-7ffff7ff1000 rw-p 00000000 00:00 0 \n";
  EXPECT_EQ(LowestMappingStart(maps, "/usr/bin/my prog"), 0x555555554000u);
  EXPECT_EQ(LowestMappingStart(maps, "/not/there"), std::nullopt);
}

}  // namespace
}  // namespace ptsnap::record
