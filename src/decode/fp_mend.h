// Mending frame-pointer call chains (callgraph fp) where the sampled
// function had no frame of its own yet, or none any more.
//
// The kernel's frame-pointer walk (arch/x86/events/core.c,
// perf_callchain_user) stores the interrupted IP, then the return address
// at [%rbp + 8], then follows the saved %rbp at [%rbp]. That is the
// sampled function's caller only while %rbp holds the sampled function's
// frame. In a leaf that GCC compiled without a frame (it omits the leaf
// frame even with -fno-omit-frame-pointer), in a prologue before
// `push %rbp; mov %rsp,%rbp`, and in an epilogue after `pop %rbp`, %rbp
// still holds the caller's frame, so [%rbp + 8] is the *caller's caller*
// and the caller is missing from the chain. The chain's other entries are
// right, so the mend inserts one frame: the return address the CFI
// (.eh_frame, elf/eh_frame.h) locates at that instruction, CFA - 8, read
// from the small user-stack copy each fp sample carries (REGS_USER with
// %rbp, %rsp, %rip and STACK_USER: perf/attr.h). docs/decoding.md,
// "Sampled traces".
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "decode/address_spaces.h"
#include "decode/samples.h"
#include "decode/symbols.h"
#include "elf/eh_frame.h"

namespace ptsnap::decode {

// What MendFpChain did with one sample.
enum class FpMend : uint8_t {
  kRight,   // the CFA is %rbp-based at the user IP (or it is the outermost frame): nothing missing
  kMended,  // the caller was missing: inserted after the user IP
  // (FpChainMender only) kMended, and the caller keeps no frame pointer at
  // its call either (its CFA is %rsp-based there): %rbp is not its frame,
  // so the frames the kernel's walk gives beyond it are not to be trusted.
  // Code built without frame pointers (Debian's own binaries) does this at
  // nearly every sample.
  kMendedCallerHasNoFrame,
  kNoRule,   // no usable CFI at the IP: no ELF file there (JIT code, anonymous memory), no
             // FDE covers it, or the CFA is an expression or on another register
  kNoStack,  // no user %rsp/%rip in the sample, or the return address lies outside its stack copy
  kNoUser,   // the chain has no user IP (a kernel thread's sample): nothing to check
};

// Mends `frames` (CallchainFrames of `s`, innermost first) by `rule`, the
// frame rule at the sample's user IP (nullopt: none known). The user IP is
// the first frame at regs_user's IP that is not a return address; when the
// rule's CFA is %rsp + N, the return address at CFA + ra_offset in `s`'s
// stack copy is inserted after it (the last frame is dropped when that
// makes more than `max_depth`; `inserted`, when given, is set to it). Pure.
FpMend MendFpChain(const Sample& s, const std::optional<elf::FrameRule>& rule,
                   std::vector<StackFrame>* frames, size_t max_depth, uint64_t* inserted = nullptr);

// MendFpChain with the rule looked up in the .eh_frame of the file mapped at
// the sample's user IP, in the address space the sample belongs to; a
// caller it inserts is checked at its call (kMendedCallerHasNoFrame). Each
// space's mappings and each file's frame rules are read once, on first use.
// Not thread-safe.
class FpChainMender {
 public:
  // `mappings(space)` lists the code mappings of an address space (the
  // PtDecoder's CodeMappings); `symbolizer` loads the ELF files (for their
  // load segments). Both outlive this.
  using MappingsFn = std::function<std::vector<CodeMapping>(int32_t space)>;
  FpChainMender(MappingsFn mappings, Symbolizer* symbolizer);

  FpMend Mend(int32_t space, const Sample& s, std::vector<StackFrame>* frames, size_t max_depth);
  // The frame rule at `ip` in `space`; nullopt as for FpMend::kNoRule.
  std::optional<elf::FrameRule> RuleAt(int32_t space, uint64_t ip);

 private:
  MappingsFn mappings_;
  Symbolizer* symbolizer_;
  std::map<int32_t, std::vector<CodeMapping>> spaces_;     // sorted by start
  std::map<std::filesystem::path, elf::CfaTable> tables_;  // empty: unreadable
};

}  // namespace ptsnap::decode
