// libipt's configuration (as src/decode's MakePtConfig makes it) as the
// flow decoder's, libipt's blocks and events as the flow decoder's Items,
// and where libipt goes on after the trace: one place for both the
// pipeline and the oracle. Header only: both link libipt already.
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

// A libipt block as an Item (its mode, class and speculative flag; the
// rest of an Item is the caller's to fill).
inline Item LibiptBlockItem(const struct pt_block& b) {
  Item i;
  i.kind = ItemKind::kBlock;
  i.ip = b.ip;
  i.end_ip = b.end_ip;
  i.ninsn = b.ninsn;
  i.mode = static_cast<ExecMode>(b.mode);
  i.iclass = static_cast<InsnClass>(b.iclass);
  i.speculative = b.speculative != 0;
  return i;
}

inline Item LibiptEventItem(const struct pt_event& ev) {
  Item i;
  i.kind = ItemKind::kEvent;
  i.event = static_cast<EventType>(ev.type);
  i.ip_suppressed = ev.ip_suppressed != 0;
  i.status_update = ev.status_update != 0;
  i.has_tsc = ev.has_tsc != 0;
  i.tsc = ev.tsc;
  switch (ev.type) {
    case ptev_enabled:
      i.ip = ev.variant.enabled.ip;
      i.resumed = ev.variant.enabled.resumed != 0;
      break;
    case ptev_disabled: i.ip = ev.variant.disabled.ip; break;
    case ptev_async_disabled:
      i.ip = ev.variant.async_disabled.at;
      i.to = ev.variant.async_disabled.ip;
      break;
    case ptev_async_branch:
      i.ip = ev.variant.async_branch.from;
      i.to = ev.variant.async_branch.to;
      break;
    case ptev_overflow: i.ip = ev.variant.overflow.ip; break;
    case ptev_exec_mode:
      i.ip = ev.variant.exec_mode.ip;
      i.mode = static_cast<ExecMode>(ev.variant.exec_mode.mode);
      break;
    case ptev_tsx:
      i.ip = ev.variant.tsx.ip;
      i.speculative = ev.variant.tsx.speculative != 0;
      i.aborted = ev.variant.tsx.aborted != 0;
      break;
    case ptev_tick: i.ip = ev.variant.tick.ip; break;
    case ptev_cbr: i.ratio = ev.variant.cbr.ratio; break;
    case ptev_paging:
      i.payload = ev.variant.paging.cr3;
      i.non_root = ev.variant.paging.non_root != 0;
      break;
    case ptev_async_paging:
      i.ip = ev.variant.async_paging.ip;
      i.payload = ev.variant.async_paging.cr3;
      i.non_root = ev.variant.async_paging.non_root != 0;
      break;
    case ptev_vmcs: i.payload = ev.variant.vmcs.base; break;
    case ptev_async_vmcs:
      i.ip = ev.variant.async_vmcs.ip;
      i.payload = ev.variant.async_vmcs.base;
      break;
    case ptev_ptwrite:
      i.ip = ev.variant.ptwrite.ip;
      i.payload = ev.variant.ptwrite.payload;
      i.size = ev.variant.ptwrite.size;
      break;
    case ptev_exstop: i.ip = ev.variant.exstop.ip; break;
    case ptev_mwait:
      i.ip = ev.variant.mwait.ip;
      i.payload = ev.variant.mwait.hints | uint64_t{ev.variant.mwait.ext} << 32;
      break;
    case ptev_pwre:
      i.payload = ev.variant.pwre.state | uint64_t{ev.variant.pwre.sub_state} << 8 |
                  uint64_t{ev.variant.pwre.hw} << 16;
      break;
    case ptev_pwrx:
      i.payload = ev.variant.pwrx.last | uint64_t{ev.variant.pwrx.deepest} << 8 |
                  uint64_t{ev.variant.pwrx.interrupt} << 16 |
                  uint64_t{ev.variant.pwrx.store} << 17 |
                  uint64_t{ev.variant.pwrx.autonomous} << 18;
      break;
    case ptev_mnt: i.payload = ev.variant.mnt.payload; break;
    default: break;
  }
  return i;
}

}  // namespace ptsnap::flow
