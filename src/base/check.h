// PTSNAP_CHECK: a broken invariant, a bug in ptsnap. Prints where and what
// to stderr and aborts (a core dump is the report). Never for input: bad
// files, kernel data, user flags and trace errors get a Result error or a
// marker in the output (docs/architecture.md, "Errors").
//
//   PTSNAP_CHECK(image != nullptr) << "pt_image_alloc: out of memory";
//   PTSNAP_CHECK_OK(pt_image_copy(dst, src));  // a libipt call that cannot fail
//
// Both are always on (release builds too): what they guard is cheap next to
// decoding a trace with a corrupted state.
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

namespace ptsnap::base::internal {

// Collects the message; aborts when destroyed at the end of the statement.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* what) {
    out_ << file << ":" << line << ": check failed: " << what;
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << out_.str() << " (a bug in ptsnap: please report it)" << std::endl;
    std::abort();
  }
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    out_ << (first_ ? ": " : "") << v;
    first_ = false;
    return *this;
  }

 private:
  std::ostringstream out_;
  bool first_ = true;
};

// Lets `PTSNAP_CHECK(c) << ...` be one expression of type void.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace ptsnap::base::internal

#define PTSNAP_CHECK(cond)                       \
  (cond) ? (void)0                               \
         : ::ptsnap::base::internal::Voidify() & \
               ::ptsnap::base::internal::CheckFailure(__FILE__, __LINE__, #cond)

// A call returning an int status that is negative only on a bug (libipt's
// -pte_* codes for invalid arguments, out of memory).
#define PTSNAP_CHECK_OK(call)                                                                 \
  for (int ptsnap_check_status_ = (call); ptsnap_check_status_ < 0; ptsnap_check_status_ = 0) \
  ::ptsnap::base::internal::CheckFailure(__FILE__, __LINE__, #call " >= 0")                   \
      << "status " << ptsnap_check_status_
