// The flow decoder's query layer, packets to events (libipt's
// pt_query_decoder.c): DecodeNext, one packet at a time, the PSB+ header,
// TIP, TIP.PGE/PGD, FUP, PIP, VMCS, TMA (flow_state.h).
#include "flow/flow_state.h"

namespace ptsnap::flow {

// dfun->decode for the packet at pos.
int FlowDecoder::State::DecodeNext() {
  Packet p;
  switch (next) {
    case PacketType::kUnknown: return -4;            // pte_bad_opc
    case PacketType::kInvalid: return kErrInternal;  // scans only, never fetched
    case PacketType::kPad: pos += 1; return 0;
    case PacketType::kPsb: return DecodePsb();
    case PacketType::kTip: return DecodeTip();
    case PacketType::kTnt8: {
      // Up to 6 outcomes below a stop bit, shifted left once.
      const unsigned v = static_cast<unsigned>(*pos) >> 1;
      if (tnt_index != 0) return kErrBadContext;
      const int bits = 31 - __builtin_clz(v);
      tnt_bits = v & ((1u << bits) - 1);
      tnt_index = uint64_t{1} << (bits - 1);
      pos += 1;
      return 0;
    }
    case PacketType::kTnt64: {
      const int size = Read(&p);
      if (size < 0) return size;
      if (tnt_index != 0) return kErrBadContext;
      if (p.tnt_bits == 0) return kErrBadPacket;
      tnt_bits = p.payload;
      tnt_index = uint64_t{1} << (p.tnt_bits - 1);
      pos += size;
      return 0;
    }
    case PacketType::kTipPge: return DecodeTipPge();
    case PacketType::kTipPgd: return DecodeTipPgd();
    case PacketType::kFup: return DecodeFup();
    case PacketType::kOvf: return DecodeOvf();
    case PacketType::kMode: {
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev;
      if (p.mode_leaf == 0) {
        ev = evq.Enqueue(kBindTip);
        if (ev == nullptr) return kErrNoMem;
        ev->type = EventType::kExecMode;
        ev->mode = ModeFromBits(p.mode_bits);
      } else {
        if (!q_enabled) {
          ev = evq.Standalone();
          ev->ip = 0;
          ev->ip_suppressed = true;
          q_event = ev;
        } else {
          ev = evq.Enqueue(kBindFup);
          if (ev == nullptr) return kErrNoMem;
        }
        ev->type = EventType::kTsx;
        ev->speculative = (p.mode_bits & 1) != 0;
        ev->aborted = (p.mode_bits & 2) != 0;
      }
      EventTime(ev);
      pos += size;
      return 0;
    }
    case PacketType::kPsbEnd: {
      const int st = ProcessPendingPsbEvents();
      if (st != 0) return st < 0 ? st : 0;
      pos += 2;
      return 0;
    }
    case PacketType::kTsc: {
      const int size = Read(&p);
      if (size < 0) return size;
      const int e = time.Tsc(p.payload, false, cfg.timing);
      if (e < 0) return e;
      pos += size;
      return 0;
    }
    case PacketType::kCbr: {
      const int size = Read(&p);
      if (size < 0) return size;
      const int e = time.Cbr(static_cast<uint8_t>(p.payload), false, cfg.timing);
      if (e < 0) return e;
      Event* ev = evq.Standalone();
      ev->type = EventType::kCbr;
      ev->ratio = static_cast<uint8_t>(p.payload);
      q_event = ev;
      EventTime(ev);
      pos += size;
      return 0;
    }
    case PacketType::kTma: return DecodeTma();
    case PacketType::kMtc: {
      const int size = Read(&p);
      if (size < 0) return size;
      const int e = time.Mtc(static_cast<uint8_t>(p.payload), cfg.timing);
      if (e < 0) return e;
      pos += size;
      return 0;
    }
    case PacketType::kCyc: {
      const int size = Read(&p);
      if (size < 0) return size;
      // SKD007: a 2-byte CYC whose second byte is an OVF's 0xf3 is a
      // 1-byte CYC followed by the OVF.
      if (cfg.errata.skd007 && size == 2 && (p.payload & ~uint64_t{0x1f}) == 0x20 &&
          pos + size < cfg.end && pos[size] == 0xf3) {
        pos += 1;
        return 0;
      }
      const int e = time.Cyc(p.payload, cfg.timing);
      if (e < 0) return e;
      pos += size;
      return 0;
    }
    case PacketType::kStop: {
      Event* ev = evq.Standalone();
      ev->type = EventType::kStop;
      q_event = ev;
      EventTime(ev);
      pos += 2;
      return 0;
    }
    // Power events: libipt gives them no time.
    case PacketType::kPwre:
    case PacketType::kPwrx: {
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev = evq.Standalone();
      ev->type = next == PacketType::kPwre ? EventType::kPwre : EventType::kPwrx;
      ev->payload = next == PacketType::kPwre ? PwrePayload(p.payload) : PwrxPayload(p.payload);
      q_event = ev;
      pos += size;
      return 0;
    }
    case PacketType::kMnt: {
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev = evq.Standalone();
      ev->type = EventType::kMnt;
      ev->payload = p.payload;
      q_event = ev;
      EventTime(ev);
      pos += size;
      return 0;
    }
    case PacketType::kPip: return DecodePip();
    case PacketType::kVmcs: return DecodeVmcs();
    case PacketType::kExstop:
    case PacketType::kMwait:
    case PacketType::kPtw: return DecodeFupBound();
  }
  return kErrInternal;
}

// PWRE's and PWRX's fields as Item::payload packs them (pt_pkt_read_pwre,
// pt_pkt_read_pwrx: the bits libipt keeps).
inline uint64_t FlowDecoder::State::PwrePayload(uint64_t raw) {
  return ((raw >> 12) & 0xf) | ((raw >> 8) & 0xf) << 8 | ((raw >> 3) & 1) << 16;
}

inline uint64_t FlowDecoder::State::PwrxPayload(uint64_t raw) {
  return ((raw >> 4) & 0xf) | (raw & 0xf) << 8 | ((raw >> 8) & 1) << 16 | ((raw >> 10) & 1) << 17 |
         ((raw >> 11) & 1) << 18;
}

// pt_qry_decode_pip: a paging event, standalone (it binds to an
// instruction: BindsToPip) or, while a FUP's async branch waits for its
// TIP, an async paging event bound to that TIP.
inline int FlowDecoder::State::DecodePip() {
  Packet p;
  const int size = Read(&p);
  if (size < 0) return size;
  Event* ev;
  if (evq.Find(kBindTip, EventType::kAsyncBranch) == nullptr) {
    ev = evq.Standalone();
    ev->type = EventType::kPaging;
    q_event = ev;
  } else {
    ev = evq.Enqueue(kBindTip);
    if (ev == nullptr) return kErrNoMem;
    ev->type = EventType::kAsyncPaging;
  }
  ev->payload = p.payload;
  ev->non_root = p.mode_bits != 0;
  EventTime(ev);
  pos += size;
  return 0;
}

// pt_qry_decode_vmcs: like PIP, but ahead of a queued async paging event
// (libipt moves the paging event behind it: the VMCS applies first).
inline int FlowDecoder::State::DecodeVmcs() {
  Packet p;
  const int size = Read(&p);
  if (size < 0) return size;
  if (Event* paging = evq.Find(kBindTip, EventType::kAsyncPaging); paging != nullptr) {
    Event* moved = evq.Enqueue(kBindTip);
    if (moved == nullptr) return kErrNoMem;
    *moved = *paging;
    // The slot becomes the VMCS event and keeps the rest of the paging
    // event (its time). In libipt's union, async_vmcs.ip lies where
    // async_paging.non_root was, and the TIP may never set it (TIP.PGD).
    paging->type = EventType::kAsyncVmcs;
    paging->payload = p.payload;
    paging->ip = paging->non_root ? 1 : 0;
    paging->non_root = false;
  } else if (evq.Find(kBindTip, EventType::kAsyncBranch) != nullptr) {
    Event* ev = evq.Enqueue(kBindTip);
    if (ev == nullptr) return kErrNoMem;
    ev->type = EventType::kAsyncVmcs;  // no time: libipt gives it none
    ev->payload = p.payload;
  } else {
    Event* ev = evq.Standalone();
    ev->type = EventType::kVmcs;
    ev->payload = p.payload;
    q_event = ev;
    EventTime(ev);
  }
  pos += size;
  return 0;
}

// pt_qry_decode_exstop, _mwait, _ptw: with the IP bit (MWAIT always) the
// event waits for the FUP that carries its IP; without it, it is
// standalone with the IP suppressed. libipt gives them no time.
inline int FlowDecoder::State::DecodeFupBound() {
  Packet p;
  const int size = Read(&p);
  if (size < 0) return size;
  const bool with_fup = next == PacketType::kMwait || p.mode_bits != 0;
  Event* ev;
  if (with_fup) {
    ev = evq.Enqueue(kBindFup);
    if (ev == nullptr) return kErrInternal;  // libipt: -pte_internal here, not -pte_nomem
  } else {
    ev = evq.Standalone();
    ev->ip_suppressed = true;
    q_event = ev;
  }
  switch (next) {
    case PacketType::kExstop: ev->type = EventType::kExstop; break;
    case PacketType::kMwait: ev->type = EventType::kMwait; break;
    default:
      ev->type = EventType::kPtwrite;
      ev->size = static_cast<uint8_t>(size - 2);
      break;
  }
  ev->payload = p.payload;  // EXSTOP: none
  pos += size;
  return 0;
}

inline int FlowDecoder::State::DecodeTma() {
  Packet p;
  const int size = Read(&p);
  if (size < 0) {
    // SKZ84 (VMX TSC scaling corrupts packets): libipt skips a TMA with
    // reserved bits set, and one byte more (ptps_tma + 1).
    if (cfg.errata.skz84 && size == kErrBadPacket) {
      pos += 8;
      return 0;
    }
    return size;
  }
  const int e = time.Tma(static_cast<uint16_t>(p.payload), p.fc, cfg.timing);
  if (e < 0) return e;
  pos += size;
  return 0;
}

// dfun->header inside PSB+.
inline int FlowDecoder::State::DecodeHeader() {
  Packet p;
  switch (next) {
    case PacketType::kPad: pos += 1; return 0;
    case PacketType::kFup: {
      const int size = Read(&p);
      if (size < 0) return size;
      if (cfg.errata.bdm70 && !q_enabled) {
        // BDM70: a FUP in a PSB+ while tracing is disabled, right before
        // the TIP.PGE: ignore it.
        const int e = ScanBdm70(pos + size);
        if (e < 0) return e;
        if (e > 0) {
          pos += size;
          return 0;
        }
      }
      UpdateLastIp(p.ipc, p.payload);
      if (p.ipc != 0) q_enabled = true;
      pos += size;
      return 0;
    }
    case PacketType::kMode: {
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev = evq.Enqueue(kBindPsbend);
      if (ev == nullptr) return kErrNoMem;
      if (p.mode_leaf == 0) {
        ev->type = EventType::kExecMode;
        ev->mode = ModeFromBits(p.mode_bits);
      } else {
        ev->type = EventType::kTsx;
        ev->speculative = (p.mode_bits & 1) != 0;
        ev->aborted = (p.mode_bits & 2) != 0;
      }
      pos += size;
      return 0;
    }
    case PacketType::kTsc: {
      const int size = Read(&p);
      if (size < 0) return size;
      const int e = time.Tsc(p.payload, true, cfg.timing);
      if (e < 0) return e;
      pos += size;
      return 0;
    }
    case PacketType::kCbr: {
      const int size = Read(&p);
      if (size < 0) return size;
      const int e = time.Cbr(static_cast<uint8_t>(p.payload), true, cfg.timing);
      if (e < 0) return e;
      Event* ev = evq.Enqueue(kBindPsbend);
      if (ev == nullptr) return kErrNoMem;
      ev->type = EventType::kCbr;
      ev->ratio = static_cast<uint8_t>(p.payload);
      pos += size;
      return 0;
    }
    case PacketType::kTma: return DecodeTma();
    case PacketType::kMtc:
    case PacketType::kCyc: return DecodeNext();
    case PacketType::kUnknown: return -4;
    case PacketType::kMnt: {
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev = evq.Enqueue(kBindPsbend);
      if (ev == nullptr) return kErrNoMem;
      ev->type = EventType::kMnt;
      pos += size;
      return 0;
    }
    case PacketType::kPip:
    case PacketType::kVmcs: {  // pt_qry_header_pip, _vmcs: reported at PSBEND
      const int size = Read(&p);
      if (size < 0) return size;
      Event* ev = evq.Enqueue(kBindPsbend);
      if (ev == nullptr) return kErrNoMem;
      const bool pip = next == PacketType::kPip;
      ev->type = pip ? EventType::kAsyncPaging : EventType::kAsyncVmcs;
      ev->payload = p.payload;
      ev->non_root = pip && p.mode_bits != 0;
      pos += size;
      return 0;
    }
    default: return kErrBadContext;  // no header function
  }
}

// check_erratum_bdm70: 1 when a TIP.PGE follows with only status packets
// in between.
inline int FlowDecoder::State::ScanBdm70(const uint8_t* p) const {
  for (;;) {
    Packet pk;
    const int size = ScanPacket(p, &pk);
    if (size < 0) return size == kErrEosCode ? 0 : size;
    switch (pk.type) {
      case PacketType::kTipPge: return 1;
      case PacketType::kPad:
      case PacketType::kTsc:
      case PacketType::kCbr:
      case PacketType::kPsbEnd:
      case PacketType::kPip:
      case PacketType::kMode:
      case PacketType::kVmcs:
      case PacketType::kTma:
      case PacketType::kMtc:
      case PacketType::kCyc:
      case PacketType::kMnt: break;
      default: return 0;
    }
    p += size;
  }
}

inline int FlowDecoder::State::ReadPsbHeader() {
  last_ip = {};
  for (;;) {
    const int e = Fetch();
    if (e != 0) return e;
    if (next == PacketType::kPsbEnd || next == PacketType::kOvf) return 0;
    const int h = DecodeHeader();
    if (h != 0) return h;
  }
}

inline int FlowDecoder::State::DecodePsb() {
  const uint8_t* at = pos;
  Packet p;
  const int size = Read(&p);
  if (size < 0) return size;
  time.Psb(cfg.timing);
  pos += size;
  const int e = ReadPsbHeader();
  if (e < 0) {
    pos = at;
    evq.Clear(kBindPsbend);
    have_next = true;
    next = PacketType::kPsb;
    return e;
  }
  return 0;
}

inline int FlowDecoder::State::DecodeTip() {
  Packet p;
  const int size = DecodeIp(&p);
  if (size < 0) return size;
  Event* ev = evq.Dequeue(kBindTip);
  if (ev != nullptr) {
    switch (ev->type) {
      case EventType::kAsyncBranch:
        consume_packet = true;
        EventIp(&ev->to, ev);
        break;
      case EventType::kAsyncPaging:
      case EventType::kAsyncVmcs:
      case EventType::kExecMode: EventIp(&ev->ip, ev); break;
      default: return kErrBadContext;
    }
    q_event = ev;
    if (evq.Pending(kBindTip)) return 0;
    if (!consume_packet) return 0;
    consume_packet = false;
  }
  pos += size;
  return 0;
}

inline int FlowDecoder::State::DecodeTipPge() {
  Packet p;
  const int size = DecodeIp(&p);
  if (size < 0) return size;
  Event* ev = nullptr;
  if (!consume_packet) {
    ev = evq.Standalone();
    ev->type = EventType::kEnabled;
    if (LastIpQuery(&ev->ip) < 0) return kErrBadPacket;
    EventTime(ev);
    tnt_bits = tnt_index = 0;
    eptw_left = 0;
    consume_packet = true;
    q_enabled = true;
  } else {
    ev = evq.Dequeue(kBindTip);
    if (ev != nullptr) {
      if (ev->type != EventType::kExecMode) return kErrBadContext;
      EventIp(&ev->ip, ev);
    }
  }
  if (ev == nullptr) return kErrInternal;
  q_event = ev;
  if (evq.Pending(kBindTip)) return 0;
  if (!consume_packet) return kErrInternal;
  consume_packet = false;
  pos += size;
  return 0;
}

inline int FlowDecoder::State::DecodeTipPgd() {
  Packet p;
  const int size = DecodeIp(&p);
  if (size < 0) return size;
  Event* ev = evq.Dequeue(kBindTip);
  if (ev != nullptr) {
    switch (ev->type) {
      case EventType::kAsyncBranch: {
        const uint64_t at = ev->ip;
        ev->type = EventType::kAsyncDisabled;
        ev->ip = at;
        EventIp(&ev->to, ev);
        break;
      }
      // Ordered after the async disable: applied while disabled.
      case EventType::kAsyncPaging:
      case EventType::kAsyncVmcs:
      case EventType::kExecMode: ev->ip_suppressed = true; break;
      default: return kErrBadContext;
    }
  } else {
    ev = evq.Standalone();
    ev->type = EventType::kDisabled;
    EventIp(&ev->ip, ev);
    EventTime(ev);
  }
  q_event = ev;
  if (evq.Pending(kBindTip)) return 0;
  q_enabled = false;
  pos += size;
  return 0;
}

inline int FlowDecoder::State::DecodeFup() {
  Packet p;
  const int size = DecodeIp(&p);
  if (size < 0) return size;
  Event* ev = evq.Dequeue(kBindFup);
  if (ev != nullptr) {
    switch (ev->type) {
      case EventType::kOverflow: {
        consume_packet = true;
        const int e = LastIpQuery(&ev->ip);
        if (e < 0) return e;
        break;
      }
      case EventType::kTsx:
        if (!ev->aborted) consume_packet = true;
        EventIp(&ev->ip, ev);
        break;
      case EventType::kExstop:
      case EventType::kMwait:
      case EventType::kPtwrite:
        consume_packet = true;
        EventIp(&ev->ip, ev);
        break;
      default: return kErrInternal;
    }
    q_event = ev;
    if (evq.Pending(kBindFup)) return 0;
    if (!consume_packet) return 0;
    consume_packet = false;
  } else {
    uint64_t from = 0;
    const int e = LastIpQuery(&from);
    if (e < 0) return e;
    ev = evq.Enqueue(kBindTip);
    if (ev == nullptr) return kErrNoMem;
    ev->type = EventType::kAsyncBranch;
    ev->ip = from;
    EventTime(ev);
  }
  pos += size;
  return 0;
}

}  // namespace ptsnap::flow
