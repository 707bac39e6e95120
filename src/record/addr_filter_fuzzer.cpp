// Fuzzes --filter's parser: any accepted spec resolves against a small fake
// object without crashing, and its kernel string formats.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/check.h"
#include "record/addr_filter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view spec(reinterpret_cast<const char*>(data), size);
  auto filters = ptsnap::record::ParseAddrFilters(spec);
  if (!filters) return 0;
  PTSNAP_CHECK(!filters->empty()) << "an accepted spec holds a filter";
  ptsnap::elf::Image image;
  image.functions = {{"main", 0x401136, 0x40}, {"f", 0x401200, 0}, {"f", 0x401300, 8}};
  std::vector<ptsnap::elf::Segment> load = {{0x401000, 0x1000, 0x1000, 0x1000, true}};
  ptsnap::record::AddrFilterObject obj{"/prog", &image, load};
  std::vector<ptsnap::record::ResolvedAddrFilter> resolved;
  for (const auto& f : *filters) {
    PTSNAP_CHECK(!f.symbol.empty() || f.size != 0) << "an offset always has a size";
    auto r = ptsnap::record::ResolveAddrFilter(f, obj);
    if (r) resolved.push_back(*r);
  }
  (void)ptsnap::record::FormatKernelAddrFilters(resolved);
  return 0;
}
