// PtStream: the encoder-side state of one emulated Intel PT stream, on top of
// the packet writer (pt_packets.h). It owns the decisions a CPU makes when
// it writes PT: TNT batching, last-IP compression, return compression, PSB+
// layout and the TIP.PGD/TIP.PGE pairs around far transfers.
//
// Each rule here mirrors what libipt's decoder expects
// (docs/emulation.md, "Encoder rules"):
//  - pending TNT bits are flushed before every TIP, FUP, TIP.PGE, TIP.PGD and
//    PSB; the oldest branch sits in the most significant payload bit;
//  - a PSB resets last-IP, so the first IP after it is sext_48;
//  - the return stack holds 64 entries (the oldest is dropped), is pushed by
//    calls except direct calls with zero displacement, popped only by a
//    compressed return, and cleared at every PSB and TIP.PGD.
//
// Timing packets follow the SDM's rules for the configured timer options
// (docs/emulation.md, "Time"), against the owner's clock (SetTime, in TSC
// ticks):
//  - TSC in every PSB+ and before every TIP.PGE; TMA after each TSC when MTC
//    is on; CBR in PSB+ and before each TIP.PGE when `cbr` is set (libipt
//    calibrates CYC from it);
//  - MTC whenever the crystal clock (CTC = TSC / tsc_per_ctc) crosses a
//    multiple of 2^mtc_freq, payload CTC[mtc_freq+7:mtc_freq]; pending TNT
//    bits are flushed first, so every packet before an MTC is earlier;
//  - CYC (cycles = TSC ticks) before each CYC-eligible packet (TNT, TIP,
//    TIP.PGE/PGD, FUP, MTC, and before a PSB), at least 2^(cyc_thresh-1)
//    cycles after the previous one; a TNT's CYC times its first branch.
//
// Bytes accumulate in a buffer that grows as needed; the owner takes them
// with Take(). Not thread-safe: one PtStream per traced thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "emulate/pt_packets.h"

namespace ptsnap::emulate {

struct PtStreamOptions {
  bool ret_compression = true;   // false: every return is a TIP (noretcomp)
  size_t buffer_size = 1 << 16;  // initial room for packets between two Take() calls
  // Timing packets besides TSC, as IA32_RTIT_CTL would enable them.
  bool mtc = false;
  uint32_t mtc_freq = 0;  // MTCFreq: an MTC every 2^mtc_freq CTC ticks
  bool cyc = false;
  uint32_t cyc_thresh = 0;   // CycThresh: CYCs at least 2^(value-1) cycles apart (0: any)
  uint32_t tsc_per_ctc = 1;  // CPUID.15H EBX/EAX (an integer ratio here)
  uint8_t cbr = 0;           // core:bus ratio for PSB+ and TIP.PGE (0: none)
};

// libipt's return stack (pt_retstack): 64 entries, the oldest overwritten.
class ReturnStack {
 public:
  static constexpr size_t kCapacity = 64;
  void Push(uint64_t ip) {
    // pt_retstack_push: store at top, advance; when top meets bottom the
    // oldest entry is dropped.
    stack_[top_] = ip;
    top_ = static_cast<uint8_t>(top_ == kCapacity ? 0 : top_ + 1);
    if (top_ == bottom_) bottom_ = static_cast<uint8_t>(bottom_ == kCapacity ? 0 : bottom_ + 1);
  }
  // The top entry, or false when empty.
  bool Top(uint64_t* ip) const {
    if (empty()) return false;
    *ip = stack_[top_ == 0 ? kCapacity : top_ - 1];
    return true;
  }
  void Pop() {
    if (!empty()) top_ = static_cast<uint8_t>(top_ == 0 ? kCapacity : top_ - 1);
  }
  void Clear() { top_ = bottom_ = 0; }
  [[nodiscard]] bool empty() const { return top_ == bottom_; }
  [[nodiscard]] size_t size() const;

 private:
  std::array<uint64_t, kCapacity + 1> stack_{};
  uint8_t top_ = 0, bottom_ = 0;
};

// The last-IP compression libipt's pt_last_ip applies: the shortest of
// update_16/32/48 that reconstructs `ip` from `last`, else sext_48 (or full
// for a non-canonical address). Without a valid last IP: sext_48/full.
// Returns the pt_ip_compression value.
int ChooseIpCompression(uint64_t ip, uint64_t last, bool have_last);

class PtStream {
 public:
  explicit PtStream(PtStreamOptions opts = {});

  // The time of the packets that follow (TSC ticks; never goes back). Writes
  // the MTCs due up to `now`. Call while tracing is enabled; Psb and Pge set
  // the time themselves.
  void SetTime(uint64_t now) {
    if (now > now_) now_ = now;
    if (opts_.mtc && now_ >= next_mtc_) EmitMtcsUpTo(now_);
  }
  // PSB+ : PSB, TSC, [TMA], [CBR], MODE.Exec (64-bit), FUP(ip) when tracing
  // is enabled, PSBEND, at time `tsc`. Flushes TNT first, resets last-IP and
  // the return stack.
  void Psb(uint64_t tsc, bool enabled, uint64_t ip);
  // One conditional branch outcome (or a compressed return), retired at the
  // current time. Inline: this runs for most translation blocks.
  void Tnt(bool taken) {
    if (tnt_bits_ == 0) tnt_time_ = now_;
    tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
    if (++tnt_bits_ == 47) FlushTnt();  // a long TNT carries at most 47 bits
  }
  void FlushTnt();
  void Tip(uint64_t ip);
  void Fup(uint64_t ip);
  // Tracing enabled at `ip` (user code resumed) at time `tsc`: TSC [TMA]
  // first. Tracing was off (TraceEn cleared while the thread was away), so
  // the cycle counter and the MTC schedule restart from `tsc`.
  void Pge(uint64_t ip, uint64_t tsc);
  // TraceEn set again after a pause (--only-in's resume, before the PSB+
  // and TIP.PGE that follow): the cycle counter restarts at `tsc`, so no
  // CYC counts the untraced time and the next bytes start with the PSB.
  void RestartCycles(uint64_t tsc) {
    FlushTnt();
    if (tsc > now_) now_ = tsc;
    last_cyc_ = tsc;
  }
  // Tracing disabled at a far transfer (syscall) with the IP suppressed, as a
  // user-only trace shows it. Clears the return stack.
  void PgdSuppressed();
  // Asynchronous disable (signal delivery) at `ip`: FUP(ip), TIP.PGD.
  void AsyncDisable(uint64_t ip);
  // Tracing disabled by the branch just retired, whose target `ip` lies
  // outside the address filters: TIP.PGD(ip), as the CPU writes it when a
  // branch leaves a FilterEn range (SDM 33.2.5.3; libipt binds it to the
  // next branch on the decoder's path). Clears the return stack.
  void Pgd(uint64_t ip);
  // The IP entered a TraceStop range: TraceStop (after the TIP.PGD that
  // ended packet generation, if it was on).
  void TraceStop() {
    FlushTnt();
    out_.TraceStop();
  }
  // A call that pushes `return_ip` (the caller skips zero-displacement calls).
  void Call(uint64_t return_ip) {
    if (opts_.ret_compression) ret_.Push(return_ip);
  }
  // A near return to `target`: a taken TNT bit when the return stack's top
  // matches (and compression is on), else a TIP.
  void Ret(uint64_t target) {
    uint64_t top = 0;
    if (opts_.ret_compression && ret_.Top(&top) && top == target) {
      ret_.Pop();
      Tnt(true);
      return;
    }
    Tip(target);
  }

  // Bytes written since the last Take().
  [[nodiscard]] size_t pending() const { return out_.size(); }
  [[nodiscard]] std::span<const uint8_t> bytes() const { return out_.bytes(); }
  // Forgets the pending bytes (after the owner copied bytes()).
  void Take() {
    taken_since_psb_ += out_.size() - psb_at_;
    psb_at_ = 0;
    out_.Clear();
  }
  // Bytes written since the last PSB began (all, before the first), taken
  // or not: what the PSB period counts, as the hardware's PSB frequency
  // counts output bytes.
  [[nodiscard]] uint64_t since_psb() const { return taken_since_psb_ + out_.size() - psb_at_; }

  [[nodiscard]] const ReturnStack& return_stack() const { return ret_; }
  [[nodiscard]] int tnt_pending() const { return tnt_bits_; }

 private:
  void WriteIp(IpPacket type, uint64_t ip);
  // A CYC for time `t` when cycle-accurate mode is on and the threshold
  // allows one; the cycle counter then restarts at `t`.
  void Cyc(uint64_t t);
  void Cbr();  // CBR with the configured ratio, when there is one
  void EmitMtcsUpTo(uint64_t now);
  // TSC at `tsc` (and TMA when MTC is on); the next MTC is the first CTC
  // boundary after it.
  void TscTma(uint64_t tsc);

  PtStreamOptions opts_;
  PacketWriter out_;
  uint64_t last_ip_ = 0;
  bool have_last_ip_ = false;
  uint64_t tnt_payload_ = 0;
  int tnt_bits_ = 0;
  ReturnStack ret_;
  // Timing state, in TSC ticks.
  uint64_t now_ = 0;
  uint64_t tnt_time_ = 0;  // when the first pending TNT bit's branch retired
  uint64_t last_cyc_ = 0;  // the cycle counter's reference point
  bool started_ = false;   // a PSB+ or TIP.PGE was written: TraceEn is on
  uint64_t cyc_min_ = 1;   // 2^(cyc_thresh-1)
  uint64_t mtc_step_ = 0;  // TSC ticks between two MTCs
  uint64_t next_mtc_ = ~uint64_t{0};
  // since_psb(): bytes taken since the last PSB, and where in the pending
  // bytes it began (0 when it was taken, or before the first).
  uint64_t taken_since_psb_ = 0;
  size_t psb_at_ = 0;
};

}  // namespace ptsnap::emulate
