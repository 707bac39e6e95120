// Intel PT decoding with libipt's block decoder, configured from a trace
// directory's manifest, with per-process images built from the sideband.
//
// The decoder turns each stream into a sequence of control-flow events
// (BranchEvent) for one thread, in order, with perf-clock timestamps that
// never go backwards within a stream. It never stops early on bad data:
// libipt errors become kError events and decoding resynchronises at the next
// PSB. What the call-stack model does with the events is src/model's job.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/unique_fd.h"
#include "decode/symbols.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::decode {

enum class BranchKind : uint8_t {
  kCall,       // near call from -> to
  kReturn,     // near return from -> to
  kJump,       // jump, taken conditional, or a block boundary: from -> to
  kFarCall,    // syscall/int/far call with the destination traced (kernel traced)
  kFarReturn,  // sysret/iret/far ret to a traced destination
  kInterrupt,  // asynchronous branch (interrupt, exception, fault) from -> to
  kEnable,     // tracing (re)starts at `to` (TIP.PGE)
  kDisable,    // tracing stops after `from` (TIP.PGD); `syscall` says why
  kOverflow,   // the CPU's internal buffer overflowed: trace lost until `to`
  kError,      // decode error (`message`); decoding resumes at the next PSB
  kStop,       // TraceStop packet
};
std::string_view ToString(BranchKind k);

struct BranchEvent {
  BranchKind kind = BranchKind::kJump;
  bool syscall = false;  // kDisable: tracing stopped at a syscall instruction
  bool tsx_abort = false;
  uint64_t time = 0;          // perf clock ns (0 when the stream has no timing at all)
  uint64_t from = 0, to = 0;  // 0 when unknown / suppressed
  uint64_t insns = 0;         // instructions executed since the previous event
  std::string message;        // kError only
};

// Counters shown in the summary.
struct DecodeStats {
  uint64_t pt_bytes = 0;
  uint64_t blocks = 0;
  uint64_t instructions = 0;
  uint64_t events = 0;  // BranchEvents emitted
  uint64_t errors = 0;
  uint64_t overflows = 0;
  uint64_t nomap_errors = 0;  // -pte_nomap: code not in any image section
  uint64_t build_id_mismatches = 0;
  uint64_t missing_files = 0;
  std::vector<std::string> warnings;  // one line each; shown once in the summary
};

// Builds libipt's pt_config from the manifest (cpu + errata, cpuid 0x15,
// mtc_freq, nom_freq, ADDR0 filter). Pure; begin/end are left for the caller.
struct pt_config MakePtConfig(const trace::Manifest& m);

// The class of the x86 instruction at the start of `bytes` (decoded with
// Zydis in `mode`), as libipt names it: ptic_far_call for syscall/sysenter/
// int/far call, ptic_far_return for sysret/sysexit/iret/far ret, and so on;
// ptic_error when the bytes do not decode. Pure.
enum pt_insn_class ClassifyInstruction(const uint8_t* bytes, size_t size, enum pt_exec_mode mode);

// Which file provides a mapping's bytes, after the build-id check.
struct MappedFile {
  std::filesystem::path path;  // on this machine; empty: none usable
  std::string why_not;         // when empty path: "build-id mismatch", "missing", "anonymous"
};

// Decodes the streams of one trace. Holds the libipt section cache shared by
// all process images, the per-process images and the Symbolizer. Not
// thread-safe.
class PtDecoder {
 public:
  // `dir` is the trace directory (for binaries/, vdso/, kcore/); `records`
  // the sideband in time order. Builds images and symbol mappings; never
  // fails (missing files are counted in stats() and reported as warnings).
  static Result<std::unique_ptr<PtDecoder>> Create(const std::filesystem::path& dir,
                                                   const trace::Manifest& manifest,
                                                   const std::vector<trace::Record>& records);
  ~PtDecoder();
  PtDecoder(const PtDecoder&) = delete;
  PtDecoder& operator=(const PtDecoder&) = delete;

  using Sink = std::function<void(const BranchEvent&)>;
  // Decodes `bytes` (one stream, thread `pid`/`tid`) and calls `sink` for
  // each event in order. Returns an error only for configuration failures
  // (e.g. libipt refuses the config); trace errors become kError events.
  Result<void> DecodeStream(int32_t pid, std::string_view bytes, const Sink& sink);

  [[nodiscard]] Symbolizer& symbolizer() { return symbolizer_; }
  [[nodiscard]] const DecodeStats& stats() const { return stats_; }
  [[nodiscard]] DecodeStats& mutable_stats() { return stats_; }
  [[nodiscard]] uint64_t TscToNs(uint64_t tsc) const;
  // The class of `block`'s last instruction, read from the image section
  // that holds it. libipt leaves `block.iclass` at ptic_error for blocks it
  // serves from its block cache that end in an indirect jump or a far
  // transfer (its ptbq_indirect entries): the second `syscall` or `sysret`
  // from one site. Returns ptic_error when the bytes cannot be read.
  [[nodiscard]] enum pt_insn_class ClassifyBlockEnd(const struct pt_block& block) const;

  // Kernel text changes (PERF_RECORD_TEXT_POKE) in time order. The kcore
  // copy holds the text as it was when recording started; version k of an
  // image has the first k pokes applied. Decoding switches to version k
  // once the stream's time reaches PokeTime(k - 1).
  [[nodiscard]] size_t PokeCount() const { return pokes_.size(); }
  [[nodiscard]] uint64_t PokeTime(size_t i) const { return pokes_[i].time; }
  // `pid`'s image with the first `k` pokes applied (k = 0: Image(pid)).
  // Owned by the decoder.
  struct pt_image* PokedImage(int32_t pid, size_t k);

 private:
  PtDecoder(const std::filesystem::path& dir, const trace::Manifest& m);
  void AddMmap(int32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
               const std::string& filename, const std::string& build_id);
  void AddKcore();
  void AddTextPoke(uint64_t time, const trace::TextPoke& poke);
  struct pt_image* Image(int32_t pid);
  MappedFile Resolve(int32_t pid, const std::string& filename, const std::string& build_id);

  std::filesystem::path dir_;
  trace::Manifest manifest_;
  struct pt_image_section_cache* iscache_ = nullptr;
  struct pt_image* kernel_image_ = nullptr;  // kcore sections, copied into each process image
  std::unordered_map<int32_t, struct pt_image*> images_;
  std::unordered_map<std::string, int> isids_;  // "path@off+size@vaddr" -> isid
  struct KcoreSegment {
    uint64_t vaddr = 0, size = 0;
    int isid = 0;
  };
  std::vector<KcoreSegment> kcore_segments_;
  // One section per poke: the pages it touched, with every poke so far
  // applied, in a memfd (libipt sections are files: /proc/self/fd/N).
  struct Poke {
    uint64_t time = 0;  // perf clock ns
    int isid = 0;
  };
  std::vector<Poke> pokes_;
  std::vector<base::UniqueFd> poke_fds_;
  std::unordered_map<uint64_t, std::string> poked_pages_;  // page address -> current bytes
  std::unordered_map<int32_t, std::vector<struct pt_image*>> poked_images_;  // [k - 1]
  Symbolizer symbolizer_;
  DecodeStats stats_;
};

}  // namespace ptsnap::decode
