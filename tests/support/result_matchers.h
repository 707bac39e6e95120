// gmock matchers for Result<T> that print the error on failure.
#pragma once

#include <gmock/gmock.h>

#include "ptsnap/result.h"

namespace ptsnap::testing {

MATCHER(HasValue, "has a value") {
  if (arg.has_value()) return true;
  *result_listener << "error: " << arg.error().ToString();
  return false;
}

MATCHER(HasError, "has an error") {
  if (!arg.has_value()) {
    *result_listener << "error: " << arg.error().ToString();
    return true;
  }
  return false;
}

MATCHER_P(HasErrorContaining, text, "has an error containing \"" + std::string(text) + "\"") {
  if (arg.has_value()) {
    *result_listener << "has a value";
    return false;
  }
  std::string s = arg.error().ToString();
  *result_listener << "error: " << s;
  return s.find(text) != std::string::npos;
}

MATCHER_P(HasErrorKind, kind, "has an error of kind " + ::testing::PrintToString(kind)) {
  if (arg.has_value()) {
    *result_listener << "has a value";
    return false;
  }
  *result_listener << "error of kind " << ::testing::PrintToString(arg.error().kind()) << ": "
                   << arg.error().ToString();
  return arg.error().kind() == kind;
}

}  // namespace ptsnap::testing
