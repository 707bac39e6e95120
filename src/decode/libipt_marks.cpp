#include "decode/libipt_marks.h"

#include <cstring>

#include "flow/flow_decoder.h"

namespace ptsnap::decode {

namespace {

// `jmp .+16` (eb 10) over the signature.
constexpr size_t kSignatureJumpSize = 2 + flow::kEmulatedPtwriteMagic.size();

// A conditional branch's target, from its bytes: Jcc rel8 (70-7f),
// LOOP*/JrCXZ rel8 (e0-e3) and Jcc rel32 (0f 80-8f). False for any other
// encoding (prefixes included): such a branch gives no mark.
bool CondTarget(const struct pt_insn& insn, uint64_t* target) {
  const uint8_t* r = insn.raw;
  if (insn.size == 2 && ((r[0] >= 0x70 && r[0] <= 0x7f) || (r[0] >= 0xe0 && r[0] <= 0xe3))) {
    *target = insn.ip + 2 + static_cast<int64_t>(static_cast<int8_t>(r[1]));
    return true;
  }
  if (insn.size == 6 && r[0] == 0x0f && r[1] >= 0x80 && r[1] <= 0x8f) {
    int32_t rel;
    std::memcpy(&rel, r + 2, sizeof rel);
    *target = insn.ip + 6 + static_cast<int64_t>(rel);
    return true;
  }
  return false;
}

}  // namespace

LibiptMarks::LibiptMarks(struct pt_block_decoder* blk) : blk_(blk) {}
LibiptMarks::~LibiptMarks() = default;

bool LibiptMarks::IsSignatureJump(const uint8_t* bytes, size_t size) {
  return size >= kSignatureJumpSize && bytes[0] == 0xeb && bytes[1] == 0x10 &&
         std::memcmp(bytes + 2, flow::kEmulatedPtwriteMagic.data(),
                     flow::kEmulatedPtwriteMagic.size()) == 0;
}

void LibiptMarks::Reset() {
  side_.reset();
  broken_ = false;
  insns_ = side_at_ = 0;
  side_status_ = 0;
  pending_ = false;
}

bool LibiptMarks::IsSignatureJumpBlock(const struct pt_block& block,
                                       struct pt_image_section_cache* iscache) {
  // The `jmp` over the signature ends its block (end_on_jump).
  if (block.iclass != ptic_jump || block.truncated) return false;
  const size_t slot = (block.end_ip ^ (block.end_ip >> 10)) % JumpCache::kSlots;
  JumpCache& c = *jumps_;
  if (c.ip[slot] != block.end_ip || c.isid[slot] != block.isid) {
    uint8_t buf[kSignatureJumpSize];
    const int n = pt_iscache_read(iscache, buf, sizeof buf, block.isid, block.end_ip);
    c.ip[slot] = block.end_ip;
    c.isid[slot] = block.isid;
    c.signature[slot] = n > 0 && IsSignatureJump(buf, static_cast<size_t>(n));
  }
  return c.signature[slot];
}

bool LibiptMarks::AfterBlock(const struct pt_block& block, bool signature_jump, uint64_t* payload) {
  insns_ += block.ninsn;
  bool due = false;
  if (pending_ && insns_ >= due_at_) {
    pending_ = false;
    *payload = value_;
    due = true;
  }
  if (!broken_ && signature_jump) pending_ = Read(block.end_ip);
  return due;
}

bool LibiptMarks::Next(struct pt_insn* insn, bool* moved) {
  while (side_status_ & pts_event_pending) {
    struct pt_event ev;
    side_status_ = pt_insn_event(side_.get(), &ev, sizeof ev);
    if (side_status_ < 0) return false;
    switch (ev.type) {
      case ptev_enabled:
      case ptev_disabled:
      case ptev_async_disabled:
      case ptev_async_branch:
      case ptev_overflow:
      case ptev_tsx:
      case ptev_stop: *moved = true; break;
      default: break;
    }
  }
  side_status_ = pt_insn_next(side_.get(), insn, sizeof *insn);
  if (side_status_ < 0) return false;
  side_at_++;
  return true;
}

bool LibiptMarks::Read(uint64_t jmp_ip) {
  if (!side_) {
    // The block decoder's configuration (its bytes), for instructions.
    struct pt_config cfg = *pt_blk_get_config(blk_);
    cfg.flags = {};
    uint64_t sync = 0;
    side_.reset(pt_insn_alloc_decoder(&cfg));
    if (!side_ || pt_blk_get_sync_offset(blk_, &sync) < 0) {
      broken_ = true;
      return false;
    }
    side_status_ = pt_insn_sync_set(side_.get(), sync);
    if (side_status_ < 0) {
      broken_ = true;
      return false;
    }
    side_at_ = 0;
  }
  // The block decoder's image now (the process, text pokes).
  if (pt_insn_set_image(side_.get(), pt_blk_get_image(blk_)) < 0) {
    broken_ = true;
    return false;
  }
  // To the `jmp`: the insns_-th instruction since the sync.
  if (side_at_ >= insns_) return false;  // passed while reading the last one
  struct pt_insn insn;
  bool moved = false;
  while (side_at_ < insns_) {
    if (!Next(&insn, &moved)) {
      broken_ = true;
      return false;
    }
  }
  if (insn.ip != jmp_ip || insn.iclass != ptic_jump) {
    broken_ = true;  // out of step with the block decoder: no more marks here
    return false;
  }
  // The 64 conditional branches: each taken when the next instruction is
  // its target, not taken when it is the one after it.
  moved = false;
  uint64_t value = 0;
  int bits = 0;
  bool in_branch = false;
  uint64_t target = 0, fall = 0;
  for (;;) {
    if (!Next(&insn, &moved)) {
      broken_ = true;
      return false;
    }
    if (moved) return false;  // tracing stopped or was interrupted inside
    if (in_branch) {
      if (insn.ip != target && insn.ip != fall) return false;
      value = value << 1 | (insn.ip == target ? 1 : 0);
      in_branch = false;
      if (++bits == 64) {
        due_at_ = side_at_ - 1;  // the 64th branch; this is the one after it
        value_ = value;
        return true;
      }
    }
    if (insn.iclass == ptic_other) continue;
    if (insn.iclass != ptic_cond_jump) return false;  // a call, return, jump: not the shape
    fall = insn.ip + insn.size;
    // perf's own shape: taken and not taken both reach the next instruction.
    if (!CondTarget(insn, &target) || target == fall) return false;
    in_branch = true;
  }
}

}  // namespace ptsnap::decode
