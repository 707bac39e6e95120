#include "probe/render.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ptsnap::probe {

std::string RenderTable(const ProbeReport& report) {
  size_t title_width = 0;
  for (const Check& c : report.checks) title_width = std::max(title_width, c.title.size());
  std::string out;
  for (const Check& c : report.checks) {
    std::string_view status = StatusName(c.status);
    out += "[";
    out += std::string(4 - std::min<size_t>(4, status.size()), ' ');
    out += status;
    out += "] ";
    out += c.title;
    out += std::string(title_width - c.title.size() + 2, ' ');
    out += c.value;
    out += "\n";
    if (c.status != Status::kOk && !c.fix.empty()) {
      out += std::string(7, ' ') + "fix: " + c.fix + "\n";
    }
  }
  out += "\n";
  if (report.pt_available) {
    out += "Intel PT recording: available.";
  } else {
    out += "Intel PT recording: unavailable (" + report.pt_reason + ").";
  }
  out += " Collection modes: ";
  if (report.modes.empty()) {
    out += "none";
  } else {
    for (size_t i = 0; i < report.modes.size(); ++i) {
      if (i) out += ", ";
      out += report.modes[i];
    }
  }
  out += ".\n";
  return out;
}

std::string RenderJson(const ProbeReport& report) {
  nlohmann::ordered_json j;
  j["schema"] = "ptsnap-probe/1";
  j["pt_available"] = report.pt_available;
  j["pt_reason"] = report.pt_reason;
  j["modes"] = report.modes;
  j["scopes"] = {{"user", report.scopes.user},
                 {"kernel", report.scopes.kernel},
                 {"system_wide", report.scopes.system_wide}};
  j["kcore_usable"] = report.kcore_usable;
  j["default_snapshot_bytes"] = report.default_snapshot_bytes;
  j["warnings"] = report.warnings;
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const Check& c : report.checks) {
    checks.push_back({{"id", c.id},
                      {"title", c.title},
                      {"status", std::string(StatusName(c.status))},
                      {"value", c.value},
                      {"fix", c.fix}});
  }
  j["checks"] = std::move(checks);
  // Values come from kernel files and may hold invalid UTF-8: replace it
  // rather than throw.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace ptsnap::probe
