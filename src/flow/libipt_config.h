// libipt's configuration (as src/decode's MakePtConfig makes it) as the
// flow decoder's: one place for both the pipeline and the oracle. Header
// only: it needs libipt's header, not the library.
#pragma once

#include <intel-pt.h>

#include "flow/flow_decoder.h"

namespace ptsnap::flow {

inline Config FlowConfig(const struct pt_config& cfg) {
  Config c;
  c.begin = cfg.begin;
  c.end = cfg.end;
  c.timing.cpuid_15_eax = cfg.cpuid_0x15_eax;
  c.timing.cpuid_15_ebx = cfg.cpuid_0x15_ebx;
  c.timing.mtc_freq = cfg.mtc_freq;
  c.timing.nom_freq = cfg.nom_freq;
  c.timing.skl168 = cfg.errata.skl168 != 0;
  c.errata.bdm70 = cfg.errata.bdm70 != 0;
  c.errata.skd007 = cfg.errata.skd007 != 0;
  c.errata.skd010 = cfg.errata.skd010 != 0;
  c.errata.skd022 = cfg.errata.skd022 != 0;
  c.errata.skl014 = cfg.errata.skl014 != 0;
  c.addr_filter = cfg.addr_filter.config.addr_cfg != 0;
  return c;
}

}  // namespace ptsnap::flow
