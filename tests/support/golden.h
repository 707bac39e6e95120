// Golden-file comparison for tests: `actual` must equal the file's bytes;
// PTSNAP_UPDATE_GOLDEN=1 rewrites the file instead (docs/decoding.md,
// "Golden files").
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "base/file_util.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::testing {

inline void ExpectGoldenFile(const std::string& actual, const std::string& path) {
  if (std::getenv("PTSNAP_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
  }
  auto expected = base::ReadFile(path);
  ASSERT_THAT(expected, HasValue()) << path;
  EXPECT_EQ(actual, *expected) << "regenerate with PTSNAP_UPDATE_GOLDEN=1 if intended";
}

}  // namespace ptsnap::testing
