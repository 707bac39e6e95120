#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

namespace ptsnap::base {
namespace {
std::atomic<int> g_verbosity{0};

const char* Prefix(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error: ";
    case LogLevel::kWarning: return "warning: ";
    case LogLevel::kInfo: return "";
    case LogLevel::kDebug: return "debug: ";
    case LogLevel::kTrace: return "trace: ";
  }
  return "";
}
}  // namespace

void SetVerbosity(int verbosity) { g_verbosity.store(verbosity, std::memory_order_relaxed); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= Verbosity(); }

void LogLine(LogLevel level, std::string_view message) {
  // One write() per line so lines from threads do not interleave.
  std::string line = "ptsnap: ";
  line += Prefix(level);
  line += message;
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ptsnap::base
