// Fuzzes the plugin event-log parser (plugin_protocol.h, through the driver's
// ParseEvents): never crashes on arbitrary bytes, and every message it
// accepts formats back to a line that parses to the same message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "emulate/events.h"
#include "emulate/plugin_protocol.h"
#include "trace/perf_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ptsnap::emulate::PluginEvents ev;
  auto r = ptsnap::emulate::ParseEvents(text, &ev);
  if (r) {
    for (const auto& rec : ev.records) (void)ptsnap::trace::SerializeRecord(rec);
  }
  auto messages = ptsnap::emulate::ParseMessages(text);
  if (messages.has_value() != r.has_value()) __builtin_trap();
  if (messages) {
    for (const auto& m : *messages) {
      std::string line = ptsnap::emulate::FormatMessage(m);
      if (line.empty() || line.back() != '\n') __builtin_trap();
      line.pop_back();
      auto again = ptsnap::emulate::ParseMessage(line);
      if (!again || !(*again == m)) __builtin_trap();
    }
  }
  return 0;
}
