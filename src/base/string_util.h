// Pure string helpers for parsing kernel text formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptsnap::base {

[[nodiscard]] std::string_view Trim(std::string_view s);
// Splits on `sep`; keeps empty fields.
[[nodiscard]] std::vector<std::string_view> Split(std::string_view s, char sep);
// Splits on runs of spaces and tabs; no empty fields.
[[nodiscard]] std::vector<std::string_view> SplitWhitespace(std::string_view s);
[[nodiscard]] bool StartsWith(std::string_view s, std::string_view prefix);

// Whole-string integer parsing (after Trim); nullopt on any junk or overflow.
// `base` 0 accepts a 0x prefix for hex.
[[nodiscard]] std::optional<uint64_t> ParseUint(std::string_view s, int base = 10);
[[nodiscard]] std::optional<int64_t> ParseInt(std::string_view s, int base = 10);

// "0x1f" style.
[[nodiscard]] std::string Hex(uint64_t v);

}  // namespace ptsnap::base
