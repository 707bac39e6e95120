#include "ptsnap/probe.h"

#include "base/version.h"
#include "probe/probe.h"
#include "probe/render.h"

namespace ptsnap {

ProbeResult Probe() {
  const probe::ProbeReport r = probe::RunProbe(probe::LiveEnv());
  ProbeResult out;
  out.pt_available = r.pt_available;
  out.pt_reason = r.pt_reason;
  out.modes = r.modes;
  out.user_scope = r.scopes.user;
  out.kernel_scope = r.scopes.kernel;
  out.system_wide = r.scopes.system_wide;
  out.kcore_usable = r.kcore_usable;
  out.default_snapshot_bytes = r.default_snapshot_bytes;
  for (const probe::Check& c : r.checks)
    out.checks.push_back({c.id, c.title, std::string(probe::StatusName(c.status)), c.value, c.fix});
  out.warnings = r.warnings;
  out.json = probe::RenderJson(r);
  return out;
}

const char* Version() { return base::kVersion; }

}  // namespace ptsnap
