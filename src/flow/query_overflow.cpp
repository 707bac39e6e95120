// The flow decoder's query layer, overflows: OVF and the errata whose
// workarounds scan ahead in the stream (SKD010, APL11, APL12), over
// timing packets (flow_state.h).
#include "flow/flow_state.h"

namespace ptsnap::flow {

inline bool FlowDecoder::State::IsTiming(PacketType t) {
  return t == PacketType::kTsc || t == PacketType::kCbr || t == PacketType::kTma ||
         t == PacketType::kMtc || t == PacketType::kCyc;
}

// Applies a timing packet met by a scan to `t` (pt_qry_apply_*); other
// packets leave it. Returns 0 or the error.
inline int FlowDecoder::State::ApplyTiming(const Packet& pk, Timing* t) const {
  switch (pk.type) {
    case PacketType::kTsc: return t->Tsc(pk.payload, /*header=*/false, cfg.timing);
    case PacketType::kCbr:
      return t->Cbr(static_cast<uint8_t>(pk.payload), /*header=*/false, cfg.timing);
    case PacketType::kTma: return t->Tma(static_cast<uint16_t>(pk.payload), pk.fc, cfg.timing);
    case PacketType::kMtc: return t->Mtc(static_cast<uint8_t>(pk.payload), cfg.timing);
    case PacketType::kCyc: return t->Cyc(pk.payload, cfg.timing);
    default: return 0;
  }
}

// The next packet of a scan, from `*p`, that is not a timing packet; the
// timing packets before it are applied to `t` (libipt's scans apply them
// to copies of the decoder's time and calibration). `*p` moves past the
// packet; its size, or an error.
inline int FlowDecoder::State::ScanPastTiming(const uint8_t** p, Timing* t, Packet* pk) const {
  for (;;) {
    const int size = ScanPacket(*p, pk);
    if (size < 0) return size;
    *p += size;
    if (!IsTiming(pk->type)) return size;
    const int e = ApplyTiming(*pk, t);
    if (e < 0) return e;
  }
}

// pt_qry_find_header_fup, in the PSB+ that starts at `p` (after the PSB):
// 1 with the FUP in `fup`, 0 at PSBEND without one, or an error.
inline int FlowDecoder::State::FindHeaderFup(const uint8_t* p, Packet* fup) const {
  for (;;) {
    const int size = ScanPacket(p, fup);
    if (size < 0) return size;
    if (fup->type == PacketType::kPsbEnd) return 0;
    if (fup->type == PacketType::kFup) return 1;
    p += size;
  }
}

// pt_qry_find_ovf_fup from `from`: the offset from `from` to after the FUP
// that follows, 0 when none does (tracing was off as the overflow
// resolved), or an error.
inline int FlowDecoder::State::FindOvfFup(const uint8_t* from) const {
  const uint8_t* p = from;
  for (;;) {
    Packet pk;
    const int size = ScanPacket(p, &pk);
    if (size < 0) return size;
    p += size;
    switch (pk.type) {
      case PacketType::kFup: return static_cast<int>(p - from);
      case PacketType::kInvalid: return kErrBadOpc;
      case PacketType::kPad:
      case PacketType::kMnt:
      case PacketType::kCbr:
      case PacketType::kTsc:
      case PacketType::kTma:
      case PacketType::kMtc:
      case PacketType::kCyc: break;
      case PacketType::kPsbEnd:
      case PacketType::kTip:
      case PacketType::kTipPgd:
      case PacketType::kTnt8:
      case PacketType::kTnt64: return kErrBadContext;
      default: return 0;
    }
  }
}

// pt_qry_decode_ovf, with libipt's workarounds for SKD010 (the FUP
// dropped), APL11 (an extra TIP.PGD) and APL12 (an extra FUP).
int FlowDecoder::State::DecodeOvf() {
  const int st = ProcessPendingPsbEvents();
  if (st != 0) return st < 0 ? st : 0;
  const Timing t = time;
  QueryReset();
  time = t;
  time.ResetCalibration();
  pos += 2;
  const int found = FindOvfFup(pos);
  if (found <= 0) {
    if (cfg.errata.skd010) {
      const int s = Skd010();
      if (s <= 0) return s;
    }
    if (cfg.errata.apl11 && found == kErrBadContext) {
      const int s = Apl11();
      if (s <= 0) return s;
    }
    if (found < 0 && found != kErrEosCode) return found;
    return OvfDisabled();
  }
  if (cfg.errata.apl12) {
    const int s = Apl12(found);
    if (s <= 0) return s;
  }
  Event* ev = evq.Enqueue(kBindFup);
  if (ev == nullptr) return kErrInternal;
  ev->type = EventType::kOverflow;
  q_enabled = true;
  EventTime(ev);
  return 0;
}

// pt_qry_event_ovf_disabled: the overflow resolved with tracing off.
inline int FlowDecoder::State::OvfDisabled() {
  Event* ev = evq.Standalone();
  ev->type = EventType::kOverflow;
  ev->ip_suppressed = true;
  q_enabled = false;
  q_event = ev;
  EventTime(ev);
  return 0;
}

// skd010_scan_for_ovf_resume: an OVF without a FUP. If what follows shows
// tracing was on (the FUP was dropped), resume at a later packet and IP
// with the time the packets skipped lead to; 1 where it cannot tell or
// cannot recover (the overflow is then taken as resolved with tracing
// off), 0 when recovered, or an error.
inline int FlowDecoder::State::Skd010() {
  Timing t = time;                  // libipt's copies of time and tcal
  const uint8_t* tsx_at = nullptr;  // a MODE.TSX that may bind to a FUP
  Timing tsx_time;
  const uint8_t* p = pos;
  for (;;) {
    Packet pk;
    const int size = ScanPastTiming(&p, &t, &pk);
    if (size < 0) return size == kErrEosCode ? 1 : size;
    const uint8_t* at = p - size;
    switch (pk.type) {
      case PacketType::kTipPge: return 1;
      case PacketType::kTipPgd:  // the erratum applies: resume after the disable
        time = t;
        pos = p;
        return OvfDisabled();
      case PacketType::kTnt8:
      case PacketType::kTnt64: return 1;  // applies, but no IP to resume at
      case PacketType::kPip:
      case PacketType::kVmcs: break;
      case PacketType::kMode:
        if (pk.mode_leaf == 1) {  // TSX; MODE.Exec changes are ignored
          if (tsx_at != nullptr) return 1;
          tsx_at = at;
          tsx_time = t;
        }
        break;
      case PacketType::kFup:
        if (tsx_at != nullptr) return Skd010Recover(pk, tsx_time, tsx_at);
        return Skd010Recover(pk, t, at);
      case PacketType::kTip: return Skd010Recover(pk, t, p);
      case PacketType::kPsb: {  // on if and only if its PSB+ has a FUP
        Packet fup;
        const int f = FindHeaderFup(p, &fup);
        if (f <= 0) return f == 0 || f == kErrEosCode ? 1 : f;
        return Skd010Recover(fup, t, at);
      }
      case PacketType::kPsbEnd: return kErrBadContext;
      case PacketType::kOvf:
      case PacketType::kStop:
      case PacketType::kInvalid:
      case PacketType::kUnknown:
      case PacketType::kMwait: return 1;
      case PacketType::kExstop:
      case PacketType::kPtw:
        if (pk.mode_bits != 0) return 1;  // binds to a FUP: not skipped
        break;
      default: break;  // PAD, MNT, PWRE, PWRX: skipped
    }
  }
}

// skd010_recover: the overflow event at the IP of `ip_packet`, tracing
// on, decoding resuming at `resume` with time `t`.
inline int FlowDecoder::State::Skd010Recover(const Packet& ip_packet, const Timing& t,
                                             const uint8_t* resume) {
  const auto saved = last_ip;  // libipt updates a copy (the reset one)
  UpdateLastIp(ip_packet.ipc, ip_packet.payload);
  uint64_t at = 0;
  if (LastIpQuery(&at) < 0) {
    last_ip = saved;
    return kErrBadContext;  // no full IP
  }
  Event* ev = evq.Standalone();
  ev->type = EventType::kOverflow;
  ev->ip = at;
  pos = resume;
  q_enabled = true;
  time = t;
  q_event = ev;
  EventTime(ev);
  return 0;
}

// apl11_apply: an OVF followed by a TIP.PGD (FindOvfFup's bad context).
// Resumes after the TIP.PGD with tracing off when one follows; 1 when
// another packet shows the erratum does not apply, or an error.
inline int FlowDecoder::State::Apl11() {
  Timing t = time;
  const uint8_t* p = pos;
  for (;;) {
    Packet pk;
    const int size = ScanPastTiming(&p, &t, &pk);
    if (size < 0) return size;  // the end too
    switch (pk.type) {
      case PacketType::kTipPgd:
        time = t;
        pos = p;
        return OvfDisabled();
      case PacketType::kInvalid: return kErrBadOpc;
      case PacketType::kFup:
      case PacketType::kPsb:
      case PacketType::kTipPge:
      case PacketType::kStop:
      case PacketType::kOvf:
      case PacketType::kMode:
      case PacketType::kPip:
      case PacketType::kVmcs:
      case PacketType::kExstop:
      case PacketType::kMwait:
      case PacketType::kPwre:
      case PacketType::kPwrx:
      case PacketType::kPtw: return 1;
      case PacketType::kUnknown:
      case PacketType::kPad:
      case PacketType::kMnt: break;
      case PacketType::kPsbEnd:
      case PacketType::kTip:
      case PacketType::kTnt8:
      case PacketType::kTnt64: return kErrBadContext;
      default: break;  // timing packets: ScanPastTiming applied them
    }
  }
}

// pt_qry_handle_apl12: an OVF followed by a FUP (`offset` bytes on, to
// after the FUP) although the overflow may have resolved with tracing
// off. If what follows the FUP shows tracing off, resume after the FUP
// with tracing off (the timing packets up to it applied); 1 when tracing
// is on or it cannot tell, or an error.
inline int FlowDecoder::State::Apl12(int offset) {
  // apl12_tracing_is_disabled
  const uint8_t* p = pos + offset;
  for (bool disabled = false; !disabled;) {
    Packet pk;
    const int size = ScanPacket(p, &pk);
    if (size < 0) return size == kErrEosCode ? 1 : size;
    p += size;
    switch (pk.type) {
      case PacketType::kStop:
      case PacketType::kTipPge: disabled = true; break;
      case PacketType::kTnt8:
      case PacketType::kTnt64:
      case PacketType::kTip:
      case PacketType::kTipPgd:
      case PacketType::kOvf:
      case PacketType::kUnknown:
      case PacketType::kInvalid: return 1;
      case PacketType::kPsb: {  // off if and only if its PSB+ has no FUP
        Packet fup;
        const int f = FindHeaderFup(p, &fup);
        if (f != 0) return f == kErrEosCode ? 1 : f;
        disabled = true;
        break;
      }
      case PacketType::kPsbEnd: return kErrBadContext;
      default: break;
    }
  }
  // apl12_resume_disabled: through the FUP, keeping time.
  const uint8_t* end = pos + offset;
  for (const uint8_t* q = pos;;) {
    Packet pk;
    const int size = ScanPacket(q, &pk);
    if (size < 0) return size == kErrEosCode ? 0 : size;
    q += size;
    if (end <= q) {
      if (end < q) return kErrInternal;
      break;  // the FUP itself is skipped
    }
    switch (pk.type) {
      case PacketType::kMode:
      case PacketType::kPip:
      case PacketType::kVmcs: return kErrInternal;
      default: {
        const int e = ApplyTiming(pk, &time);
        if (e < 0) return e;
        break;
      }
    }
  }
  pos += offset;
  return OvfDisabled();
}

}  // namespace ptsnap::flow
