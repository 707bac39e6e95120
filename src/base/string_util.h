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

// The one duration parser of ptsnap's options, in ns: a number with up to 9
// decimals (exact; below a second fractions of a ns round to the nearest)
// and a unit, ns, us (or µs), ms, s, m (or min), h, in any case, spaces
// allowed: "800ns", "2.5us", "1 MS", "1.5s", "2m", "1h". A number without a
// unit takes `default_unit` (--duration: "s"); with none given it is
// refused, as a bare "5" is ambiguous. nullopt on junk or overflow. Pure.
[[nodiscard]] std::optional<uint64_t> ParseDurationNs(std::string_view s,
                                                      std::string_view default_unit = "");

// "0x1f" style.
[[nodiscard]] std::string Hex(uint64_t v);
// Bytes as lowercase hex digits, two a byte, no prefix ("build-id" style).
[[nodiscard]] std::string HexBytes(std::string_view bytes);

// The parts with `sep` between them.
[[nodiscard]] std::string Join(const std::vector<std::string>& parts, std::string_view sep = " ");

// A size in the largest binary unit that divides it: "4 MiB", "12 KiB",
// "1000 bytes" (sizes the user typed or the kernel rounds to pages).
[[nodiscard]] std::string ExactSize(uint64_t bytes);
// A duration for people: "5.123 ms", "812.000 us", "640 ns", "2.500 s"
// (three decimals from us up).
[[nodiscard]] std::string FormatDuration(uint64_t ns);
// A signal's name as kill -l spells it with its prefix: "SIGSEGV", "SIGABRT";
// "SIG42" for a number glibc has no name for.
[[nodiscard]] std::string SignalName(int sig);
// Any size, exact and approximate: "1536 bytes (1.5 KiB)", "12 bytes".
[[nodiscard]] std::string ApproxSize(uint64_t bytes);

}  // namespace ptsnap::base
