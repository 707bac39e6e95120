#include "base/string_util.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace ptsnap::base {

std::string_view Trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) break;
    s.remove_prefix(pos + 1);
  }
  return out;
}

std::vector<std::string_view> SplitWhitespace(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::optional<uint64_t> ParseUint(std::string_view s, int base) {
  s = Trim(s);
  if (base == 0) {
    if (StartsWith(s, "0x") || StartsWith(s, "0X")) {
      s.remove_prefix(2);
      base = 16;
    } else {
      base = 10;
    }
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> ParseDurationNs(std::string_view s) {
  s = Trim(s);
  size_t n = 0;
  while (n < s.size() && ((s[n] >= '0' && s[n] <= '9') || s[n] == '.')) ++n;
  const std::string_view number = s.substr(0, n);
  const std::string_view unit = Trim(s.substr(n));
  double scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us" || unit == "\xc2\xb5s") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (unit == "m" || unit == "min") scale = 60e9;
  if (unit == "h") scale = 3600e9;
  if (number.empty() || scale == 0 || number.find('.') != number.rfind('.') || number == ".")
    return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
  const double ns = v * scale;
  if (ns >= 9.2e18) return std::nullopt;  // llround's long long
  return static_cast<uint64_t>(std::llround(ns));
}

std::optional<int64_t> ParseInt(std::string_view s, int base) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string HexBytes(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    const auto u = static_cast<unsigned char>(ch);
    out.push_back(kDigits[u >> 4]);
    out.push_back(kDigits[u & 15]);
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

std::string ExactSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (3 - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + " " + kUnits[i];
  }
  return std::to_string(bytes) + " bytes";
}

std::string FormatDuration(uint64_t ns) {
  auto fixed3 = [](uint64_t v, uint64_t unit, const char* name) {
    const uint64_t milli = (v * 1000 + unit / 2) / unit;  // thousandths of `unit`
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%llu.%03llu %s", static_cast<unsigned long long>(milli / 1000),
                  static_cast<unsigned long long>(milli % 1000), name);
    return std::string(buf);
  };
  if (ns < 1'000) return std::to_string(ns) + " ns";
  if (ns < 1'000'000) return fixed3(ns, 1'000, "us");
  if (ns < 1'000'000'000) return fixed3(ns, 1'000'000, "ms");
  return fixed3(ns, 1'000'000'000, "s");
}

std::string ApproxSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  std::string exact = std::to_string(bytes) + " bytes";
  if (bytes < 1024) return exact;
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return exact + " (" + buf + ")";
}

}  // namespace ptsnap::base
