// The plugin's memory of the code bytes it has captured from memory no file
// backs (JIT code): per process, the bytes each captured block had when it
// first ran. A block translated again (QEMU retranslates after a write to a
// page holding translated code) is compared with it: the same bytes need no
// new capture, new bytes at addresses never captured are an addition, and
// bytes that differ from captured ones are a rewrite, which the decoder
// must see at its time (trace/jit_code.h, kJitCodeReplaces).
//
// Not thread-safe: the plugin holds a lock around it. Memory: one 4.5 KiB
// page record per 4 KiB page of captured code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

namespace ptsnap::emulate {

class JitShadow {
 public:
  enum class Change : uint8_t {
    kSame,      // every byte captured before, with these values
    kNew,       // no byte differs, some were never captured
    kReplaces,  // some captured byte differs
  };
  // How `code` at `addr` compares with the captured bytes; no update.
  [[nodiscard]] Change Compare(uint64_t addr, std::span<const uint8_t> code) const;
  // Compare, then remember `code` as the bytes at `addr`.
  Change Update(uint64_t addr, std::span<const uint8_t> code);
  [[nodiscard]] size_t pages() const { return pages_.size(); }

 private:
  static constexpr uint64_t kPage = 4096;
  struct Page {
    uint8_t bytes[kPage] = {};
    uint64_t valid[kPage / 64] = {};  // bit i: bytes[i] was captured
  };
  std::unordered_map<uint64_t, std::unique_ptr<Page>> pages_;  // by page number
};

}  // namespace ptsnap::emulate
