#pragma once
// Where the emulated CPU puts a PSB+ (docs/emulation.md, "Packets"): the
// decision the qemu plugin takes at the start of every traced block, kept
// here, free of QEMU, so tests can ask it directly. Inline: it runs once per
// executed block on the plugin's hot path.

#include <cstddef>
#include <optional>

#include "emulate/exit_class.h"

namespace ptsnap::emulate {

// Whether a decoder has walked up to the first instruction of a block once
// it has the packets so far, given how the block before it ended (nullopt:
// no block before it): the previous block ended with a branch that has a
// packet (a TNT bit or a TIP; a far transfer's TIP.PGD). After a direct call
// or jump, or a block that just ends (no packet), the decoder walks those
// instructions only after the packets that follow, so a PSB+ there would
// set its TSC before them: the exception oracle's CI failure, three frames
// 2 ns late (commit e101999; docs/testing.md, "The call-stack oracle").
constexpr bool DecoderWalkedUpTo(std::optional<ExitKind> prev) {
  if (!prev) return true;
  switch (*prev) {
    case ExitKind::kCond:
    case ExitKind::kIndirect:
    case ExitKind::kIndirectCall:
    case ExitKind::kRet:
    case ExitKind::kFar: return true;
    default: return false;
  }
}

// What a traced block starts with, as far as PSB+ goes.
enum class PsbAt : unsigned char {
  kNone,       // no PSB+ here
  kBeforePge,  // tracing turns on here: PSB+ (no FUP), then the TIP.PGE
  kInFlow,     // tracing was on: PSB+ with a FUP of the block's first instruction
};

// The state of a thread's stream at the start of a block that is traced.
struct PsbInputs {
  bool tracing = false;          // tracing was on (the previous block was traced and led here)
  bool started = false;          // the stream has its first PSB+ already
  size_t since_psb = 0;          // bytes written since the last PSB+
  size_t period = 4096;          // psb= (the PSB period in bytes)
  bool resumed = false;          // --only-in: tracing resumes here after a pause
  bool rewritten = false;        // the block's bytes replace captured code (a JIT rewrite)
  std::optional<ExitKind> prev;  // how the previous block ended (nullopt: none)
};

// Tracing turning on writes a PSB+ before its TIP.PGE at the stream's start,
// when a period is due, or at a resume. Tracing on writes one for rewritten
// code (the decoder must switch to the new bytes exactly there), or when a
// period is due and the decoder has walked up to the block
// (DecoderWalkedUpTo); otherwise a due PSB+ waits for such a block.
constexpr PsbAt PlacePsb(const PsbInputs& in) {
  const bool due = in.since_psb >= in.period;
  if (!in.tracing) return !in.started || due || in.resumed ? PsbAt::kBeforePge : PsbAt::kNone;
  return in.rewritten || (due && DecoderWalkedUpTo(in.prev)) ? PsbAt::kInFlow : PsbAt::kNone;
}

}  // namespace ptsnap::emulate
