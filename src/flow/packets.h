// The packet layer of the flow decoder: one Intel PT packet at a time, by
// the SDM's formats (Vol. 3C, 33.4.2 "Packet Definitions"), pure and
// without allocation. ParsePacket recognises every packet libipt 2.0
// knows; the decoder (flow_decoder.h) inlines its own fast paths for
// TNT-8, TIP, CYC and MTC ahead of it and calls ParsePacket for the rest.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptsnap::flow {

enum class PacketType : uint8_t {
  kUnknown,  // an opcode libipt does not know: an error when decoded
  kPad,
  kTnt8,
  kTnt64,
  kTip,
  kTipPge,
  kTipPgd,
  kFup,
  kPsb,
  kPsbEnd,
  kMode,
  kTsc,
  kMtc,
  kCyc,
  kCbr,
  kTma,
  kOvf,
  kPip,
  kVmcs,
  kStop,
  kPtw,
  kPwre,
  kPwrx,
  kExstop,
  kMwait,
  kMnt,
  // Never from ParsePacket: the flow decoder's scans name so a TMA with
  // reserved bits set under erratum SKZ84 (libipt's ppt_invalid, 8 bytes).
  kInvalid,
};

// A decoded packet. Only the fields of its type are meaningful.
struct Packet {
  PacketType type = PacketType::kPad;
  uint8_t size = 0;  // bytes
  // IP packets: the IPBytes field (0 suppressed, 1 update-16, 2 update-32,
  // 3 sext-48, 4 update-48, 6 full) and the bytes it carries.
  uint8_t ipc = 0;
  // TNT: `tnt_bits` outcomes, the oldest in bit tnt_bits-1 of `payload`.
  uint8_t tnt_bits = 0;
  // MODE: its leaf (0 exec, 1 TSX) and bits. PIP: nr (non-root) in
  // `mode_bits`. EXSTOP, PTW: the IP bit (a FUP follows) in `mode_bits`.
  uint8_t mode_leaf = 0, mode_bits = 0;
  // IP / TSC / MTC CTC / CYC cycles / CBR ratio / PIP CR3 / VMCS base / PTW
  // payload (size - 2 bytes of it) / MNT payload; MWAIT: hints | ext << 32;
  // PWRE, PWRX: their payload bytes, little-endian (SDM 33.4.2.19-20).
  uint64_t payload = 0;
  // TMA: CTC[15:0] in `payload`, FastCounter in `fc`.
  uint16_t fc = 0;
};

// Errors, as libipt's (negative) codes, so the decoders' outputs compare.
inline constexpr int kErrEos = -7;        // pte_eos: the packet is cut off
inline constexpr int kErrBadOpc = -4;     // pte_bad_opc: unknown opcode
inline constexpr int kErrBadPacket = -5;  // pte_bad_packet: bad payload

// The type of the packet at `p` from its opcode bytes alone, as libipt's
// pt_df_fetch: kErrEos when the opcode itself is cut off (or p == end).
// Errors in the payload show only when it is parsed.
int FetchType(const uint8_t* p, const uint8_t* end, PacketType* type);

// Parses the packet at `p` (p < end). Returns its size (> 0) and fills
// `*out`, or a negative error. Never reads at or past `end`.
int ParsePacket(const uint8_t* p, const uint8_t* end, Packet* out);

// The byte size of an IP packet's payload for `ipc`; -1 for reserved values.
inline int IpPayloadSize(unsigned ipc) {
  static constexpr int8_t kSize[8] = {0, 2, 4, 6, 6, -1, 8, -1};
  return kSize[ipc & 7];
}

// The offset of the first PSB at or after `from` in [begin, end), or -1.
int64_t FindPsb(const uint8_t* begin, const uint8_t* end, size_t from);

}  // namespace ptsnap::flow
