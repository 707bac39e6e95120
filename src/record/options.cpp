#include "record/options.h"

#include <cctype>

#include "base/string_util.h"

namespace ptsnap::record {

Result<uint64_t> ParseSize(std::string_view text) {
  std::string_view s = base::Trim(text);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  auto number = base::ParseUint(s.substr(0, digits));
  std::string unit;
  for (char c : s.substr(digits))
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  if (unit == "k" || unit == "kb" || unit == "kib") shift = 10;
  if (unit == "m" || unit == "mb" || unit == "mib") shift = 20;
  if (unit == "g" || unit == "gb" || unit == "gib") shift = 30;
  if (!number || shift < 0 || *number > (UINT64_MAX >> (shift + 1)))
    return Error("bad size '" + std::string(text) + "': use a number with an optional K, M or G " +
                 "suffix, e.g. 4M");
  return *number << shift;
}

uint64_t RoundToPowerOfTwoPages(uint64_t bytes, bool* rounded) {
  constexpr uint64_t kPage = 4096;
  uint64_t pages = (bytes + kPage - 1) / kPage;
  if (pages == 0) pages = 1;
  uint64_t p2 = 1;
  while (p2 < pages) p2 <<= 1;
  if (rounded != nullptr) *rounded = p2 * kPage != bytes;
  return p2 * kPage;
}

std::filesystem::path DefaultTraceDir(const std::filesystem::path& output) {
  std::filesystem::path out = output.empty() ? std::filesystem::path("trace.fxt.gz") : output;
  std::string name = out.filename().string();
  // Strip every suffix: trace.fxt.gz -> trace.
  auto dot = name.find('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  if (name.empty()) name = "trace";
  return out.parent_path() / (name + ".ptsnap");
}

}  // namespace ptsnap::record
