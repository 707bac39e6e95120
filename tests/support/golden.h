// Golden-file comparison for tests: `actual` must equal the file's bytes.
//
// Goldens are rewritten only by `tools/dev update-goldens` (docs/testing.md,
// "Golden files"), which runs the golden tests with PTSNAP_UPDATE_GOLDEN=1.
// A run with that variable set rewrites the file and then fails, so a stray
// export can never turn the checks into a passing run that compared a file
// with itself; under CI (CI set) it fails without writing anything.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "base/file_util.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::testing {

// Whether this run was asked to rewrite goldens. Writes nothing; adds the
// failure that such a run always ends with, naming `path`. Returns true
// when the caller should write `path` (never under CI).
inline bool RewriteGolden(const std::string& path) {
  if (std::getenv("PTSNAP_UPDATE_GOLDEN") == nullptr) return false;
  if (std::getenv("CI") != nullptr) {
    ADD_FAILURE() << "PTSNAP_UPDATE_GOLDEN is set under CI: goldens are rewritten only by "
                     "tools/dev update-goldens, never by a test run (not writing "
                  << path << ")";
    return false;
  }
  ADD_FAILURE() << "rewrote " << path
                << " (PTSNAP_UPDATE_GOLDEN is set): review the diff, then run the tests "
                   "without it";
  return true;
}

// Goldens hold no path of this checkout: in .events lines a DSO given by
// absolute path (the test programs' own, under the build directory) keeps
// only its file name.
inline std::string WithoutBuildPaths(const std::string& text) {
  std::string out;
  size_t at = 0;
  for (size_t d; (d = text.find(" dso=/", at)) != std::string::npos;) {
    size_t end = text.find('\n', d);
    if (end == std::string::npos) end = text.size();
    size_t slash = text.rfind('/', end);
    out.append(text, at, d + 5 - at);
    out.append(text, slash + 1, end - slash - 1);
    at = end;
  }
  out.append(text, at, std::string::npos);
  return out;
}

inline void ExpectGoldenFile(const std::string& raw, const std::string& path) {
  const std::string actual = WithoutBuildPaths(raw);
  if (std::getenv("PTSNAP_UPDATE_GOLDEN") != nullptr) {
    if (RewriteGolden(path)) std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  auto expected = base::ReadFile(path);
  ASSERT_THAT(expected, HasValue()) << path;
  EXPECT_EQ(actual, *expected) << path
                               << " differs; if the change is intended, run "
                                  "tools/dev update-goldens and review the diff";
}

}  // namespace ptsnap::testing
