#include "base/string_util.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>

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

std::optional<uint64_t> ParseDurationNs(std::string_view text, std::string_view default_unit) {
  const std::string_view s = Trim(text);
  size_t i = 0;
  uint64_t whole = 0;
  size_t whole_digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++whole_digits) {
    if (whole > (UINT64_MAX - 9) / 10) return std::nullopt;
    whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  // Up to 9 decimals, kept as the exact fraction frac / scale.
  uint64_t frac = 0, scale = 1;
  if (i < s.size() && s[i] == '.') {
    size_t frac_digits = 0;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits >= 9) continue;
      frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
      scale *= 10;
    }
    if (frac_digits == 0) return std::nullopt;
  }
  if (whole_digits == 0 && scale == 1) return std::nullopt;
  std::string unit;
  for (char c : s.substr(i))
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty()) unit = default_unit;
  uint64_t mult = 0;
  if (unit == "ns") mult = 1;
  if (unit == "us" || unit == "\xc2\xb5s") mult = 1'000;
  if (unit == "ms") mult = 1'000'000;
  if (unit == "s") mult = 1'000'000'000;
  if (unit == "m" || unit == "min") mult = 60'000'000'000;
  if (unit == "h") mult = 3'600'000'000'000;
  if (mult == 0 || whole > (UINT64_MAX - mult) / mult) return std::nullopt;
  // Units of a second or more are multiples of 10^9, so of `scale`: exact.
  // Below, frac * mult < 10^15 and rounds to the nearest ns.
  const uint64_t frac_ns =
      mult % scale == 0 ? frac * (mult / scale) : (frac * mult + scale / 2) / scale;
  return whole * mult + frac_ns;
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

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return "SIG" + (abbrev != nullptr ? std::string(abbrev) : std::to_string(sig));
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
