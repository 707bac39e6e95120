// The flow decoder's fast path: blocks libipt serves from its cache,
// chained through successor hints, with TNT bits taken straight from the
// TNT cache (flow_state.h).
#include "flow/flow_state.h"

namespace ptsnap::flow {

// NextBlock for blocks libipt serves from its cache (start cached, no
// decode error), chained through successor hints instead of lookups, and
// with conditional branches and compressed returns taken straight from
// the cached TNT bits when no tick is due. Appends up to `room` blocks
// (and an error item after the last on failure); returns when the state
// needs the general Step (an event, the end, a first pass).
size_t FlowDecoder::State::Fast(Item* out, size_t room, uint64_t* insns_out) {
  size_t k = 0;
  while (k < room) {
    BlockEntry* e = Entry();
    if (!e->start_cached) {
      if (!LibiptCached(e->ip)) {
        hint = e;
        break;
      }
      e->start_cached = true;
    }
    if (e->error != 0 || e->ninsn > 1024) {
      hint = e;
      break;
    }
    Item& b = out[k++];
    b = Item();
    block_item = &b;
    b.kind = ItemKind::kBlock;
    b.ip = e->ip;
    b.end_ip = e->end_ip;
    b.size = e->size;
    b.ninsn = static_cast<uint16_t>(e->ninsn);
    b.iclass = e->iclass;
    b.mode = e->mode;  // libipt: the cache entry's
    b.speculative = speculative;
    fast_insns += e->ninsn;
    const InsnClass c = e->iclass;
    // The bit is cached and no tick is due; more bits follow, or the next
    // packet is a TNT-8 (the query then reports nothing pending either).
    if ((c == InsnClass::kCondJump || c == InsnClass::kReturn) && last_tsc == event.tsc &&
        (tnt_index > 1 || (tnt_index == 1 && have_next && next == PacketType::kTnt8))) {
      const bool taken = (tnt_bits & tnt_index) != 0;
      if (c == InsnClass::kCondJump) {
        tnt_index >>= 1;
        if (eptw_left > 0) TakeTntBit(taken);
        status = 0;
        const uint64_t fall = e->end_ip + e->size;
        if (taken) {
          ip = e->target;
          hint = Successor(&e->next_taken, ip);
        } else {
          ip = fall;
          hint = Successor(&e->next_fall, ip);
        }
        Stamp(&b);
        continue;
      }
      if (taken && !retstack.Empty()) {
        tnt_index >>= 1;
        if (eptw_left > 0) TakeTntBit(taken);
        status = 0;
        ip = retstack.Pop(&hint);
        Stamp(&b);
        continue;
      }
    }
    int st = Decide(e, /*first_pass=*/false);
    if (st >= 0 && process_event && event.type == EventType::kTick &&
        (status & (kStatusEventPending | kStatusEos)) == 0 && k < room) {
      // Only a tick is due: pt_blk_next reports it pending, pt_blk_event
      // returns it and finds nothing after it.
      Item& t = out[k++];
      t = Item();
      t.kind = ItemKind::kEvent;
      t.event = EventType::kTick;
      t.ip = event.ip;
      t.has_tsc = event.has_tsc;
      t.tsc = event.tsc;
      Stamp(&b);
      Stamp(&t);
      process_event = false;
      status_out = 0;
      continue;
    }
    if (st >= 0) st = ProceedTrailingEvent();
    Stamp(&b);
    // Events the block raised (mostly ticks): delivered here as Step
    // would, one pt_blk_event each.
    while (st > 0 && (st & kStatusEventPending) != 0 && k < room) {
      st = UserEvent(&out[k]);
      if (st >= 0) Stamp(&out[k++]);
    }
    status_out = st;
    if (st < 0) {
      EndSegment(out, &k, st);
      Stamp(&out[k - 1]);
      break;
    }
    if (st != 0 || !CanRunFast()) break;
  }
  return Emitted(k, insns_out);
}

inline size_t FlowDecoder::State::Emitted(size_t k, uint64_t* insns_out) {
  *insns_out += fast_insns;
  fast_insns = 0;
  return k;
}

}  // namespace ptsnap::flow
