#include "emulate/pt_stream.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ptsnap::emulate {

size_t ReturnStack::size() const { return (top_ + kCapacity + 1 - bottom_) % (kCapacity + 1); }

int ChooseIpCompression(uint64_t ip, uint64_t last, bool have_last) {
  if (have_last) {
    if ((ip >> 16) == (last >> 16)) return pt_ipc_update_16;
    if ((ip >> 32) == (last >> 32)) return pt_ipc_update_32;
    if ((ip >> 48) == (last >> 48)) return pt_ipc_update_48;
  }
  // sext_48 reproduces canonical addresses (bits 63..47 all equal).
  const uint64_t upper = ip >> 47;
  if (upper == 0 || upper == (~uint64_t{0} >> 47)) return pt_ipc_sext_48;
  return pt_ipc_full;
}

PtStream::PtStream(PtStreamOptions opts) : opts_(opts), buf_(opts.buffer_size) {
  if (opts_.tsc_per_ctc == 0) opts_.tsc_per_ctc = 1;
  if (opts_.cyc_thresh > 0) cyc_min_ = uint64_t{1} << std::min<uint32_t>(opts_.cyc_thresh - 1, 62);
  mtc_step_ = uint64_t{opts_.tsc_per_ctc} << std::min<uint32_t>(opts_.mtc_freq, 15);
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = buf_.data();
  cfg.end = buf_.data() + buf_.size();
  enc_ = pt_alloc_encoder(&cfg);
  if (enc_ == nullptr) std::abort();  // only fails on allocation failure
}

PtStream::~PtStream() { pt_free_encoder(enc_); }

void PtStream::Emit(const pt_packet& p) {
  // The encoder continues after the bytes so far, RawBytes' included.
  pt_enc_sync_set(enc_, pending_);
  int r = pt_enc_next(enc_, &p);
  if (r < 0) {
    // The owner drains after every translation block; overflowing the buffer
    // is a broken invariant, not a user error.
    std::fprintf(stderr, "ptsnap plugin: PT encoder failed: %s\n", pt_errstr(pt_errcode(r)));
    std::abort();
  }
  pending_ += static_cast<size_t>(r);
}

void PtStream::IpPacket(int type, uint64_t ip) {
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = static_cast<pt_packet_type>(type);
  auto ipc = static_cast<pt_ip_compression>(ChooseIpCompression(ip, last_ip_, have_last_ip_));
  p.payload.ip.ipc = ipc;
  switch (ipc) {
    case pt_ipc_update_16: p.payload.ip.ip = ip & 0xffff; break;
    case pt_ipc_update_32: p.payload.ip.ip = ip & 0xffffffff; break;
    case pt_ipc_update_48:
    case pt_ipc_sext_48: p.payload.ip.ip = ip & 0xffffffffffff; break;
    default: p.payload.ip.ip = ip; break;
  }
  Emit(p);
  last_ip_ = ip;
  have_last_ip_ = true;
}

// The three packets written most often (every few instructions with
// cycle-accurate timing) are laid out here rather than through
// pt_enc_next, which costs a call and a dispatch each (SDM 33.4.2: short
// TNT, MTC, CYC). The packet tests decode them with libipt.
void PtStream::RawBytes(const uint8_t* b, size_t n) {
  if (pending_ + n > buf_.size()) {
    std::fprintf(stderr, "ptsnap plugin: PT encoder failed: buffer full\n");
    std::abort();  // the owner drains after every block: a broken invariant
  }
  std::memcpy(buf_.data() + pending_, b, n);
  pending_ += n;
}

void PtStream::Cbr() {
  if (opts_.cbr == 0) return;
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_cbr;
  p.payload.cbr.ratio = opts_.cbr;
  Emit(p);
}

void PtStream::Cyc(uint64_t t) {
  // At most one CYC per cycle (SDM 33.4.2.14); below the threshold the
  // counter keeps counting into the next CYC.
  if (!opts_.cyc || t <= last_cyc_ || t - last_cyc_ < cyc_min_) return;
  uint64_t v = t - last_cyc_;
  last_cyc_ = t;
  // Byte 0: CYC[4:0], Exp, 0b11; then 7 bits a byte with Exp in bit 0.
  uint8_t b[10];
  size_t n = 0;
  b[n] = static_cast<uint8_t>(((v & 0x1f) << 3) | 0x3);
  v >>= 5;
  while (v != 0) {
    b[n] |= n == 0 ? 0x4 : 0x1;  // more bytes follow
    ++n;
    b[n] = static_cast<uint8_t>((v & 0x7f) << 1);
    v >>= 7;
  }
  RawBytes(b, n + 1);
}

void PtStream::EmitMtcsUpTo(uint64_t now) {
  // A thread's clock only jumps while its tracing is off (Pge restarts the
  // schedule), so few MTCs are ever due at once; a larger jump is written
  // as a TSC, as hardware does after time it could not count.
  if ((now - next_mtc_) / mtc_step_ > 4096) {
    FlushTnt();
    Cyc(now);
    TscTma(now);
    return;
  }
  while (next_mtc_ <= now) {
    FlushTnt();
    Cyc(next_mtc_);
    const uint8_t mtc[2] = {
        0x59, static_cast<uint8_t>((next_mtc_ / opts_.tsc_per_ctc) >> opts_.mtc_freq)};
    RawBytes(mtc, 2);
    next_mtc_ += mtc_step_;
  }
}

void PtStream::TscTma(uint64_t tsc) {
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_tsc;
  p.payload.tsc.tsc = tsc;
  Emit(p);
  if (!opts_.mtc) return;
  // TMA relates the TSC to the crystal clock: CTC[15:0] and the TSC ticks
  // since the last CTC tick (libipt: base = TSC - FC).
  const uint64_t ctc = tsc / opts_.tsc_per_ctc;
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_tma;
  p.payload.tma.ctc = static_cast<uint16_t>(ctc & 0xffff);
  p.payload.tma.fc = static_cast<uint16_t>(tsc - ctc * opts_.tsc_per_ctc);
  Emit(p);
  next_mtc_ = (tsc / mtc_step_ + 1) * mtc_step_;
}

void PtStream::FlushTnt() {
  if (tnt_bits_ == 0) return;
  Cyc(tnt_time_);  // a TNT's CYC is the retirement time of its first branch
  if (tnt_bits_ <= 6) {
    // Short TNT: the bits and a stop bit above them, shifted left once.
    const uint8_t b = static_cast<uint8_t>(((uint64_t{1} << tnt_bits_) | tnt_payload_) << 1);
    RawBytes(&b, 1);
    tnt_bits_ = 0;
    tnt_payload_ = 0;
    return;
  }
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = tnt_bits_ <= 6 ? ppt_tnt_8 : ppt_tnt_64;
  p.payload.tnt.bit_size = static_cast<uint8_t>(tnt_bits_);
  p.payload.tnt.payload = tnt_payload_;
  Emit(p);
  tnt_bits_ = 0;
  tnt_payload_ = 0;
}

void PtStream::Psb(uint64_t tsc, bool enabled, uint64_t ip) {
  FlushTnt();
  if (tsc > now_) now_ = tsc;
  // The CYC before a PSB (the one erratum SKL168 may drop) brings the cycle
  // counter to the TSC of the PSB+, from which libipt counts the next CYC.
  Cyc(tsc);
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_psb;
  Emit(p);
  TscTma(tsc);
  Cbr();
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_mode;
  p.payload.mode.leaf = pt_mol_exec;
  p.payload.mode.bits.exec.csl = 1;  // 64-bit code
  Emit(p);
  have_last_ip_ = false;
  last_ip_ = 0;
  ret_.Clear();
  if (enabled) IpPacket(ppt_fup, ip);
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_psbend;
  Emit(p);
}

void PtStream::Tip(uint64_t ip) {
  FlushTnt();
  Cyc(now_);
  IpPacket(ppt_tip, ip);
}

void PtStream::Fup(uint64_t ip) {
  FlushTnt();
  Cyc(now_);
  IpPacket(ppt_fup, ip);
}

void PtStream::Pge(uint64_t ip, uint64_t tsc) {
  FlushTnt();
  if (tsc > now_) now_ = tsc;
  TscTma(tsc);
  // As when TraceEn goes 0 -> 1 (SDM table "Packet Generation under
  // Different Enable Conditions"): TSC, TMA, CBR, TIP.PGE. The CBR matters:
  // libipt restarts its cycle calibration at a CBR outside PSB+, which it
  // must after MTCs that stopped while tracing was off.
  Cbr();
  last_cyc_ = tsc;  // TraceEn was off: the cycle counter restarts here
  IpPacket(ppt_tip_pge, ip);
}

void PtStream::PgdSuppressed() {
  FlushTnt();
  Cyc(now_);
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = ppt_tip_pgd;
  p.payload.ip.ipc = pt_ipc_suppressed;
  Emit(p);
  ret_.Clear();
}

void PtStream::AsyncDisable(uint64_t ip) {
  Fup(ip);
  PgdSuppressed();
}

std::span<const uint8_t> PtStream::bytes() const { return {buf_.data(), pending()}; }

void PtStream::Take() { pending_ = 0; }

}  // namespace ptsnap::emulate
