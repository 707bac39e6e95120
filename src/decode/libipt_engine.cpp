#include "decode/libipt_engine.h"

#include <utility>

#include "base/check.h"
#include "decode/classify.h"
#include "flow/libipt_config.h"

namespace ptsnap::decode {

LibiptEngine::LibiptEngine(UniqueBlockDecoder dec, struct pt_image_section_cache* iscache,
                           struct pt_image* empty)
    : dec_(std::move(dec)), iscache_(iscache), empty_(empty), marks_(dec_.get()) {}

size_t LibiptEngine::Decode(flow::Item* out) {
  for (;;) {
    if (state_ == State::kDone) return 0;
    if (state_ == State::kSegment) {
      if ((status_ & pts_event_pending) != 0) {
        struct pt_event ev;
        status_ = pt_blk_event(dec_.get(), &ev, sizeof ev);
        if (status_ < 0) {
          if (const size_t n = EndSegment(status_, 0, out); n != 0 || state_ == State::kDone)
            return n;
          continue;
        }
        out[0] = flow::LibiptEventItem(ev);
        if (!Offset(&out[0].offset)) out[0].offset = 0;
        return 1;
      }
      if ((status_ & pts_eos) != 0) {
        at_eos_ = true;
        state_ = State::kDone;
        return 0;
      }
      struct pt_block block;
      status_ = pt_blk_next(dec_.get(), &block, sizeof block);
      size_t n = 0;
      // Errors apply after the last instruction of the returned block.
      if (block.ninsn > 0) {
        flow::Item& b = out[n++];
        b = flow::LibiptBlockItem(block);
        if (block.iclass == ptic_error)
          b.iclass = static_cast<flow::InsnClass>(ClassifyBlockEnd(iscache_, block));
        if (b.iclass == flow::InsnClass::kCondJump) b.size = CondJumpSize(block);
        b.eptw_jump = marks_.IsSignatureJumpBlock(block, iscache_);
        // An emulated PTWRITE's 64th conditional branch was in this block.
        b.mark = marks_.AfterBlock(block, b.eptw_jump, &b.payload);
      }
      // A call that decoded nothing stopped at block.ip: with -pte_nomap
      // the address whose code is not in the image.
      if (status_ < 0)
        n += EndSegment(
            status_, pt_errcode(status_) == pte_nomap && block.ninsn == 0 ? block.ip : 0, out + n);
      if (n != 0 || state_ == State::kDone) return n;
      continue;
    }
    const int status = pt_blk_sync_forward(dec_.get());
    if (status < 0) {
      uint64_t off = 0;
      if (status == -pte_eos || !Offset(&off)) off = 0;  // not synchronized: no position
      if (status == -pte_eos || off == last_sync_) {     // no progress: give up on this stream
        state_ = State::kDone;
        return 0;
      }
      last_sync_ = off;
      continue;
    }
    marks_.Reset();
    status_ = status;
    state_ = State::kSegment;
    flow::Item& s = out[0];
    s = flow::Item();
    s.kind = flow::ItemKind::kSync;
    if (pt_blk_get_sync_offset(dec_.get(), &s.offset) < 0) s.offset = UINT64_MAX;
    return 1;
  }
}

size_t LibiptEngine::EndSegment(int status, uint64_t unread, flow::Item* out) {
  if (status == -pte_eos) {
    state_ = State::kDone;
    return 0;
  }
  flow::Item& e = out[0];
  e = flow::Item();
  e.kind = flow::ItemKind::kError;
  e.error = status;
  e.ip = unread;
  if (!Offset(&e.offset)) e.offset = UINT64_MAX;
  uint64_t off = 0;
  if (pt_blk_get_sync_offset(dec_.get(), &off) < 0) off = 0;  // never synchronized
  last_sync_ = off;
  state_ = State::kSync;
  return 1;
}

bool LibiptEngine::BlockNext() const {
  return state_ == State::kSegment && (status_ & (pts_event_pending | pts_eos)) == 0;
}

bool LibiptEngine::NextIp(uint64_t* ip) {
  return at_eos_ && flow::LibiptNextIp(dec_.get(), empty_, ip);
}

void LibiptEngine::SetImage(struct pt_image* image) {
  sizes_.reset();  // CondJumpSize's sizes are the old image's
  PTSNAP_CHECK_OK(pt_blk_set_image(dec_.get(), image));
}

bool LibiptEngine::Time(uint64_t* tsc) const {
  uint32_t lost_mtc = 0, lost_cyc = 0;
  return pt_blk_time(dec_.get(), tsc, &lost_mtc, &lost_cyc) >= 0;
}

bool LibiptEngine::Offset(uint64_t* at) const { return pt_blk_get_offset(dec_.get(), at) >= 0; }

uint8_t LibiptEngine::CondJumpSize(const struct pt_block& b) {
  if (!sizes_) sizes_ = std::make_unique<SizeCache>();
  const size_t slot = (b.end_ip ^ (b.end_ip >> 12)) % SizeCache::kSlots;
  if (sizes_->ip[slot] != b.end_ip) {
    sizes_->ip[slot] = b.end_ip;
    sizes_->len[slot] = BlockEndSize(iscache_, b);
  }
  return sizes_->len[slot];
}

}  // namespace ptsnap::decode
