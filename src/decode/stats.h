// The decoder's counters and warnings (DecodeStats), shown in the summary.
// Filled by every decode unit: the address spaces (missing and changed
// files), the kernel image (kcore, TEXT_POKE problems) and the streams.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptsnap::decode {

// A stretch of a stream lost to an error in the trace itself (a packet
// that is not one, one the code contradicts, times that run ahead of the
// next PSB's TSC: damaged bytes), from the PSB before the error (what was
// decoded since is dropped) to the next sync point (PSB) or the stream's
// end (docs/decoding.md, "Damaged streams").
// Errors of unmapped code (`-pte_nomap`: a binary missing or changed, the
// kernel without kcore) skip intact bytes for want of code: not damage,
// not listed here.
struct SkippedBytes {
  uint32_t stream = 0;  // the manifest's stream id (PtDecoder::DecodeStream's `stream`)
  uint64_t offset = 0;  // in the stream's bytes
  uint64_t size = 0;
  int error = 0;  // the status of the error that began it (StatusMessage)
};

// Counters shown in the summary.
struct DecodeStats {
  uint64_t pt_bytes = 0;
  uint64_t blocks = 0;
  uint64_t instructions = 0;
  uint64_t events = 0;  // BranchEvents emitted
  uint64_t errors = 0;
  uint64_t overflows = 0;
  // PT bytes no instruction came from: before a stream's first sync point
  // (PSB), or from an error to the next one (the decoder resyncs there).
  // A stream of random bytes is all undecoded, not "nothing ran".
  uint64_t undecoded_bytes = 0;
  // The part of undecoded_bytes that damage made undecodable, stretch by
  // stretch in decoding order (SkippedBytes).
  std::vector<SkippedBytes> skipped;
  uint64_t nomap_errors = 0;  // -pte_nomap: code not in any image section
  uint64_t build_id_mismatches = 0;
  uint64_t missing_files = 0;
  uint64_t tsx_aborts = 0;       // transactions aborted: their speculative branches dropped
  uint64_t thread_switches = 0;  // per-CPU streams: changes of the running thread applied
  // Streams ptsnap's flow decoder stopped in (a packet or case it does not
  // decode: PIP, VMCS, PTW, power events, ...), decoded again with libipt.
  uint64_t flow_fallbacks = 0;
  // JIT code (docs/decoding.md, "JIT code"): code loads added to address
  // spaces, their bytes, the loads that rewrote code held at their
  // addresses (each a new address space from its time), and those past the
  // limit of spaces per process (decoded as of the newest bytes).
  uint64_t jit_loads = 0, jit_bytes = 0, jit_rewrites = 0, jit_late_rewrites = 0;
  // PERF_RECORD_KSYMBOL records of BPF programs and out-of-line kernel
  // code applied (loads and unloads): they name kernel code over time.
  uint64_t kernel_symbols = 0;
  std::vector<std::string> warnings;  // one line each; shown once in the summary
};

}  // namespace ptsnap::decode
