// libipt's configuration (as src/decode's MakePtConfig makes it) as the
// flow decoder's, and where libipt goes on after the trace: one place for
// both the pipeline and the oracle. Header only: both link libipt already.
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
  c.errata.bdm64 = cfg.errata.bdm64 != 0;
  c.errata.skz84 = cfg.errata.skz84 != 0;
  c.errata.apl11 = cfg.errata.apl11 != 0;
  c.errata.apl12 = cfg.errata.apl12 != 0;
  c.addr_filter = cfg.addr_filter.config.addr_cfg != 0;
  const uint64_t ab[8] = {cfg.addr_filter.addr0_a, cfg.addr_filter.addr0_b, cfg.addr_filter.addr1_a,
                          cfg.addr_filter.addr1_b, cfg.addr_filter.addr2_a, cfg.addr_filter.addr2_b,
                          cfg.addr_filter.addr3_a, cfg.addr_filter.addr3_b};
  for (size_t n = 0; n < c.addr_ranges.size(); ++n) {
    c.addr_ranges[n].cfg = static_cast<uint8_t>((cfg.addr_filter.config.addr_cfg >> (4 * n)) & 0xf);
    c.addr_ranges[n].a = ab[2 * n];
    c.addr_ranges[n].b = ab[2 * n + 1];
  }
  return c;
}

// Once `dec` reported the end of the trace (pts_eos) after a block: where it
// goes on (decoder->ip, the last branch's destination; FlowDecoder::NextIp
// is ours). pt_blk_next fills in the next block's ip before it proceeds, and
// over `empty` (an image with no section and no read callback) proceeds no
// further: no code read, no block cached. `dec` keeps `empty` as its image.
// False while tracing is disabled.
inline bool LibiptNextIp(struct pt_block_decoder* dec, struct pt_image* empty, uint64_t* ip) {
  if (pt_blk_set_image(dec, empty) < 0) return false;
  struct pt_block b {};
  const int st = pt_blk_next(dec, &b, sizeof b);
  if (b.ninsn != 0 || pt_errcode(st) != pte_nomap) return false;
  *ip = b.ip;
  return true;
}

}  // namespace ptsnap::flow
