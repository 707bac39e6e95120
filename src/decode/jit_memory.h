// JIT code bytes of one address space (docs/decoding.md, "JIT code"): what
// the emulator captured (trace/jit_code.h) or a jitdump's code loads put at
// addresses no file section covers. libipt reads them through the image's
// read-memory callback (ReadJitMemory), which it uses only where no section
// holds the address, so file-backed code keeps its cached sections.
//
// Pages are shared between copies (an address space copied for a rewrite
// shares every page it does not change): copying is cheap, and writing a
// shared page copies it first. Not thread-safe for writes; reads of a
// finished JitMemory may run concurrently.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

namespace ptsnap::decode {

class JitMemory {
 public:
  // Whether any byte of `code` at `addr` differs from a byte held there.
  [[nodiscard]] bool Conflicts(uint64_t addr, std::span<const uint8_t> code) const;
  // Holds `code` at `addr` (over whatever was there).
  void Write(uint64_t addr, std::span<const uint8_t> code);
  // Copies up to `size` held bytes from `addr` on into `out`, stopping at the
  // first byte not held. Returns the count (0: `addr` is not held).
  size_t Read(uint8_t* out, size_t size, uint64_t addr) const;
  [[nodiscard]] bool empty() const { return pages_.empty(); }
  // Whether any byte of the 4 KiB page holding `addr` is held.
  [[nodiscard]] bool HoldsPage(uint64_t addr) const { return pages_.count(addr / kPage) != 0; }
  // Bytes held (the summary's figure).
  [[nodiscard]] uint64_t bytes() const { return bytes_; }

 private:
  static constexpr uint64_t kPage = 4096;
  struct Page {
    uint8_t bytes[kPage] = {};
    uint64_t valid[kPage / 64] = {};
  };
  std::map<uint64_t, std::shared_ptr<Page>> pages_;  // by page number
  uint64_t bytes_ = 0;
};

// libipt's read_memory_callback_t over a JitMemory (`context`): the bytes at
// `ip`, or -pte_nomap.
int ReadJitMemory(uint8_t* buffer, size_t size, const struct pt_asid* asid, uint64_t ip,
                  void* context);

}  // namespace ptsnap::decode
