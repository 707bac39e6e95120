#include "record/elf_symbols.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/exec_script.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

extern "C" __attribute__((noinline, used)) int elf_symbols_test_probe_fn(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x * 3;
}

// Overloads with C++ names, as users see them in `ptsnap report`.
namespace elf_symbols_test_ns {
__attribute__((noinline, used)) int Overloaded(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x + 1;
}
__attribute__((noinline, used)) int Overloaded(double x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return static_cast<int>(x) + 2;
}
}  // namespace elf_symbols_test_ns

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

// Every spelling of elf/symbol_match.h reaches the same breakpoint address.
TEST(ElfSymbols, NamesAsUsersTypeThem) {
  const uint64_t by_int =
      reinterpret_cast<uint64_t>(static_cast<int (*)(int)>(&elf_symbols_test_ns::Overloaded));
  const uint64_t by_double =
      reinterpret_cast<uint64_t>(static_cast<int (*)(double)>(&elf_symbols_test_ns::Overloaded));
  for (const char* spelling :
       {"elf_symbols_test_ns::Overloaded(int)", "_ZN19elf_symbols_test_ns10OverloadedEi",
        "record_elf_symbols_test:elf_symbols_test_ns::Overloaded(int)"}) {
    SCOPED_TRACE(spelling);
    auto points = ResolveTrigger(spelling, getpid());
    ASSERT_THAT(points, HasValue());
    ASSERT_EQ(points->size(), 1u);
    EXPECT_EQ((*points)[0].address, by_int);
    EXPECT_EQ((*points)[0].description.rfind("elf_symbols_test_ns::Overloaded(int) @ 0x", 0), 0u);
  }
  // Without parameters, or as a glob: both overloads, one breakpoint each.
  for (const char* spelling : {"elf_symbols_test_ns::Overloaded", "*test_ns::Overload*"}) {
    SCOPED_TRACE(spelling);
    auto points = ResolveTrigger(spelling, getpid());
    ASSERT_THAT(points, HasValue());
    ASSERT_EQ(points->size(), 2u);
    std::vector<uint64_t> got{(*points)[0].address, (*points)[1].address};
    EXPECT_THAT(got, ::testing::UnorderedElementsAre(by_int, by_double));
  }
}

TEST(ElfSymbols, TypoListsTheClosestNames) {
  EXPECT_THAT(ResolveTrigger("elf_symbols_test_ns::Overlaoded", getpid()),
              HasErrorContaining("did you mean: elf_symbols_test_ns::Overloaded(int), "
                                 "elf_symbols_test_ns::Overloaded(double)"));
  EXPECT_THAT(CheckTriggerInFile("elf_symbols_test_probe_fm", "/proc/self/exe"),
              HasErrorContaining("did you mean: elf_symbols_test_probe_fn"));
}

TEST(ElfSymbols, TooManyFunctionsAreListed) {
  elf::Image image;
  for (int i = 0; i < 6; ++i)
    image.functions.push_back({"_Z4workv" + std::to_string(i), 0x1000u + i * 16u, 16});
  image.functions.push_back({"_Z5parsei", 0x2000, 16});
  image.functions.push_back({"_Z5parsed", 0x3000, 16});
  image.functions.push_back({"parse_all", 0x4000, 16});
  auto r = MatchTriggerFunctions(image, "*parse*", "prog", 2);
  EXPECT_THAT(r, HasErrorContaining("trigger '*parse*' names 3 functions of prog (parse(int), "
                                    "parse(double), parse_all); a trigger watches at most 2"));
  EXPECT_EQ(r.error().kind(), ErrorKind::kTrigger);
  EXPECT_THAT(
      MatchTriggerFunctions(image, "parse", "prog", 1),
      HasErrorContaining("--slower-than times one function: name fewer, e.g. 'parse(int)'"));
  auto two = MatchTriggerFunctions(image, "parse", "prog", 2);
  ASSERT_THAT(two, HasValue());
  EXPECT_EQ(two->size(), 2u);
}

// A stripped program names only its exported functions: a miss there says
// so, not only "check the spelling".
TEST(ElfSymbols, AMissInAStrippedProgramSaysItIsStripped) {
  elf::Image image;
  image.functions = {{"main", 0x10, 4}};
  EXPECT_THAT(MatchTriggerFunctions(image, "risky", "prog", 1),
              HasErrorContaining("prog is stripped (no .symtab), so only its exported functions "
                                 "have names: trigger on one of those, use addr:HEX, or record a "
                                 "build with symbols"));
  image.has_symtab = true;
  auto r = MatchTriggerFunctions(image, "risky", "prog", 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message().find("stripped"), std::string::npos);
}

TEST(ElfSymbols, TriggerMenuAndItsAnswers) {
  elf::Image image;
  image.functions = {{"main", 0x10, 4}, {"_Z5riskyi", 0x20, 4}, {"_Z5riskyi", 0x20, 4}};
  const std::vector<std::string> choices = TriggerChoices(image);
  ASSERT_EQ(choices, (std::vector<std::string>{"main", "risky(int)"}));
  EXPECT_EQ(ParseTriggerChoice("2\n", choices).value_or(""), "risky(int)");
  EXPECT_EQ(ParseTriggerChoice(" risky ", choices).value_or(""), "risky");
  EXPECT_THAT(ParseTriggerChoice("3", choices), HasErrorContaining("3 is not in the list (1-2)"));
  EXPECT_THAT(ParseTriggerChoice("", choices), HasErrorContaining("no function chosen"));
}

// A script's trigger is looked for in its interpreter, which execve runs
// (a pyenv shim, `#!/usr/bin/env bash`, once read as "not an ELF file").
TEST(ElfSymbols, AScriptsTriggerIsCheckedInItsInterpreter) {
  // The kernel's reading of the line (base/exec_script.h), shared with the emulator.
  EXPECT_EQ(base::ParseScriptInterpreter("#!/bin/sh -e\necho")->path, "/bin/sh");
  EXPECT_EQ(base::ParseScriptInterpreter("#! /usr/bin/env bash\n")->path, "/usr/bin/env");
  EXPECT_EQ(base::ParseScriptInterpreter("#!\n"), std::nullopt);
  EXPECT_EQ(base::ParseScriptInterpreter("\x7f"
                                         "ELF"),
            std::nullopt);
  ::ptsnap::testing::TempDir tmp;
  tmp.Write("shim", "#!/bin/sh\nexec true\n");
  const std::filesystem::path shim = tmp.path() / "shim";
  // libc's fflush, which /bin/sh links: found.
  EXPECT_THAT(CheckTriggerInFile("fflush", shim), HasValue());
  const auto missing = CheckTriggerInFile("no_such_function_xyz", shim);
  EXPECT_THAT(missing, HasErrorContaining("no function of that name in /bin/sh"));
  EXPECT_THAT(missing, HasErrorContaining(shim.string() +
                                          " is a script, run by /bin/sh: the "
                                          "trigger is looked for there, not in a program the "
                                          "script starts later"));
  EXPECT_EQ(missing.error().kind(), ErrorKind::kTrigger);
  tmp.Write("bare", "#!\n");
  EXPECT_THAT(CheckTriggerInFile("main", tmp.path() / "bare"),
              HasErrorContaining("is a script whose #! line names no interpreter"));
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
