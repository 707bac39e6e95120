// Fuzzes the option table's setters, the parsers of ptsnap_options_set's
// and ptsnap_decoder_set's values and of the CLI's shared flags: every row gets the input as its
// value; a refused value leaves the options as they were.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>

#include "api/option_table.h"
#include "base/check.h"

namespace {

auto Fields(const ptsnap::RecordingOptions& o) {
  return std::tie(o.pids, o.scope, o.collection, o.snapshot_size, o.full_execution,
                  o.timer_resolution, o.callgraph_mode, o.trigger, o.slower_than_ns, o.filter,
                  o.only_in, o.multi_snapshot, o.multi_thread, o.duration, o.copy_binaries, o.ptw,
                  o.pwr_evt, o.emulate_waits, o.trace_dir, o.stop_signal, o.after);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  for (const ptsnap::api::OptionSpec& row : ptsnap::api::RecordingOptionTable()) {
    ptsnap::RecordingOptions o;
    o.collection = ptsnap::Collection::kSampled;  // so "emulate" may refuse a good value too
    const ptsnap::RecordingOptions before = o;
    auto set = row.set(o, value);
    if (!set) {
      PTSNAP_CHECK(!set.error().message().empty()) << row.key << ": an error says why";
      PTSNAP_CHECK(Fields(o) == Fields(before)) << row.key << ": a refused value changed nothing";
    }
  }
  for (const ptsnap::api::DecodeOptionSpec& row : ptsnap::api::DecodeOptionTable()) {
    ptsnap::DecodeOptions o;
    auto set = row.set(o, value);
    if (!set) {
      PTSNAP_CHECK(!set.error().message().empty()) << row.key << ": an error says why";
      PTSNAP_CHECK(o.decoder == ptsnap::DecodeOptions{}.decoder && o.max_depth == 0 &&
                   o.min_duration_ns == 0 && o.inline_frames && o.debug_dirs.empty())
          << row.key << ": a refused value changed nothing";
    }
  }
  return 0;
}
