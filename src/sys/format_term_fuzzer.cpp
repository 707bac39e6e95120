// libFuzzer: ParseFormatTerm + PlaceValue on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sys/pmu.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto term = ptsnap::sys::ParseFormatTerm(text);
  if (!term) return 0;
  int width = term->width();
  if (width < 1 || width > 64) std::abort();
  uint64_t word = 0;
  uint64_t all = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  if (!ptsnap::sys::PlaceValue(*term, all, &word)) std::abort();
  // Every value bit lands on a distinct config bit.
  if (__builtin_popcountll(word) != width) std::abort();
  return 0;
}
