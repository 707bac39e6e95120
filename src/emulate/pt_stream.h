// PtStream: the encoder-side state of one emulated Intel PT stream, on top of
// libipt's packet encoder (pt_enc_next). It owns the decisions a CPU makes
// when it writes PT: TNT batching, last-IP compression, return compression,
// PSB+ layout and the TIP.PGD/TIP.PGE pairs around far transfers.
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
// Bytes accumulate in an internal buffer; the owner takes them with Take().
// Not thread-safe: one PtStream per traced thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

struct pt_encoder;
struct pt_packet;

namespace ptsnap::emulate {

struct PtStreamOptions {
  bool ret_compression = true;   // false: every return is a TIP (noretcomp)
  size_t buffer_size = 1 << 16;  // packets between two Take() calls must fit
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
  ~PtStream();
  PtStream(const PtStream&) = delete;
  PtStream& operator=(const PtStream&) = delete;

  // PSB+ : PSB, TSC, MODE.Exec (64-bit), FUP(ip) when tracing is enabled,
  // PSBEND. Flushes TNT first, resets last-IP and the return stack.
  void Psb(uint64_t tsc, bool enabled, uint64_t ip);
  // One conditional branch outcome (or a compressed return). Inline: this
  // runs for most translation blocks.
  void Tnt(bool taken) {
    tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
    if (++tnt_bits_ == 47) FlushTnt();  // a long TNT carries at most 47 bits
  }
  void FlushTnt();
  void Tip(uint64_t ip);
  void Fup(uint64_t ip);
  // Tracing enabled at `ip` (user code resumed); TSC first.
  void Pge(uint64_t ip, uint64_t tsc);
  // Tracing disabled at a far transfer (syscall) with the IP suppressed, as a
  // user-only trace shows it. Clears the return stack.
  void PgdSuppressed();
  // Asynchronous disable (signal delivery) at `ip`: FUP(ip), TIP.PGD.
  void AsyncDisable(uint64_t ip);
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
  [[nodiscard]] size_t pending() const { return pending_; }
  [[nodiscard]] std::span<const uint8_t> bytes() const;
  // Forgets the pending bytes (after the owner copied bytes()).
  void Take();

  [[nodiscard]] const ReturnStack& return_stack() const { return ret_; }
  [[nodiscard]] int tnt_pending() const { return tnt_bits_; }

 private:
  void Emit(const ::pt_packet& p);
  void IpPacket(int type, uint64_t ip);

  PtStreamOptions opts_;
  std::vector<uint8_t> buf_;
  pt_encoder* enc_ = nullptr;
  uint64_t last_ip_ = 0;
  bool have_last_ip_ = false;
  uint64_t tnt_payload_ = 0;
  int tnt_bits_ = 0;
  size_t pending_ = 0;  // bytes written since Take()
  ReturnStack ret_;
};

}  // namespace ptsnap::emulate
