// The flow decoder's block cache (the block layer, block_decoder.cpp, fills it;
// the fast path, fast_path.cpp, follows its chained successors) and the model
// of libipt's block caches (which addresses libipt holds an entry for).
// Private to src/flow.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "flow/flow_decoder.h"

namespace ptsnap::flow {

// The block cache: for a start address, the straight-line run up to and
// including the first branch (libipt with end_on_call/end_on_jump ends a
// block at every branch), or up to an instruction that cannot be decoded.

struct alignas(64) BlockEntry {  // one cache line, hot fields first
  uint64_t ip = 0;               // start
  uint64_t end_ip = 0;           // last instruction
  uint64_t target = 0;           // direct branch target
  // Chained successors, filled as they are first taken.
  BlockEntry* next_taken = nullptr;  // direct target / taken jcc / last indirect target
  BlockEntry* next_fall = nullptr;   // not-taken jcc / a call's return site
  uint32_t ninsn = 0;                // instructions including the last
  int error = 0;                     // != 0: the instruction after end_ip (or at ip) fails so
  uint32_t sizes_at = 0;             // where its instructions' sizes start in State::insn_sizes
  uint8_t size = 0;                  // of the last instruction
  InsnClass iclass = InsnClass::kOther;
  bool is_direct = false;
  bool pushes = false;            // a call that pushes its return address (retcomp)
  bool start_cached = false;      // libipt has `ip` cached (stays so)
  ExecMode mode = ExecMode::k64;  // decoded for
  // Ends in the `jmp` over perf's emulated-ptwrite signature (kEptwMagic).
  bool eptw = false;
};
static_assert(sizeof(BlockEntry) == 64);

// The instruction addresses libipt's block cache holds an entry for. Its
// blocks differ on the first pass through code (pt_blk_proceed_no_event_
// fill_cache): a block then ends where it reaches an address already
// cached, after 1024 instructions, and a suppressed TIP there is an error.
class AddressSet {
 public:
  [[nodiscard]] bool Contains(uint64_t a) const {
    if (a == 0) return have_zero_;
    if (table_.empty()) return false;
    for (size_t i = Hash(a) & mask_;; i = (i + 1) & mask_) {
      if (table_[i] == a) return true;
      if (table_[i] == 0) return false;
    }
  }
  void Insert(uint64_t a) {
    if (a == 0) {
      have_zero_ = true;
      return;
    }
    if ((count_ + 1) * 2 > table_.size()) Grow();
    if (Put(a)) ++count_;
  }
  void Clear() {
    table_.clear();
    count_ = 0;
    mask_ = 0;
    have_zero_ = false;
  }

 private:
  static size_t Hash(uint64_t a) { return static_cast<size_t>((a * 0x9E3779B97F4A7C15ull) >> 32); }
  bool Put(uint64_t a) {
    for (size_t i = Hash(a) & mask_;; i = (i + 1) & mask_) {
      if (table_[i] == a) return false;
      if (table_[i] == 0) {
        table_[i] = a;
        return true;
      }
    }
  }
  void Grow() {
    std::vector<uint64_t> old = std::move(table_);
    table_.assign(old.empty() ? 8192 : old.size() * 2, 0);
    mask_ = table_.size() - 1;
    for (uint64_t a : old) {
      if (a != 0) Put(a);
    }
  }
  std::vector<uint64_t> table_;
  size_t count_ = 0, mask_ = 0;
  bool have_zero_ = false;
};

class BlockCache {
 public:
  BlockEntry* Find(uint64_t ip) const {
    if (table_.empty()) return nullptr;
    size_t i = Hash(ip) & mask_;
    for (;;) {
      BlockEntry* e = table_[i];
      if (e == nullptr) return nullptr;
      if (e->ip == ip) return e;
      i = (i + 1) & mask_;
    }
  }
  BlockEntry* Insert(const BlockEntry& be) {
    if ((count_ + 1) * 2 > table_.size()) Grow();
    store_.push_back(be);
    BlockEntry* e = &store_.back();
    Place(e);
    ++count_;
    return e;
  }
  void Clear() {
    table_.clear();
    store_.clear();
    count_ = 0;
    mask_ = 0;
  }
  [[nodiscard]] size_t size() const { return count_; }

 private:
  static size_t Hash(uint64_t ip) {
    return static_cast<size_t>((ip * 0x9E3779B97F4A7C15ull) >> 40);
  }
  void Place(BlockEntry* e) {
    size_t i = Hash(e->ip) & mask_;
    while (table_[i] != nullptr) i = (i + 1) & mask_;
    table_[i] = e;
  }
  void Grow() {
    const size_t n = table_.empty() ? 4096 : table_.size() * 2;
    table_.assign(n, nullptr);
    mask_ = n - 1;
    for (BlockEntry& e : store_) Place(&e);
  }
  std::vector<BlockEntry*> table_;
  std::deque<BlockEntry> store_;
  size_t count_ = 0;
  size_t mask_ = 0;
};

// What libipt's block caches hold: every cached instruction's key, and
// apart, those cached in a mode other than 64-bit (libipt's entries keep
// the mode they were filled in; a fill that reaches an entry of another
// mode is its -pte_internal).
struct CacheKeys {
  AddressSet all;
  // By ExecMode kUnknown, k16, k32; made at the first such key (64-bit
  // code alone never needs them).
  std::unique_ptr<std::array<AddressSet, 3>> other_mode;
  void Clear() {
    all.Clear();
    other_mode.reset();
  }
};

}  // namespace ptsnap::flow
