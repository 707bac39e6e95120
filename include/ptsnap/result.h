// Result<T> and Error: ptsnap's error values. No exception crosses a ptsnap API.
//
// An Error carries a message, an optional errno and a chain of context strings
// added as it travels up ("opening intel_pt event for tid 42: perf_event_open:
// Permission denied") and a kind, for callers that act on the failure (the
// CLI's exit code, an agent's retry) without reading its text. Result<T>
// holds either a T or an Error; it mirrors the small part of std::expected
// we use, so it can be swapped for it in C++23.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ptsnap {

// Set where the cause is known; context added later keeps it.
enum class ErrorKind {
  kOther,
  kNoPmu,           // no intel_pt PMU (VM, old CPU, AMD)
  kPrivilege,       // perf_event_paranoid or capabilities refused it
  kBufferMapping,   // mmap of a perf ring or AUX area failed (locked-memory limits)
  kTraceDirExists,  // refusing to overwrite a recording
  kProcessGone,     // the process exited or never existed
  kTrigger,         // the trigger could not be resolved
  kUsage,           // options that cannot work together, whatever the machine
};

class Error {
 public:
  explicit Error(std::string message, int errnum = 0)
      : message_(std::move(message)), errnum_(errnum) {}

  // An error for a failed system call: message plus strerror(errnum).
  static Error FromErrno(std::string message, int errnum = errno) {
    return Error(std::move(message), errnum);
  }

  [[nodiscard]] const std::string& message() const { return message_; }
  // 0 when the error did not come from a system call.
  [[nodiscard]] int errnum() const { return errnum_; }
  // Outermost context last.
  [[nodiscard]] const std::vector<std::string>& context() const { return context_; }
  [[nodiscard]] ErrorKind kind() const { return kind_; }

  // "outer: inner: message: strerror".
  [[nodiscard]] std::string ToString() const;

  Error& AddContext(std::string what) & {
    context_.push_back(std::move(what));
    return *this;
  }
  Error&& AddContext(std::string what) && {
    context_.push_back(std::move(what));
    return std::move(*this);
  }
  Error& WithKind(ErrorKind kind) & {
    kind_ = kind;
    return *this;
  }
  Error&& WithKind(ErrorKind kind) && {
    kind_ = kind;
    return std::move(*this);
  }

 private:
  std::string message_;
  int errnum_;
  std::vector<std::string> context_;
  ErrorKind kind_ = ErrorKind::kOther;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT(implicit)
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  [[nodiscard]] bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

  Error& error() & { return std::get<1>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(implicit)

  [[nodiscard]] bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const {}

  Error& error() & { return error_; }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_{""};
  bool ok_ = true;
};

inline Result<void> Ok() { return {}; }

}  // namespace ptsnap

#define PTSNAP_CONCAT_INNER(a, b) a##b
#define PTSNAP_CONCAT(a, b) PTSNAP_CONCAT_INNER(a, b)

// Returns the error of `expr` (a Result) from the enclosing function.
#define PTSNAP_TRY(expr)                            \
  do {                                              \
    auto ptsnap_try_result_ = (expr);               \
    if (!ptsnap_try_result_) {                      \
      return std::move(ptsnap_try_result_).error(); \
    }                                               \
  } while (0)

// As PTSNAP_TRY, adding `ctx` (a std::string expression) to the error's chain.
#define PTSNAP_TRY_CTX(expr, ctx)                                   \
  do {                                                              \
    auto ptsnap_try_result_ = (expr);                               \
    if (!ptsnap_try_result_) {                                      \
      return std::move(ptsnap_try_result_).error().AddContext(ctx); \
    }                                                               \
  } while (0)

#define PTSNAP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp) {                                        \
    return std::move(tmp).error();                   \
  }                                                  \
  lhs = std::move(tmp).value()

// `lhs` (a declaration or lvalue) = value of `expr`, or return its error.
#define PTSNAP_ASSIGN_OR_RETURN(lhs, expr) \
  PTSNAP_ASSIGN_OR_RETURN_IMPL(PTSNAP_CONCAT(ptsnap_aor_, __LINE__), lhs, expr)
