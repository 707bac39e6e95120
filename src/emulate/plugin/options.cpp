// The plugin's arguments (key=value, as the driver passes them:
// emulate.cpp's plugin argument list).
#include <string>
#include <string_view>

#include "base/string_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

namespace {

// A plugin argument's number (decimal, or hex with 0x).
bool ParseU64(std::string_view s, uint64_t* v) {
  auto n = base::ParseUint(s, 0);
  if (n) *v = *n;
  return n.has_value();
}

}  // namespace

Result<Options> ParseOptions(int argc, const char* const* argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    size_t eq = a.find('=');
    std::string_view k = a.substr(0, eq), v = eq == a.npos ? "" : a.substr(eq + 1);
    uint64_t n = 0;
    bool ok = true;
    if (k != "exec") o.args.emplace_back(a);
    if (k == "exec") {
      o.carry_path = std::string(v);
    } else if (k == "out") {
      o.out = std::string(v);
    } else if (k == "mode") {
      o.full = v == "full";
    } else if (k == "size") {
      ok = ParseU64(v, &o.size);
    } else if (k == "psb") {
      ok = ParseU64(v, &n) && n >= 256 && n <= (1 << 20);
      o.psb_period = n;
    } else if (k == "retcomp") {
      o.retcomp = v != "0";
    } else if (k == "mtc") {
      o.mtc = v == "1";
    } else if (k == "mtc_freq") {
      ok = ParseU64(v, &o.mtc_freq) && o.mtc_freq <= 15;
    } else if (k == "cyc") {
      o.cyc = v == "1";
    } else if (k == "cyc_thresh") {
      ok = ParseU64(v, &o.cyc_thresh) && o.cyc_thresh <= 15;
    } else if (k == "multi") {
      o.multi = v == "1";
    } else if (k == "whole") {
      o.whole_rings = v == "1";
    } else if (k == "null") {
      o.null = v == "1";
    } else if (k == "hash") {
      o.hash = v == "1";
    } else if (k == "jit") {
      o.jit = v != "0";
    } else if (k == "duration_ms") {
      ok = ParseU64(v, &o.duration_ms);
    } else if (k == "ctl") {
      ok = ParseU64(v, &n);
      o.ctl_fd = static_cast<int>(n);
    } else if (k == "trigger") {
      ok = ParseU64(v, &n);
      o.trigger.push_back(n);
    } else if (k == "lib_trigger") {
      auto t = ParseFileOffsetArg(v);
      ok = t.has_value();
      if (ok) o.lib_trigger.push_back(*t);
    } else if (k == "trigger_name") {
      o.trigger_name = std::string(v);
    } else if (k == "slow") {
      ok = ParseU64(v, &o.slow);
    } else if (k == "slow_ns") {
      ok = ParseU64(v, &o.slow_ns);
    } else if (k == "slow_name") {
      o.slow_name = std::string(v);
    } else if (k == "filter") {
      auto f = ParseFilterArg(v);
      ok = f.has_value();
      if (f) {
        o.filtering = o.filtering || !f->trace_stop;
        o.filters.push_back(std::move(*f));
      }
    } else if (k == "only_in") {
      ok = ParseU64(v, &o.only_in) && o.only_in != 0;
    } else if (k == "waits") {
      o.waits = v == "1";
    } else if (k == "stop") {
      ok = ParseU64(v, &n);
      o.stop.push_back(n);
    } else {
      ok = false;
    }
    if (!ok) return Error("bad plugin argument '" + std::string(a) + "'");
  }
  if (o.out.empty()) return Error("the plugin needs out=DIR");
  return o;
}

}  // namespace ptsnap::emulate
