// Logging to stderr with verbosity levels. `-v` raises the level by one.
// Level 0 (default) prints errors and warnings; 1 info; 2 debug; 3 trace.
// Not thread-safe to reconfigure; safe to log from any thread.
#pragma once

#include <sstream>
#include <string_view>

namespace ptsnap::base {

enum class LogLevel { kError = -2, kWarning = -1, kInfo = 1, kDebug = 2, kTrace = 3 };

void SetVerbosity(int verbosity);
[[nodiscard]] int Verbosity();
[[nodiscard]] bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

}  // namespace ptsnap::base

// PTSNAP_LOG(kInfo) << "opened " << n << " events";
#define PTSNAP_LOG(level)                                                                   \
  for (bool ptsnap_log_once_ = ::ptsnap::base::LogEnabled(::ptsnap::base::LogLevel::level); \
       ptsnap_log_once_; ptsnap_log_once_ = false)                                          \
  ::ptsnap::base::internal::LogStream(::ptsnap::base::LogLevel::level).stream()

namespace ptsnap::base::internal {
class LogStream {
 public:
  explicit LogStream(LogLevel level) : level_(level) {}
  ~LogStream() { LogLine(level_, ss_.str()); }
  LogStream(const LogStream&) = delete;
  LogStream& operator=(const LogStream&) = delete;
  std::ostringstream& stream() { return ss_; }

 private:
  LogLevel level_;
  std::ostringstream ss_;
};
}  // namespace ptsnap::base::internal
