// PacketWriter: the one writer of Intel PT packets in the tree. Each call
// appends one packet, encoded by libipt's pt_enc_next or, for the packets an
// emulated CPU writes every few instructions (short TNT, MTC, CYC), laid out
// here by the SDM's formats (33.4.2) and checked against libipt's decoder in
// pt_stream_test.cpp.
//
// It makes no decisions: which packets, in which order, with which IP
// compression is its owner's business. PtStream (pt_stream.h) writes the
// streams of the emulator with a CPU's rules; tests write the exact packet
// sequences they need (decode/test_stream.h, the kernel test world).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

struct pt_encoder;
struct pt_packet;

namespace ptsnap::emulate {

enum class IpPacket { kTip, kTipPge, kTipPgd, kFup };
// The IPBytes field: which bytes of the IP the packet carries (SDM table
// "Compressed IP"); values as libipt's pt_ip_compression.
enum class IpCompression : uint8_t {
  kSuppressed = 0,
  kUpdate16 = 1,
  kUpdate32 = 2,
  kSext48 = 3,
  kUpdate48 = 4,
  kFull = 6,
};

class PacketWriter {
 public:
  // Room for `capacity` bytes before the buffer first grows.
  explicit PacketWriter(size_t capacity = 1 << 12);
  ~PacketWriter();
  PacketWriter(const PacketWriter&) = delete;
  PacketWriter& operator=(const PacketWriter&) = delete;

  void Psb();
  void PsbEnd();
  void Tsc(uint64_t tsc);
  // TMA: CTC[15:0] and the fast counter (TSC ticks since the CTC tick).
  void Tma(uint16_t ctc, uint16_t fc);
  void Cbr(uint8_t ratio);
  void ModeExec64();
  // MODE.TSX: `intx` a transaction is running, `abrt` it aborted.
  void ModeTsx(bool intx, bool abrt);
  void Ovf();
  // TraceStop: tracing stopped in a TraceStop address range.
  void TraceStop();
  // PIP: CR3 (bits 51:5 kept) written, `non_root` in VMX non-root operation.
  void Pip(uint64_t cr3, bool non_root);
  // VMCS: the VMCS pointer (bits 51:12 kept) loaded by VMPTRLD.
  void Vmcs(uint64_t base);
  // PTW: a PTWRITE's operand, `bytes` 4 or 8; `ip`: a FUP with its IP follows.
  void Ptw(uint64_t payload, int bytes, bool ip);
  // Power: EXSTOP (`ip`: a FUP follows), MWAIT's hints and extensions, PWRE
  // (entering C-state `state`.`sub_state`, `hw`: hardware-initiated), PWRX
  // (leaving: `last` and `deepest` core C-states, wake reasons as PWRX's
  // bits 3:0: interrupt 1, store 4, autonomous 8).
  void Exstop(bool ip);
  void Mwait(uint32_t hints, uint32_t ext);
  void Pwre(uint8_t state, uint8_t sub_state, bool hw);
  void Pwrx(uint8_t last, uint8_t deepest, uint8_t wake);
  // `ip`'s bytes as `ipc` selects (the caller chose `ipc` against its
  // last IP; the bytes above it are not written).
  void Ip(IpPacket type, uint64_t ip, IpCompression ipc);
  // `bits` (1..47) conditional-branch outcomes, the oldest in the most
  // significant of them: a short TNT up to 6 bits, else a long TNT.
  void Tnt(uint64_t payload, int bits) {
    if (bits <= 6) {
      // The bits and a stop bit above them, shifted left once.
      const auto b = static_cast<uint8_t>(((uint64_t{1} << bits) | payload) << 1);
      Raw(&b, 1);
    } else {
      LongTnt(payload, bits);
    }
  }
  // MTC with CTC[mtc_freq+7:mtc_freq] as its payload.
  void Mtc(uint8_t ctc) {
    const uint8_t b[2] = {0x59, ctc};
    Raw(b, 2);
  }
  // CYC carrying `cycles` (> 0).
  void Cyc(uint64_t cycles);
  // Bytes as they are (tests: deliberately broken packets).
  void Raw(const uint8_t* bytes, size_t n) {
    if (n > buf_.size() - size_) Grow(n);
    for (size_t i = 0; i < n; ++i) buf_[size_ + i] = bytes[i];
    size_ += n;
  }

  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] std::span<const uint8_t> bytes() const { return {buf_.data(), size_}; }
  // Forgets the bytes written (the owner copied bytes()); the capacity stays.
  void Clear() { size_ = 0; }

 private:
  void Emit(const ::pt_packet& p);
  void LongTnt(uint64_t payload, int bits);
  void Grow(size_t n);

  std::vector<uint8_t> buf_;
  size_t size_ = 0;
  pt_encoder* enc_ = nullptr;  // over buf_; reallocated when it grows
};

}  // namespace ptsnap::emulate
