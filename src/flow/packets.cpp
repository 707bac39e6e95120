#include "flow/packets.h"

#include <cstring>

namespace ptsnap::flow {
namespace {

uint64_t ReadLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A packet of `size` bytes of `type`, or kErrEos when it does not fit.
int Fixed(const uint8_t* p, const uint8_t* end, int size, PacketType type, Packet* out) {
  if (end - p < size) return kErrEos;
  out->type = type;
  out->size = static_cast<uint8_t>(size);
  return size;
}

int ParseIp(const uint8_t* p, const uint8_t* end, PacketType type, Packet* out) {
  const unsigned ipc = p[0] >> 5;
  const int n = IpPayloadSize(ipc);
  if (n < 0) return kErrBadPacket;
  if (end - p < 1 + n) return kErrEos;
  out->type = type;
  out->ipc = static_cast<uint8_t>(ipc);
  out->payload = ReadLe(p + 1, n);
  out->size = static_cast<uint8_t>(1 + n);
  return 1 + n;
}

int ParseCyc(const uint8_t* p, const uint8_t* end, Packet* out) {
  // SDM 33.4.2.14: bits 7:3 of the first byte, then 7 bits per extension
  // byte while the low bit (bit 2 of the first byte) says more follow.
  const uint8_t* q = p;
  uint64_t value = *q >> 3;
  bool ext = (*q & 0x4) != 0;
  ++q;
  unsigned shl = 5;
  while (ext) {
    if (q >= end) return kErrEos;
    const uint64_t bits = *q >> 1;
    ext = (*q & 1) != 0;
    ++q;
    value |= bits << shl;
    shl += 7;
    if (shl > 64) return kErrBadPacket;
  }
  out->type = PacketType::kCyc;
  out->payload = value;
  out->size = static_cast<uint8_t>(q - p);
  return static_cast<int>(q - p);
}

int ParseExt(const uint8_t* p, const uint8_t* end, Packet* out) {
  if (end - p < 2) return kErrEos;
  switch (p[1]) {
    case 0x82: {  // PSB: 02 82 repeated 8 times
      static constexpr uint8_t kPsb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                           0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
      if (end - p < 16) return kErrEos;
      if (std::memcmp(p, kPsb, 16) != 0) return kErrBadPacket;
      return Fixed(p, end, 16, PacketType::kPsb, out);
    }
    case 0x23: return Fixed(p, end, 2, PacketType::kPsbEnd, out);
    case 0xf3: return Fixed(p, end, 2, PacketType::kOvf, out);
    case 0x83: return Fixed(p, end, 2, PacketType::kStop, out);
    case 0xa3: {  // TNT-64: 48 payload bits with a stop bit above the outcomes
      if (end - p < 8) return kErrEos;
      const uint64_t v = ReadLe(p + 2, 6);
      if (v == 0) return kErrBadPacket;
      const int msb = 63 - __builtin_clzll(v);
      out->type = PacketType::kTnt64;
      out->tnt_bits = static_cast<uint8_t>(msb);
      out->payload = v & ((uint64_t{1} << msb) - 1);
      out->size = 8;
      return 8;
    }
    case 0x43: {  // PIP: CR3[51:5] in bits 63:1 of a 6-byte payload, NR in bit 0
      if (end - p < 8) return kErrEos;
      const uint64_t v = ReadLe(p + 2, 6);
      out->type = PacketType::kPip;
      out->payload = (v >> 1) << 5;
      out->mode_bits = static_cast<uint8_t>(v & 1);
      out->size = 8;
      return 8;
    }
    case 0x03: {  // CBR: ratio, reserved byte
      if (end - p < 4) return kErrEos;
      out->type = PacketType::kCbr;
      out->payload = p[2];
      out->size = 4;
      return 4;
    }
    case 0x73: {  // TMA: CTC[15:0], reserved (zero), FC[8:0]
      if (end - p < 7) return kErrEos;
      const auto fc = static_cast<uint16_t>(ReadLe(p + 5, 2));
      if ((fc & ~0x1ffu) != 0 || p[4] != 0) return kErrBadPacket;
      out->type = PacketType::kTma;
      out->payload = ReadLe(p + 2, 2);
      out->fc = fc;
      out->size = 7;
      return 7;
    }
    case 0xc8: {  // VMCS: VMCS pointer [51:12]
      if (end - p < 7) return kErrEos;
      out->type = PacketType::kVmcs;
      out->payload = ReadLe(p + 2, 5) << 12;
      out->size = 7;
      return 7;
    }
    case 0xc3: {  // 3-byte extended: MNT
      if (end - p < 3) return kErrEos;
      if (p[2] != 0x88) return kErrBadOpc;
      if (end - p < 11) return kErrEos;
      out->type = PacketType::kMnt;
      out->payload = ReadLe(p + 3, 8);
      out->size = 11;
      return 11;
    }
    case 0x62:
    case 0xe2:  // EXSTOP, with the IP bit in bit 7
      out->mode_bits = static_cast<uint8_t>(p[1] >> 7);
      return Fixed(p, end, 2, PacketType::kExstop, out);
    case 0xc2:  // MWAIT: hints (4 bytes), extensions (4 bytes)
      if (Fixed(p, end, 10, PacketType::kMwait, out) < 0) return kErrEos;
      out->payload = ReadLe(p + 2, 4) | ReadLe(p + 6, 4) << 32;
      return 10;
    case 0x22:  // PWRE: HW bit, sub-state, state (2 bytes)
      if (Fixed(p, end, 4, PacketType::kPwre, out) < 0) return kErrEos;
      out->payload = ReadLe(p + 2, 2);
      return 4;
    case 0xa2:  // PWRX: deepest and last core C-state, wake reasons (5 bytes)
      if (Fixed(p, end, 7, PacketType::kPwrx, out) < 0) return kErrEos;
      out->payload = ReadLe(p + 2, 5);
      return 7;
    default: break;
  }
  if ((p[1] & 0x1f) == 0x12) {  // PTW: payload of 4 or 8 bytes (PayloadBytes 0 or 1)
    const unsigned pb = (p[1] >> 5) & 3;
    if (pb > 1) return kErrBadPacket;
    const int n = pb == 0 ? 4 : 8;
    if (end - p < 2 + n) return kErrEos;
    out->type = PacketType::kPtw;
    out->mode_bits = static_cast<uint8_t>(p[1] >> 7);
    out->payload = ReadLe(p + 2, n);
    out->size = static_cast<uint8_t>(2 + n);
    return 2 + n;
  }
  return kErrBadOpc;
}

}  // namespace

int FetchType(const uint8_t* p, const uint8_t* end, PacketType* type) {
  if (p >= end) return kErrEos;
  const uint8_t b = p[0];
  switch (b) {
    case 0x00: *type = PacketType::kPad; return 0;
    case 0x99: *type = PacketType::kMode; return 0;
    case 0x19: *type = PacketType::kTsc; return 0;
    case 0x59: *type = PacketType::kMtc; return 0;
    case 0x02: break;
    default:
      if ((b & 1) == 0) {
        *type = PacketType::kTnt8;
      } else if ((b & 3) == 3) {
        *type = PacketType::kCyc;
      } else {
        switch (b & 0x1f) {
          case 0x0d: *type = PacketType::kTip; break;
          case 0x1d: *type = PacketType::kFup; break;
          case 0x11: *type = PacketType::kTipPge; break;
          case 0x01: *type = PacketType::kTipPgd; break;
          default: *type = PacketType::kUnknown; break;
        }
      }
      return 0;
  }
  if (end - p < 2) return kErrEos;
  switch (p[1]) {
    case 0x82: *type = PacketType::kPsb; return 0;
    case 0xa3: *type = PacketType::kTnt64; return 0;
    case 0x43: *type = PacketType::kPip; return 0;
    case 0xf3: *type = PacketType::kOvf; return 0;
    case 0x23: *type = PacketType::kPsbEnd; return 0;
    case 0x03: *type = PacketType::kCbr; return 0;
    case 0x73: *type = PacketType::kTma; return 0;
    case 0x83: *type = PacketType::kStop; return 0;
    case 0xc8: *type = PacketType::kVmcs; return 0;
    case 0x62:
    case 0xe2: *type = PacketType::kExstop; return 0;
    case 0xc2: *type = PacketType::kMwait; return 0;
    case 0x22: *type = PacketType::kPwre; return 0;
    case 0xa2: *type = PacketType::kPwrx; return 0;
    case 0xc3:
      if (end - p < 3) return kErrEos;
      *type = p[2] == 0x88 ? PacketType::kMnt : PacketType::kUnknown;
      return 0;
    default: break;
  }
  *type = (p[1] & 0x1f) == 0x12 ? PacketType::kPtw : PacketType::kUnknown;
  return 0;
}

int ParsePacket(const uint8_t* p, const uint8_t* end, Packet* out) {
  const uint8_t b = p[0];
  if (b == 0x00) return Fixed(p, end, 1, PacketType::kPad, out);
  if (b == 0x02) return ParseExt(p, end, out);
  if ((b & 1) == 0) {  // TNT-8: up to 6 outcomes below a stop bit, shifted left once
    const unsigned v = b >> 1;
    const int msb = 31 - __builtin_clz(v);
    out->type = PacketType::kTnt8;
    out->tnt_bits = static_cast<uint8_t>(msb);
    out->payload = v & ((1u << msb) - 1);
    out->size = 1;
    return 1;
  }
  if ((b & 3) == 3) return ParseCyc(p, end, out);
  switch (b & 0x1f) {
    case 0x0d: return ParseIp(p, end, PacketType::kTip, out);
    case 0x11: return ParseIp(p, end, PacketType::kTipPge, out);
    case 0x01: return ParseIp(p, end, PacketType::kTipPgd, out);
    case 0x1d: return ParseIp(p, end, PacketType::kFup, out);
    default: break;
  }
  switch (b) {
    case 0x99: {  // MODE: leaf in bits 7:5 of the payload
      if (end - p < 2) return kErrEos;
      const unsigned leaf = p[1] >> 5;
      if (leaf > 1) return kErrBadPacket;
      out->type = PacketType::kMode;
      out->mode_leaf = static_cast<uint8_t>(leaf);
      out->mode_bits = static_cast<uint8_t>(p[1] & 0x1f);
      out->size = 2;
      return 2;
    }
    case 0x19: {
      if (end - p < 8) return kErrEos;
      out->type = PacketType::kTsc;
      out->payload = ReadLe(p + 1, 7);
      out->size = 8;
      return 8;
    }
    case 0x59: {
      if (end - p < 2) return kErrEos;
      out->type = PacketType::kMtc;
      out->payload = p[1];
      out->size = 2;
      return 2;
    }
    default: break;
  }
  return kErrBadOpc;
}

int64_t FindPsb(const uint8_t* begin, const uint8_t* end, size_t from) {
  static constexpr uint8_t kPsb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                       0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
  const size_t size = static_cast<size_t>(end - begin);
  for (size_t i = from; i + 16 <= size; ++i) {
    if (begin[i] == 0x02 && begin[i + 1] == 0x82 && std::memcmp(begin + i, kPsb, 16) == 0)
      return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace ptsnap::flow
