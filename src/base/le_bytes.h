// Little-endian integers in byte strings: the formats ptsnap writes and
// reads (perf.data, the emulator's JIT capture) are little-endian, as is
// the only host ptsnap builds for (x86-64), so these are plain copies.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace ptsnap::base {

// Appends `v`'s bytes to `out`.
template <typename T>
requires std::is_trivially_copyable_v<T>
void AppendLe(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// The `T` at byte `off` of `s`; the caller has checked off + sizeof(T) <= size.
template <typename T>
requires std::is_trivially_copyable_v<T> T LoadLe(std::string_view s, size_t off) {
  T v;
  std::memcpy(&v, s.data() + off, sizeof(T));
  return v;
}

}  // namespace ptsnap::base
