// Output of a ProbeReport: the aligned human table and the JSON document
// (schema in docs/probe.md; field names are stable).
#pragma once

#include <string>

#include "probe/probe.h"

namespace ptsnap::probe {

// One line per check: "[ ok ] Title ........ value", and for a check that is
// not ok an indented "fix: ..." line below it; a verdict line at the end.
std::string RenderTable(const ProbeReport& report);

// {"schema": "ptsnap-probe/1", "pt_available": ..., "checks": [...], ...},
// pretty-printed with a trailing newline.
std::string RenderJson(const ProbeReport& report);

}  // namespace ptsnap::probe
