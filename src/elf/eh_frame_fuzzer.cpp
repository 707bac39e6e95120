// Fuzzes the .eh_frame reader: never crashes, every range it returns is
// non-empty and sorted, and the frame-rule table's rows are non-empty,
// sorted, apart, and found again by their own addresses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "elf/eh_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto fdes = ptsnap::elf::ParseEhFrame(bytes, 0x401000);
  for (size_t i = 0; i < fdes.size(); ++i) {
    if (fdes[i].end <= fdes[i].start) std::abort();
    if (i > 0 && fdes[i].start < fdes[i - 1].start) std::abort();
  }
  const ptsnap::elf::CfaTable table = ptsnap::elf::ParseCfaTable(bytes, 0x401000);
  const auto& rows = table.row_list();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].end <= rows[i].start) std::abort();
    if (i > 0 && rows[i].start < rows[i - 1].end) std::abort();
    auto at_start = table.Find(rows[i].start);
    auto at_last = table.Find(rows[i].end - 1);
    if (!at_start || !(*at_start == rows[i].rule) || !at_last || !(*at_last == rows[i].rule))
      std::abort();
  }
  return 0;
}
