// Classification of a translation block's last instruction: how control
// leaves the block, and therefore which PT packets the branch produces.
// Pure (Zydis 4 decoding of bytes); unit-tested in exit_class_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace ptsnap::emulate {

enum class ExitKind : uint8_t {
  kNone,          // no branch: the block ends for another reason (page split, ...)
  kCond,          // Jcc, LOOPcc, JrCXZ: one TNT bit
  kDirect,        // JMP rel: no packet
  kDirectCall,    // CALL rel: no packet, pushes the return address
  kIndirect,      // JMP r/m, far JMP/RET, IRET: TIP
  kIndirectCall,  // CALL r/m: TIP, pushes the return address
  kRet,           // near RET: compressed (TNT) or TIP
  kFar,           // SYSCALL, SYSENTER, INT n: leaves user mode (TIP.PGD in user-only traces)
  kRep,           // REP-prefixed string instruction: may re-run at the same address
};

const char* ToString(ExitKind kind);

struct InsnExit {
  ExitKind kind = ExitKind::kNone;
  uint64_t target = 0;       // direct branches: the destination
  uint64_t fallthrough = 0;  // ip + length
  bool pushes = false;       // a call that libipt pushes on its return stack
  uint8_t length = 0;
};

// Decodes the 64-bit instruction in `bytes` at `ip`. Returns nullopt when the
// bytes do not decode, or decode to a length different from bytes.size()
// (QEMU 7.2 lists an abandoned page-crossing instruction with truncated bytes
// as a block's last; it never executes there).
std::optional<InsnExit> ClassifyInstruction(std::span<const uint8_t> bytes, uint64_t ip);

}  // namespace ptsnap::emulate
