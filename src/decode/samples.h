// Stack samples of a sampled recording (manifest source "sampled"): the
// PERF_RECORD_SAMPLE records of a `samples/<id>.data` stream
// (docs/trace-format.md), parsed by the layout `sampling.sample_type`
// selects, and the call stacks they show (docs/decoding.md, "Sampled
// traces").
//
// Parsing is pure and never trusts a size: a record whose fields do not fit
// is counted and skipped, a partial last record (a torn tail) is counted,
// and nothing is fatal (fuzzed in samples_fuzzer).
#pragma once

#include <linux/perf_event.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::decode {

// The x86-64 perf register indices (arch/x86/include/uapi/asm/perf_regs.h),
// the bit numbers of `sampling.regs_user`.
enum PerfReg : uint8_t {
  kPerfRegAx = 0,
  kPerfRegBx = 1,
  kPerfRegCx = 2,
  kPerfRegDx = 3,
  kPerfRegSi = 4,
  kPerfRegDi = 5,
  kPerfRegBp = 6,
  kPerfRegSp = 7,
  kPerfRegIp = 8,
  kPerfRegFlags = 9,
  kPerfRegCs = 10,
  kPerfRegSs = 11,
  kPerfRegDs = 12,
  kPerfRegEs = 13,
  kPerfRegFs = 14,
  kPerfRegGs = 15,
  kPerfRegR8 = 16,  // R8..R15 are 16..23
  kPerfRegR15 = 23,
  kPerfRegCount = 24,
};
// Every register x86-64 can sample in user mode: AX..SS and R8..R15. The
// kernel refuses DS, ES, FS and GS in a 64-bit sample_regs_user mask
// (arch/x86/kernel/perf_regs.c, REG_NOSUPPORT: EINVAL), as perf's
// PERF_REGS_MASK leaves them out.
inline constexpr uint64_t kPerfRegsUser =
    ((1ull << kPerfRegCount) - 1) &
    ~((1ull << kPerfRegDs) | (1ull << kPerfRegEs) | (1ull << kPerfRegFs) | (1ull << kPerfRegGs));

// What a sample record's layout depends on (perf_event_attr fields).
struct SampleLayout {
  uint64_t sample_type = 0;      // PERF_SAMPLE_*
  uint64_t regs_user = 0;        // sample_regs_user: which registers REGS_USER holds
  uint64_t read_format = 0;      // PERF_FORMAT_*, for PERF_SAMPLE_READ
  bool branch_hw_index = false;  // branch_sample_type has PERF_SAMPLE_BRANCH_HW_INDEX
};

struct BranchEntry {
  uint64_t from = 0, to = 0, flags = 0;
  friend bool operator==(const BranchEntry&, const BranchEntry&) = default;
};

// One PERF_RECORD_SAMPLE. Fields the layout does not select stay 0/empty.
// `stack` views the parsed bytes: valid as long as they are.
struct Sample {
  uint16_t misc = 0;  // PERF_RECORD_MISC_* (cpumode)
  uint64_t id = 0;    // IDENTIFIER, else ID
  uint64_t ip = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;  // perf clock ns
  uint64_t addr = 0;
  uint64_t stream_id = 0;
  uint32_t cpu = 0;
  uint64_t period = 0;
  // Innermost first, with PERF_CONTEXT_* markers as the kernel wrote them.
  std::vector<uint64_t> callchain;
  std::vector<BranchEntry> branches;  // most recent first
  // REGS_USER: PERF_SAMPLE_REGS_ABI_* (0: none, a kernel thread) and the
  // values by perf register index (PerfReg); `regs_mask` says which are set.
  uint64_t regs_abi = 0;
  uint64_t regs_mask = 0;
  std::array<uint64_t, 64> regs{};
  // STACK_USER: the bytes copied from the user stack pointer up, and how many
  // of them are valid (dyn_size <= stack.size()).
  std::span<const std::byte> stack;
  uint64_t stack_dyn_size = 0;
};

// Parses one PERF_RECORD_SAMPLE body (the bytes after perf_event_header).
// Errors name the field that did not fit.
Result<void> ParseSampleBody(std::span<const std::byte> body, const SampleLayout& layout,
                             Sample* out);

// Counters of one stream's parse.
struct SampleStreamStats {
  uint64_t samples = 0;        // samples parsed
  uint64_t other_records = 0;  // records of another type (skipped)
  uint64_t bad_records = 0;    // samples whose fields did not fit their size (skipped)
  uint64_t torn_bytes = 0;     // a partial or corrupt tail, not parsed
  std::string first_error;     // the first bad record's error, with its offset
};

// Reads the samples of one stream in order. Never fails: bad records are
// counted and skipped; a header whose size cannot be right (< 8, not a
// multiple of 8) or runs past the end stops the reader (torn tail).
class SampleReader {
 public:
  SampleReader(std::span<const std::byte> bytes, const SampleLayout& layout)
      : bytes_(bytes), layout_(layout) {}
  // The next sample into `out` (its vectors reused); false at the end.
  bool Next(Sample* out);
  [[nodiscard]] const SampleStreamStats& stats() const { return stats_; }

 private:
  std::span<const std::byte> bytes_;
  SampleLayout layout_;
  size_t offset_ = 0;
  SampleStreamStats stats_;
};

// A frame of a sample's call stack. `address` is where the frame's code was:
// the sample IP (leaf), an interrupted IP, or a return address
// (`is_return`: symbolize address - 1, the call instruction, so a call at the
// end of a function names its caller).
struct StackFrame {
  uint64_t address = 0;
  bool is_return = false;
  friend bool operator==(const StackFrame&, const StackFrame&) = default;
};

// The callchain's frames innermost first, without PERF_CONTEXT_* markers.
// The first entry after each context marker is that context's interrupted
// IP (not a return address); the others are return addresses. `ip` is the
// sample's IP: the leaf, dropped from the chain when it repeats it (the
// kernel stores it first), as perf does. With `kernel_only`, only the
// entries in PERF_CONTEXT_KERNEL. Stops after `max_depth` frames.
std::vector<StackFrame> CallchainFrames(const Sample& s, bool kernel_only, size_t max_depth);
// LBR call-stack mode: the kernel frames of the callchain, then the user IP
// and the `from` (call instruction) of each branch entry, innermost first.
std::vector<StackFrame> LbrFrames(const Sample& s, size_t max_depth);

}  // namespace ptsnap::decode
