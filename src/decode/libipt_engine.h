// libipt's block decoder as an engine of the stream decoder (#40's decision
// 3: ptsnap's vocabulary, libipt as one engine): it yields the flow
// decoder's Items (flow_decoder.h), so the stream decoder has one step loop
// over Items whichever engine decodes. The loop is ptxed's: sync forward to
// a PSB, drain events, pt_blk_next, and on an error sync forward again.
//
// One step per Decode call: the stream decoder reads libipt's time
// (pt_blk_time) and position (pt_blk_get_offset) live, between steps, as
// it did when it drove libipt itself. Not thread-safe.
#pragma once

#include <intel-pt.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "decode/libipt.h"
#include "decode/libipt_marks.h"
#include "flow/flow_decoder.h"

namespace ptsnap::decode {

class LibiptEngine {
 public:
  // `iscache`: the section cache `dec`'s images use (reading a block's
  // last instruction); `empty`: an image with no section (NextIp).
  LibiptEngine(UniqueBlockDecoder dec, struct pt_image_section_cache* iscache,
               struct pt_image* empty);
  LibiptEngine(const LibiptEngine&) = delete;
  LibiptEngine& operator=(const LibiptEngine&) = delete;

  // The items of one step into `out` (room for 2: a block and the error
  // that ended it); 0 at the end of the stream. Syncs carry their offset,
  // errors the offset where decoding stopped (UINT64_MAX where libipt has
  // none) and, for -pte_nomap at a block's start, the address not mapped.
  // Blocks carry their class (read from the code where libipt's cache left
  // it unset), the size of a last conditional branch, and the emulated
  // PTWRITE's signature jump and mark (LibiptMarks).
  size_t Decode(flow::Item* out);
  // The next step decodes a block (between blocks the caller may change
  // the image).
  [[nodiscard]] bool BlockNext() const;
  // After the stream ended at pts_eos following a block: where its last
  // branch went (flow::LibiptNextIp). False otherwise.
  bool NextIp(uint64_t* ip);
  void SetImage(struct pt_image* image);
  // libipt's time and position now (pt_blk_time, pt_blk_get_offset).
  bool Time(uint64_t* tsc) const;
  bool Offset(uint64_t* at) const;

 private:
  enum class State : uint8_t { kSync, kSegment, kDone };
  size_t EndSegment(int status, uint64_t unread, flow::Item* out);
  // libipt's blocks carry no instruction size: read and decoded once per
  // address and image (decoding each conditional branch again made
  // `--decoder libipt` a third slower).
  uint8_t CondJumpSize(const struct pt_block& b);

  UniqueBlockDecoder dec_;
  struct pt_image_section_cache* iscache_;
  struct pt_image* empty_;
  LibiptMarks marks_;
  State state_ = State::kSync;
  int status_ = 0;
  uint64_t last_sync_ = ~uint64_t{0};
  bool at_eos_ = false;  // the stream ended where pt_blk_next reported pts_eos
  struct SizeCache {
    static constexpr size_t kSlots = 4096;
    SizeCache() { ip.fill(UINT64_MAX); }
    std::array<uint64_t, kSlots> ip;
    std::array<uint8_t, kSlots> len{};
  };
  std::unique_ptr<SizeCache> sizes_;  // made at the first conditional branch
};

}  // namespace ptsnap::decode
