// Emulated-PTWRITE marks for the libipt engine (docs/decoding.md, "Marks").
//
// perf's emulated PTWRITE is a 2-byte `jmp` over the 16-byte signature
// `0f 0b "perf,ptwrite  "`, after which the next 64 conditional branches
// spell the value, highest bit first, taken for 1. libipt's blocks follow
// taken conditional branches without saying which were taken, so the
// blocks alone cannot read the value. LibiptMarks reads it with a second,
// side decoder: a libipt *instruction* decoder over the same bytes, image
// and configuration, synchronised at the PSB the block decoder synchronised
// on and stepped the same number of instructions as the block decoder
// reported since then, so it stands on the same `jmp`. From there each
// conditional branch's next instruction says whether it was taken. The side
// decoder is made at a segment's first mark only and stays positioned for
// the next mark of the segment: streams without marks cost nothing but a
// look at the bytes after each block that ends in a direct `jmp`.
//
// Only branches whose target differs from their fall-through are read:
// perf's own function (each `jc` jumps to the next instruction) reaches the
// same address taken or not, which libipt's decoders do not tell apart, so
// its calls give no mark here (ptsnap_mark's function jumps over a `nop`).
// Any trouble in the side decoder (an error, an instruction other than the
// one expected, tracing stopping or an interrupt inside the 64 branches)
// gives no mark for that call, never a wrong one, and never an error on the
// timeline.
//
// Not thread-safe; one per block decoder, which it reads but does not own
// and which must outlive it.
#pragma once

#include <intel-pt.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ptsnap::decode {

class LibiptMarks {
 public:
  explicit LibiptMarks(struct pt_block_decoder* blk);
  ~LibiptMarks();
  LibiptMarks(const LibiptMarks&) = delete;
  LibiptMarks& operator=(const LibiptMarks&) = delete;

  // The block decoder synchronised (again): a new segment. The side decoder
  // is dropped; the next mark makes one at the new sync point.
  void Reset();

  // After each block the block decoder returns, in order, with what
  // IsSignatureJumpBlock said of it (asked once: the decode hides the
  // function's frame by the same answer). True when a mark is due after this
  // block: the block holds the 64th conditional branch of an emulated
  // PTWRITE; its value in `*payload`. Reads a new mark's value when the block
  // ends in the `jmp` over the signature.
  bool AfterBlock(const struct pt_block& block, bool signature_jump, uint64_t* payload);

  // Whether `block` ends in the `jmp` over the signature (read once per
  // address and section). The decode also hides the function's frame there.
  bool IsSignatureJumpBlock(const struct pt_block& block, struct pt_image_section_cache* iscache);
  // The 18 bytes at `bytes` are the `jmp` over the signature (eb 10, then
  // 0f 0b "perf,ptwrite  "). Pure.
  static bool IsSignatureJump(const uint8_t* bytes, size_t size);

 private:
  struct InsnDecoderFree {
    void operator()(struct pt_insn_decoder* p) const { pt_insn_free_decoder(p); }
  };
  // Reads the value of the emulated PTWRITE whose `jmp` at `jmp_ip` is the
  // insns_-th instruction since the sync; false when it cannot.
  bool Read(uint64_t jmp_ip);
  // The side decoder's next instruction (events drained); false on error or
  // when an event that moves control flow came first (`*moved`).
  bool Next(struct pt_insn* insn, bool* moved);

  struct pt_block_decoder* blk_;
  std::unique_ptr<struct pt_insn_decoder, InsnDecoderFree> side_;
  bool broken_ = false;   // the side decoder failed in this segment
  uint64_t insns_ = 0;    // instructions the block decoder reported since the sync
  uint64_t side_at_ = 0;  // instructions the side decoder returned since the sync
  int side_status_ = 0;   // its last status (pts_event_pending)
  bool pending_ = false;  // a mark read, waiting for its block
  uint64_t due_at_ = 0;   // the instruction count of its 64th branch
  uint64_t value_ = 0;
  // Whether the `jmp` at an address (in a section: an isid) is the one over
  // the signature, by address: read once, not at every pass (a direct
  // `jmp` ends every block that has one).
  struct JumpCache {
    static constexpr size_t kSlots = 1024;
    JumpCache() { ip.fill(UINT64_MAX); }
    std::array<uint64_t, kSlots> ip;
    std::array<int, kSlots> isid{};
    std::array<bool, kSlots> signature{};
  };
  std::unique_ptr<JumpCache> jumps_ = std::make_unique<JumpCache>();
};

}  // namespace ptsnap::decode
