#include "emulate/pt_stream.h"

#include <intel-pt.h>

#include <algorithm>

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

PtStream::PtStream(PtStreamOptions opts) : opts_(opts), out_(opts.buffer_size) {
  if (opts_.tsc_per_ctc == 0) opts_.tsc_per_ctc = 1;
  if (opts_.cyc_thresh > 0) cyc_min_ = uint64_t{1} << std::min<uint32_t>(opts_.cyc_thresh - 1, 62);
  mtc_step_ = uint64_t{opts_.tsc_per_ctc} << std::min<uint32_t>(opts_.mtc_freq, 15);
}

void PtStream::WriteIp(IpPacket type, uint64_t ip) {
  out_.Ip(type, ip, static_cast<IpCompression>(ChooseIpCompression(ip, last_ip_, have_last_ip_)));
  last_ip_ = ip;
  have_last_ip_ = true;
}

void PtStream::Cbr() {
  if (opts_.cbr != 0) out_.Cbr(opts_.cbr);
}

void PtStream::Cyc(uint64_t t) {
  // At most one CYC per cycle (SDM 33.4.2.14); below the threshold the
  // counter keeps counting into the next CYC.
  if (!opts_.cyc || t <= last_cyc_ || t - last_cyc_ < cyc_min_) return;
  out_.Cyc(t - last_cyc_);
  last_cyc_ = t;
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
    out_.Mtc(static_cast<uint8_t>((next_mtc_ / opts_.tsc_per_ctc) >> opts_.mtc_freq));
    next_mtc_ += mtc_step_;
  }
}

void PtStream::TscTma(uint64_t tsc) {
  out_.Tsc(tsc);
  if (!opts_.mtc) return;
  // TMA relates the TSC to the crystal clock: CTC[15:0] and the TSC ticks
  // since the last CTC tick (libipt: base = TSC - FC).
  const uint64_t ctc = tsc / opts_.tsc_per_ctc;
  out_.Tma(static_cast<uint16_t>(ctc & 0xffff),
           static_cast<uint16_t>(tsc - ctc * opts_.tsc_per_ctc));
  next_mtc_ = (tsc / mtc_step_ + 1) * mtc_step_;
}

void PtStream::FlushTnt() {
  if (tnt_bits_ == 0) return;
  Cyc(tnt_time_);  // a TNT's CYC is the retirement time of its first branch
  out_.Tnt(tnt_payload_, tnt_bits_);
  tnt_bits_ = 0;
  tnt_payload_ = 0;
}

void PtStream::Psb(uint64_t tsc, bool enabled, uint64_t ip) {
  FlushTnt();
  if (tsc > now_) now_ = tsc;
  // The stream's first PSB+ is where TraceEn went 0 -> 1: the cycle
  // counter starts there, and nothing comes before it. (A thread started
  // after time 0 began with a CYC before it, bytes no decoder can read:
  // "undecoded PT bytes", 3 a thread.)
  if (!started_) last_cyc_ = std::max(last_cyc_, tsc);
  started_ = true;
  // The CYC before a PSB (the one erratum SKL168 may drop) brings the cycle
  // counter to the TSC of the PSB+, from which libipt counts the next CYC.
  Cyc(tsc);
  taken_since_psb_ = 0;
  psb_at_ = out_.size();
  out_.Psb();
  TscTma(tsc);
  Cbr();
  out_.ModeExec64();
  have_last_ip_ = false;
  last_ip_ = 0;
  ret_.Clear();
  if (enabled) WriteIp(IpPacket::kFup, ip);
  out_.PsbEnd();
}

void PtStream::Tip(uint64_t ip) {
  FlushTnt();
  Cyc(now_);
  WriteIp(IpPacket::kTip, ip);
}

void PtStream::Fup(uint64_t ip) {
  FlushTnt();
  Cyc(now_);
  WriteIp(IpPacket::kFup, ip);
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
  started_ = true;
  WriteIp(IpPacket::kTipPge, ip);
}

void PtStream::PgdSuppressed() {
  FlushTnt();
  Cyc(now_);
  out_.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
  ret_.Clear();
}

void PtStream::Pgd(uint64_t ip) {
  FlushTnt();
  Cyc(now_);
  WriteIp(IpPacket::kTipPgd, ip);
  ret_.Clear();
}

void PtStream::AsyncDisable(uint64_t ip) {
  Fup(ip);
  PgdSuppressed();
}

}  // namespace ptsnap::emulate
