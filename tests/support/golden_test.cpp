// The golden check must be able to fail: on a wrong golden, and on every
// run that was asked to rewrite goldens (under CI without writing).
#include "tests/support/golden.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "tests/support/temp_dir.h"

namespace ptsnap::testing {
namespace {

std::string g_path;  // EXPECT_NONFATAL_FAILURE's statement sees only globals

// Runs with PTSNAP_UPDATE_GOLDEN and CI unset, and puts them back after: the
// other tests of this binary may be rewriting goldens.
class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"PTSNAP_UPDATE_GOLDEN", "CI"}) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
    g_path = tmp_.Write("golden.txt", "expected\n").string();
  }
  void TearDown() override {
    for (const char* v : {"PTSNAP_UPDATE_GOLDEN", "CI"}) {
      auto it = saved_.find(v);
      if (it == saved_.end()) {
        ::unsetenv(v);
      } else {
        ::setenv(v, it->second.c_str(), 1);
      }
    }
  }
  std::map<std::string, std::string> saved_;
  std::string Contents() { return *base::ReadFile(g_path); }
  TempDir tmp_;
};

TEST_F(GoldenTest, EqualPassesAndADifferenceFails) {
  ExpectGoldenFile("expected\n", g_path);
  EXPECT_NONFATAL_FAILURE(ExpectGoldenFile("corrupted\n", g_path), "differs");
}

TEST_F(GoldenTest, ARewritingRunWritesAndNeverPasses) {
  ::setenv("PTSNAP_UPDATE_GOLDEN", "1", 1);
  EXPECT_NONFATAL_FAILURE(ExpectGoldenFile("new\n", g_path), "rewrote");
  EXPECT_EQ(Contents(), "new\n");
}

TEST_F(GoldenTest, UnderCiNothingIsWrittenAndTheRunFails) {
  ::setenv("PTSNAP_UPDATE_GOLDEN", "1", 1);
  ::setenv("CI", "true", 1);
  EXPECT_NONFATAL_FAILURE(ExpectGoldenFile("corrupted\n", g_path), "under CI");
  EXPECT_EQ(Contents(), "expected\n");
}

// Goldens must not depend on where the checkout is: an absolute DSO path
// keeps its file name only; other text is untouched.
TEST(GoldenPaths, DsoPathsKeepTheirFileName) {
  EXPECT_EQ(WithoutBuildPaths("1 2 3 B main via=call dso=/home/x/build/prog\n"
                              "1 2 3 B f via=call dso=[kernel.kallsyms]\n"
                              "1 2 3 E g begin=1 via=return dso=/usr/lib/libc.so.6"),
            "1 2 3 B main via=call dso=prog\n"
            "1 2 3 B f via=call dso=[kernel.kallsyms]\n"
            "1 2 3 E g begin=1 via=return dso=libc.so.6");
  EXPECT_EQ(WithoutBuildPaths("10 2 3 I [decode error: x /a/b]\n"),
            "10 2 3 I [decode error: x /a/b]\n");
}

}  // namespace
}  // namespace ptsnap::testing
