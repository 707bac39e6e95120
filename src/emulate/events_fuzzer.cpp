// Fuzzes the plugin event-log parser: never crashes on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "emulate/events.h"
#include "trace/perf_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptsnap::emulate::PluginEvents ev;
  auto r = ptsnap::emulate::ParseEvents(std::string_view(reinterpret_cast<const char*>(data), size),
                                        &ev);
  if (r) {
    for (const auto& rec : ev.records) (void)ptsnap::trace::SerializeRecord(rec);
  }
  return 0;
}
