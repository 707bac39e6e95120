// The flow decoder's query layer, read-ahead and sync (libipt's
// pt_qry_* entry points; the per-branch queries are inline in
// flow_state.h).
#include "flow/flow_state.h"

#include <cstring>

namespace ptsnap::flow {

int FlowDecoder::State::ReadAhead() {
  // Inline first: the packets that dominate between branches (1-byte CYC,
  // MTC) are applied, a TNT-8 ends the read-ahead; anything else takes
  // the general loop below. Same effect, fewer dispatches.
  while (pos != nullptr && pos < cfg.end) {
    const uint8_t b = *pos;
    if ((b & 3) == 3) {  // CYC: 5 bits, then 7 per extension byte
      uint64_t value = b >> 3;
      const uint8_t* q = pos + 1;
      if ((b & 4) != 0) {
        unsigned shl = 5;
        bool more = true;
        while (more && q < cfg.end && shl <= 40) {
          value |= static_cast<uint64_t>(*q >> 1) << shl;
          more = (*q & 1) != 0;
          ++q;
          shl += 7;
        }
        // Cut off, very long, or SKD007's CYC-before-OVF: the general path.
        if (more || (cfg.errata.skd007 && q - pos == 2 && (value & ~uint64_t{0x1f}) == 0x20 &&
                     q < cfg.end && *q == 0xf3))
          break;
      }
      const int e = time.Cyc(value, cfg.timing);
      if (e < 0) {
        have_next = true;
        next = PacketType::kCyc;
        return e;
      }
      pos = q;
    } else if (b == 0x59 && cfg.end - pos >= 2) {  // MTC
      const int e = time.Mtc(pos[1], cfg.timing);
      if (e < 0) {
        have_next = true;
        next = PacketType::kMtc;
        return e;
      }
      pos += 2;
    } else {
      if ((b & 1) == 0 && b != 0 && b != 2) {
        have_next = true;
        next = PacketType::kTnt8;
        return 0;
      }
      break;
    }
  }
  for (;;) {
    const int e = Fetch();
    if (e != 0) return e;
    if (IsTip(next) || IsTnt(next)) return 0;
    if (WillEvent()) return 0;
    const int d = DecodeNext();
    if (d != 0) {
      if (d == kErrEosCode) {
        pos = cfg.end;
        have_next = false;
      }
      return d;
    }
  }
}

// pt_sync_forward: the PSB libipt finds searching from `from`.
inline const uint8_t* FlowDecoder::State::SyncForward(const uint8_t* from) const {
  static constexpr uint64_t kPattern0 = 0x8202820282028202ull;
  static constexpr uint64_t kPattern1 = 0x0282028202820282ull;
  const uint8_t* start = from;
  auto addr = reinterpret_cast<uintptr_t>(from);
  const uint8_t* p = from + ((8 - (addr & 7)) & 7);
  for (;;) {
    const uint8_t* current = p;
    if (cfg.end - p < 8) return nullptr;
    p += 8;
    uint64_t val;
    std::memcpy(&val, current, 8);
    if (val != kPattern0 && val != kPattern1) continue;
    // pt_find_psb from p.
    // (libipt reads the byte at `end` here; ptsnap's buffers end in a 0.)
    const uint8_t* q = p;
    if (q >= cfg.end || *q != 0x02) ++q;
    for (; q + 1 < cfg.end; q += 2) {
      if (q[0] != 0x02 || q[1] != 0x82) break;
    }
    q -= 16;
    if (q < cfg.begin) continue;
    if (q[0] != 0x02 || q[1] != 0x82) continue;
    Packet pk;
    if (ParsePacket(q, cfg.end, &pk) < 0) continue;
    if (q < start) continue;
    return q;
  }
}

inline int FlowDecoder::State::QueryStart(const uint8_t* at, uint64_t* addr) {
  QueryReset();
  sync = at;
  pos = at;
  int e = Fetch();
  if (e != 0) return e;
  if (next != PacketType::kPsb) return kErrNoSync;
  e = DecodeNext();
  if (e < 0) return e;
  // The start address before reading ahead (an adjacent PSB+ may change
  // the IP); if there is none yet, whatever read-ahead found.
  const bool filled = LastIpQuery(addr) == 0;
  e = ReadAhead();
  if (e < 0) return e;
  int st = StatusFlags();
  if (!filled && LastIpQuery(addr) < 0) st |= kStatusIpSuppressed;
  return st;
}

int FlowDecoder::State::QuerySyncForward(uint64_t* addr) {
  const uint8_t* p = pos != nullptr ? pos : cfg.begin;
  if (p == sync) p += 16;
  if (p < cfg.begin) return kErrInternal;
  ptrdiff_t space = p - cfg.begin;
  if (space >= 16) space = 15;
  p -= space;
  if (p > cfg.end) return kErrInternal;
  const uint8_t* s = SyncForward(p);
  if (s == nullptr) return kErrEosCode;
  return QueryStart(s, addr);
}

}  // namespace ptsnap::flow
