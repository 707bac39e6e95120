// Intel PT decoding with libipt's block decoder, configured from a trace
// directory's manifest, with per-process images built from the sideband.
//
// The decoder turns each stream into a sequence of control-flow events
// (BranchEvent), in order, with perf-clock timestamps that never go
// backwards within a stream: one thread's for a per-thread stream; for
// per-CPU streams, merged by time, each event tagged with the thread the
// switch sideband says ran then. Images and symbols follow each process's
// address spaces in time order (exec, mmap over code). It never stops early on bad data:
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
#include <unordered_set>
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
  // The thread the event belongs to: the stream's thread, or for per-CPU
  // streams the thread the switch sideband says ran then (pid 0, tid
  // -1 - cpu when none is known or the CPU was idle).
  int32_t pid = 0, tid = 0;
  // The address space to symbolise in: a Symbolizer key that is `pid` for
  // a process's first address space and a synthetic id (>= kFirstSpaceId)
  // for each later one (after an exec, or an mmap over mapped code).
  int32_t space = 0;
  uint64_t time = 0;          // perf clock ns (0 when the stream has no timing at all)
  uint64_t from = 0, to = 0;  // 0 when unknown / suppressed
  uint64_t insns = 0;         // instructions executed since the previous event
  std::string message;        // kError only
};

// Symbolizer keys of address spaces after a process's first.
inline constexpr int32_t kFirstSpaceId = 0x20000000;

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
  uint64_t tsx_aborts = 0;            // transactions aborted: their speculative branches dropped
  uint64_t thread_switches = 0;       // per-CPU streams: changes of the running thread applied
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
  Result<void> DecodeStream(int32_t pid, std::string_view bytes, const Sink& sink) {
    return DecodeStream(pid, pid, bytes, sink);
  }
  Result<void> DecodeStream(int32_t pid, int32_t tid, std::string_view bytes, const Sink& sink);

  // Per-CPU streams (one recording's, e.g. one snapshot's): decoded side by
  // side and merged by time, so `sink` sees every thread's events in time
  // order even when a thread moves between CPUs. Each stretch of a CPU's
  // trace is attributed to the thread the switch sideband says was running
  // (ThreadAt), checked wherever tracing (re)starts: at a PSB sync, a
  // TIP.PGE, an overflow's end and a CR3 change (PIP); the image follows
  // the thread's process.
  struct CpuStream {
    int32_t cpu = 0;
    std::string_view bytes;
  };
  Result<void> DecodeCpuStreams(const std::vector<CpuStream>& streams, const Sink& sink);

  // Who ran on `cpu` at perf time `time`, from PERF_RECORD_SWITCH_CPU_WIDE
  // and ITRACE_START records: {pid, tid}, or {0, -1 - cpu} when unknown or
  // idle (the CPU's own track).
  struct ThreadId {
    int32_t pid = 0, tid = 0;
    friend bool operator==(const ThreadId&, const ThreadId&) = default;
  };
  [[nodiscard]] ThreadId ThreadAt(int32_t cpu, uint64_t time) const;
  // Every thread ThreadAt can return for `cpu` (the CPU's own track first).
  [[nodiscard]] std::vector<ThreadId> CpuThreads(int32_t cpu) const;

  // Address spaces in time order (docs/decoding.md, "Images"): the space
  // `pid` had at `time`, and the time its next one starts (UINT64_MAX:
  // none). LastSpace: the one at the end of the recording.
  [[nodiscard]] int32_t SpaceAt(int32_t pid, uint64_t time) const;
  [[nodiscard]] uint64_t NextSpaceChange(int32_t pid, uint64_t time) const;
  [[nodiscard]] int32_t LastSpace(int32_t pid) const;
  // Whether `space` began with an exec (a new program, not a copy).
  [[nodiscard]] bool SpaceIsExec(int32_t space) const { return exec_spaces_.count(space) != 0; }

  [[nodiscard]] Symbolizer& symbolizer() { return symbolizer_; }
  [[nodiscard]] const DecodeStats& stats() const { return stats_; }
  [[nodiscard]] DecodeStats& mutable_stats() { return stats_; }
  [[nodiscard]] uint64_t TscToNs(uint64_t tsc) const;
  // Whether the trace has CYC packets (manifest pt.cyc): then libipt's time
  // at an event packet is that packet's own (docs/decoding.md, "Timestamps").
  [[nodiscard]] bool cycle_accurate() const { return manifest_.pt.cyc; }
  // Perf-clock ns between two MTC packets (0 without MTC or CPUID.15H).
  [[nodiscard]] uint64_t MtcPeriodNs() const;
  // The perf-clock ns per instruction measured so far between time anchors
  // with no gap in the trace (0 while unknown), over every stream of this
  // decoder: it places events where tracing stops without a timing packet.
  void AddRate(uint64_t ns, uint64_t insns) {
    rate_ns_ += ns;
    rate_insns_ += insns;
  }
  [[nodiscard]] double Rate() const {
    return rate_insns_ == 0 ? 0.0
                            : static_cast<double>(rate_ns_) / static_cast<double>(rate_insns_);
  }
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
  // Address space `space`'s image with the first `k` pokes applied (k = 0:
  // Image(space)). Owned by the decoder.
  struct pt_image* PokedImage(int32_t space, size_t k);

 private:
  PtDecoder(const std::filesystem::path& dir, const trace::Manifest& m);
  void AddMmap(int32_t pid, uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff,
               const std::string& filename, const std::string& build_id);
  void AddSwitch(const trace::Record& rec);
  // The space `pid` is in now (while walking the sideband), created on
  // first use with id `pid`.
  int32_t CurrentSpace(int32_t pid);
  // Starts a new address space for `pid` at `time`: a copy of the current
  // one (an mmap replaced mapped code) or an empty one (exec).
  int32_t NewSpace(int32_t pid, uint64_t time, bool copy);
  void AddKcore();
  void AddTextPoke(uint64_t time, const trace::TextPoke& poke);
  struct pt_image* Image(int32_t space);
  // A block decoder over `bytes` (freed by its StreamDecoder).
  Result<struct pt_block_decoder*> AllocDecoder(std::string_view bytes);
  MappedFile Resolve(int32_t pid, const std::string& filename, const std::string& build_id);

  std::filesystem::path dir_;
  trace::Manifest manifest_;
  struct pt_image_section_cache* iscache_ = nullptr;
  struct pt_image* kernel_image_ = nullptr;  // kcore sections, copied into each process image
  std::unordered_map<int32_t, struct pt_image*> images_;  // by space
  // Each process's address spaces in time order: {start time, space}.
  struct Epoch {
    uint64_t start = 0;
    int32_t space = 0;
  };
  std::unordered_map<int32_t, std::vector<Epoch>> epochs_;
  // The file mappings with code of each space, to tell a replacement (new
  // space) from an addition: [start, end) maps `file` at offset
  // address + delta (modular).
  struct CodeMap {
    uint64_t start = 0, end = 0;
    std::string file;  // path on this machine
    uint64_t delta = 0;
  };
  std::unordered_map<int32_t, std::vector<CodeMap>> code_maps_;
  int32_t next_space_ = kFirstSpaceId;
  std::unordered_set<int32_t> exec_spaces_;
  // Per CPU: from `time` on, `thread` runs; sorted by time.
  struct Run {
    uint64_t time = 0;
    ThreadId thread;
  };
  std::unordered_map<int32_t, std::vector<Run>> schedule_;
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
  uint64_t rate_ns_ = 0, rate_insns_ = 0;
};

}  // namespace ptsnap::decode
