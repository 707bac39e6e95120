// Function names as users type them (elf/symbol_match.h), through the
// ptsnap binary under --emulate on tests/programs/cpp_names: --trigger in
// every spelling, its "did you mean", `--trigger ?`'s list and prompt, and
// `ptsnap report TRACE FUNC`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/run_ptsnap.h"
#include "tests/support/temp_dir.h"

namespace {

using ::ptsnap::testing::PtsnapRun;
using ::ptsnap::testing::RunPtsnap;
using ::ptsnap::testing::TempDir;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class Names : public ::testing::Test {
 protected:
  void SetUp() override {
    // meson sets both (tests/recorder/meson.build): losing them must fail
    // every test here, not turn them into skips.
    if (std::getenv("PTSNAP_BIN") == nullptr || std::getenv("PTSNAP_CPP_NAMES") == nullptr)
      FAIL() << "PTSNAP_BIN and PTSNAP_CPP_NAMES are not set: run through `meson test`";
    prog_ = std::getenv("PTSNAP_CPP_NAMES");
  }
  // `ptsnap run --emulate --trigger TRIGGER` into DIR/t.events; the program
  // runs to its end (--after wait), so ptsnap exits with its status, 0.
  PtsnapRun Run(const std::string& trigger, const std::string& extra = "") {
    return RunPtsnap("run --emulate --after wait --trigger '" + trigger + "' -o '" +
                     dir_.path().string() + "/t.events' " + extra + " -- '" + prog_ +
                     "' </dev/null");
  }
  TempDir dir_;
  std::string prog_;
};

TEST_F(Names, TriggerTakesEverySpelling) {
  // One spelling per kind, each naming risky(int) alone.
  for (const char* spelling : {"risky(int)", "_Z5riskyi", "cpp_names:risky(int)"}) {
    SCOPED_TRACE(spelling);
    const PtsnapRun r = Run(spelling);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("[ Trigger armed: risky(int) @ 0x"));
    EXPECT_THAT(r.out, Not(HasSubstr("risky(double) @")));
    EXPECT_THAT(r.out, HasSubstr(std::string("Snapshot 1 taken (trigger: ") + spelling + ")"));
    std::filesystem::remove_all(dir_.path() / "t.ptsnap");
    std::filesystem::remove(dir_.path() / "t.events");
  }
  // Without parameters: both overloads, and the output says so.
  PtsnapRun r = Run("risky");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[ Trigger armed: risky(int) @ 0x"));
  EXPECT_THAT(r.out, HasSubstr("[ Trigger armed: risky(double) @ 0x"));
  std::filesystem::remove_all(dir_.path() / "t.ptsnap");
  // A glob, and a class member without parameters.
  for (const char* spelling : {"*parse*", "names::Parser::parse_line"}) {
    SCOPED_TRACE(spelling);
    r = Run(spelling);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("[ Trigger armed: names::Parser::parse_line(char const*) @ 0x"));
    std::filesystem::remove_all(dir_.path() / "t.ptsnap");
  }
}

TEST_F(Names, TriggerTypoSuggestsAndStartsNothing) {
  const PtsnapRun r = Run("riksy");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("trigger symbol 'riksy' not found"));
  EXPECT_THAT(r.out, HasSubstr("did you mean: risky(int), risky(double)"));
  EXPECT_THAT(r.out, HasSubstr("`--trigger ?` lists the functions"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "t.ptsnap"));
}

TEST_F(Names, TriggerOnTooManyFunctionsListsThem) {
  const PtsnapRun r = Run("*");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("trigger '*' names 11 functions of"));
  EXPECT_THAT(r.out, HasSubstr("a trigger watches at most 4"));
  // --slower-than times one function: two overloads are too many.
  const PtsnapRun slow = Run("risky", "--slower-than 1us");
  EXPECT_EQ(slow.rc, 1);
  EXPECT_THAT(slow.out, HasSubstr("names 2 functions of"));
  EXPECT_THAT(slow.out, HasSubstr("(risky(int), risky(double)); --slower-than times one function"));
}

// stdin not a terminal: the list, then a usage error saying to pass a name.
TEST_F(Names, TriggerQuestionMarkWithoutTerminalListsAndExits2) {
  const PtsnapRun r = Run("?");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("Functions of "));
  EXPECT_THAT(r.out, HasSubstr("  names::Parser::parse_line(char const*)\n"));
  EXPECT_THAT(r.out, HasSubstr("    11  risky(int)\n"));
  // Its libraries' functions, named the way --trigger takes them.
  EXPECT_THAT(r.out, HasSubstr("and of the libraries it links (name one as LIB:NAME, e.g. "));
  EXPECT_THAT(r.out, ContainsRegex(
                         "\n        libc\\.so\\.6 \\([0-9]+ functions: /[^)]*libc\\.so\\.6\\)\n"));
  EXPECT_THAT(r.out, HasSubstr("stdin is not a terminal"));
  EXPECT_THAT(r.out,
              HasSubstr("pass one of the names above, e.g. --trigger 'deregister_tm_clones'"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "t.ptsnap"));
}

// A terminal (script(1)'s pty) with fzf absent: the numbered list and a
// prompt; a number or a name answers it.
TEST_F(Names, TriggerQuestionMarkPromptTakesANumberOrAName) {
  if (ptsnap::testing::RunShell("command -v script").status != 0)
    FAIL() << "script(1) (util-linux) is needed to give ptsnap a terminal";
  if (ptsnap::testing::RunShell("command -v fzf").status == 0)
    GTEST_SKIP() << "fzf is installed: --trigger ? would open it, not the numbered list";
  const std::string bin = std::getenv("PTSNAP_BIN");
  for (const auto& [answer, chosen] :
       {std::pair<std::string, std::string>{"10", "risky(double)"}, {"_Z5riskyi", "_Z5riskyi"}}) {
    SCOPED_TRACE(answer);
    const std::string cmd = "printf '" + answer + "\\n' | script -qec \"'" + bin +
                            "' run --emulate --after wait --trigger '?' -o '" +
                            dir_.path().string() + "/t.events' -- '" + prog_ + "'\" /dev/null";
    const auto r = ptsnap::testing::RunShell(cmd);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("Trigger (number or name): "));
    EXPECT_THAT(r.out, HasSubstr("[ Trigger: " + chosen + " ]"));
    EXPECT_THAT(r.out, HasSubstr("Snapshot 1 taken (trigger: " + chosen + ")"));
    std::filesystem::remove_all(dir_.path() / "t.ptsnap");
    std::filesystem::remove(dir_.path() / "t.events");
  }
}

// `ptsnap report TRACE FUNC` with FUNC as users type it.
TEST_F(Names, ReportMatchesFuncAsTyped) {
  const std::string trace = dir_.path().string() + "/r.ptsnap";
  const PtsnapRun rec = RunPtsnap("run --emulate --after wait --no-decode --trace-dir '" + trace +
                                  "' -- '" + prog_ + "' </dev/null");
  ASSERT_EQ(rec.rc, 0) << rec.out;
  const PtsnapRun r =
      RunPtsnap("report '" + trace + "' risky 'risky(int)' _Z5riskyd '*parse_line*' riksy");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nrisky [risky(double), risky(int)]: 5 calls, durations:\n"));
  EXPECT_THAT(r.out, HasSubstr("\nrisky(int): 3 calls, durations:\n"));
  EXPECT_THAT(r.out, HasSubstr("\nrisky(double): 2 calls, durations:\n"));
  EXPECT_THAT(r.out, HasSubstr("\nnames::Parser::parse_line(char const*): 1 calls, durations:\n"));
  EXPECT_THAT(r.out, HasSubstr("\nriksy: 0 calls (not in this trace)\n"
                               "  did you mean: risky(int), risky(double)"));
}

}  // namespace
