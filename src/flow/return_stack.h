// The flow decoder's return stack: libipt's pt_retstack (64 entries, the
// oldest dropped when full), for return compression (a taken TNT bit on a
// RET returns to the newest pushed address). Each entry also keeps the
// block cache's entry for its return site, when known, so that the fast
// path (fast_path.cpp) goes on without a lookup. The block layer
// (block_decoder.cpp) pushes and pops through State::RetPush and RetPop.
// Private to src/flow.
#pragma once

#include <array>
#include <cstdint>

#include "flow/block_cache.h"

namespace ptsnap::flow {

struct ReturnStack {
  std::array<uint64_t, 65> addr{};
  std::array<BlockEntry*, 65> entry{};  // the return site's block, when known
  uint8_t top = 0, bottom = 0;

  [[nodiscard]] bool Empty() const { return top == bottom; }
  void Push(uint64_t a, BlockEntry* site) {
    addr[top] = a;
    entry[top] = site;
    top = top == 64 ? 0 : top + 1;
    if (bottom == top) bottom = bottom == 64 ? 0 : bottom + 1;
  }
  // The newest address, and in *site its block (may be null). Not Empty().
  uint64_t Pop(BlockEntry** site) {
    top = top == 0 ? 64 : top - 1;
    *site = entry[top];
    return addr[top];
  }
  void Clear() { top = bottom = 0; }
  // The block cache was cleared: the addresses stay, their blocks go.
  void ForgetBlocks() { entry.fill(nullptr); }
};

}  // namespace ptsnap::flow
