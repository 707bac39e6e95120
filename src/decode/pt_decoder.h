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

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "decode/address_spaces.h"
#include "decode/branch_event.h"
#include "decode/image_view.h"
#include "decode/kernel_image.h"
#include "decode/libipt.h"
#include "decode/schedule.h"
#include "decode/stats.h"
#include "decode/symbols.h"
#include "flow/flow_decoder.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::trace {
class StreamBytes;
}

namespace ptsnap::decode {

// Decodes the streams of one trace. Holds the libipt section cache shared by
// every image, the kernel's image (kernel_image.h), the address spaces and
// their images (address_spaces.h), the per-CPU schedule (schedule.h) and
// the Symbolizer; it runs each stream's state machine over them and merges
// per-CPU streams by time. Not thread-safe.
class PtDecoder {
 public:
  // `dir` is the trace directory (for binaries/, vdso/, kcore/, jit/); `records`
  // the sideband in time order. Builds images and symbol mappings; never
  // fails (missing files are counted in stats() and reported as warnings).
  // `debug_dirs` are searched for separate debug files (by build-id and
  // .gnu_debuglink) before /usr/lib/debug (Symbolizer::SetDebugDirs).
  static Result<std::unique_ptr<PtDecoder>> Create(
      const std::filesystem::path& dir, const trace::Manifest& manifest,
      const std::vector<trace::Record>& records,
      std::vector<std::filesystem::path> debug_dirs = {});
  ~PtDecoder();
  PtDecoder(const PtDecoder&) = delete;
  PtDecoder& operator=(const PtDecoder&) = delete;

  // Which decoder turns PT into blocks: ptsnap's own (src/flow, the
  // default) or libipt's block decoder. Both yield the same events; a
  // stream ours stops in (a packet or case it does not decode) is decoded
  // again with libipt, counted in stats().flow_fallbacks.
  enum class Engine : uint8_t { kOurs, kLibipt };
  void set_engine(Engine e) { use_flow_ = e == Engine::kOurs; }

  // Decodes `bytes` (one stream, thread `pid`/`tid`) and gives `sink` its
  // events in order, in batches. Returns an error only for configuration
  // failures (e.g. libipt refuses the config); trace errors become kError
  // events, and decoding resumes at the next PSB after each (the bytes
  // skipped are in stats().skipped, under `stream`, the manifest's id).
  // `missing`: bytes of the stream that are gone after `bytes` (a file cut
  // short): the stream ends in a kError event (kErrStreamCut) where they
  // would have begun, so that the frames open there are cut, not ended.
  // `source`: where `bytes` are mapped from, whose pages the decode drops
  // behind it (trace::StreamBytes::DropBefore), so that its memory stays
  // flat in the stream's length; null: none are dropped.
  Result<void> DecodeStream(int32_t pid, int32_t tid, std::string_view bytes, EventSink& sink,
                            uint32_t stream = 0, uint64_t missing = 0,
                            const trace::StreamBytes* source = nullptr);
  // The same with a callback per event (tests, tools: a std::function call
  // per event; the pipeline uses an EventSink).
  using Sink = std::function<void(const BranchEvent&)>;
  Result<void> DecodeStream(int32_t pid, std::string_view bytes, const Sink& sink) {
    return DecodeStream(pid, pid, bytes, sink);
  }
  Result<void> DecodeStream(int32_t pid, int32_t tid, std::string_view bytes, const Sink& sink) {
    auto s = EventSinkOf([&sink](const BranchEvent& e) { sink(e); });
    return DecodeStream(pid, tid, bytes, s);
  }

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
    uint32_t stream = 0;                         // the manifest's id, for stats().skipped
    uint64_t missing = 0;                        // as DecodeStream's
    const trace::StreamBytes* source = nullptr;  // as DecodeStream's
  };
  Result<void> DecodeCpuStreams(const std::vector<CpuStream>& streams, EventSink& sink);
  Result<void> DecodeCpuStreams(const std::vector<CpuStream>& streams, const Sink& sink) {
    auto s = EventSinkOf([&sink](const BranchEvent& e) { sink(e); });
    return DecodeCpuStreams(streams, s);
  }

  // Who ran on `cpu` at perf time `time`, from PERF_RECORD_SWITCH_CPU_WIDE
  // and ITRACE_START records: {pid, tid}, or {0, -1 - cpu} when unknown or
  // idle (the CPU's own track).
  using ThreadId = decode::ThreadId;
  [[nodiscard]] ThreadId ThreadAt(int32_t cpu, uint64_t time) const {
    return schedule_.ThreadAt(cpu, time);
  }
  // Every thread ThreadAt can return for `cpu` (the CPU's own track first).
  [[nodiscard]] std::vector<ThreadId> CpuThreads(int32_t cpu) const {
    return schedule_.CpuThreads(cpu);
  }

  // Address spaces in time order (docs/decoding.md, "Images"): the space
  // `pid` had at `time`, and the time its next one starts (UINT64_MAX:
  // none). LastSpace: the one at the end of the recording.
  [[nodiscard]] int32_t SpaceAt(int32_t pid, uint64_t time) const {
    return spaces_.SpaceAt(pid, time);
  }
  [[nodiscard]] uint64_t NextSpaceChange(int32_t pid, uint64_t time) const {
    return spaces_.NextSpaceChange(pid, time);
  }
  [[nodiscard]] int32_t LastSpace(int32_t pid) const { return spaces_.LastSpace(pid); }
  // Whether `space` began with an exec (a new program, not a copy).
  [[nodiscard]] bool SpaceIsExec(int32_t space) const { return spaces_.IsExec(space); }

  // The file mappings of code in `space` (address_spaces.h).
  [[nodiscard]] std::vector<CodeMapping> CodeMappings(int32_t space) const {
    return spaces_.CodeMappings(space);
  }

  [[nodiscard]] Symbolizer& symbolizer() { return symbolizer_; }
  [[nodiscard]] const DecodeStats& stats() const { return stats_; }
  [[nodiscard]] DecodeStats& mutable_stats() { return stats_; }
  [[nodiscard]] uint64_t TscToNs(uint64_t tsc) const;
  // Whether the trace has CYC packets (manifest pt.cyc): then libipt's time
  // at an event packet is that packet's own (docs/decoding.md, "Timestamps").
  [[nodiscard]] bool cycle_accurate() const { return manifest_.pt.cyc; }
  // A real CPU's clock: its CBR packets are frequencies (an emulated
  // stream's CBR is a constant libipt's timing needs, no frequency).
  [[nodiscard]] bool hardware_clock() const { return manifest_.source == trace::Source::kHardware; }
  // Perf-clock ns between two MTC packets (0 without MTC or CPUID.15H).
  [[nodiscard]] uint64_t MtcPeriodNs() const;
  // The section cache that holds every image's sections (LibiptMarks reads
  // code through it).
  [[nodiscard]] struct pt_image_section_cache* Iscache() const { return iscache_.get(); }

  // Kernel text changes (PERF_RECORD_TEXT_POKE) in time order. The kcore
  // copy holds the text as it was when recording started; version k of an
  // image has the first k pokes applied. Decoding switches to version k
  // once the stream's time reaches PokeTime(k - 1).
  [[nodiscard]] size_t PokeCount() const { return kernel_.PokeCount(); }
  [[nodiscard]] uint64_t PokeTime(size_t i) const { return kernel_.PokeTime(i); }
  // Address space `space`'s image with the first `k` pokes applied (k = 0:
  // the space's own image). Owned by the decoder.
  struct pt_image* PokedImage(int32_t space, size_t k) {
    return spaces_.Image(space, k);
  }

  // An image with nothing in it (no sections, no read callback), owned by
  // the decoder: over it pt_blk_next reports where it would go on without
  // reading code (StreamDecoder's trailing branch).
  [[nodiscard]] struct pt_image* EmptyImage() { return empty_image_.get(); }

  // A block decoder over `bytes` with the kernel image set.
  Result<UniqueBlockDecoder> AllocDecoder(std::string_view bytes);
  // For the flow decoder: the images' bytes, the image a stream starts
  // with, and its configuration over `bytes`.
  [[nodiscard]] const ImageViews& views() const { return views_; }
  [[nodiscard]] const struct pt_image* KernelImageForFlow() const { return kernel_.image(); }
  [[nodiscard]] flow::Config FlowConfig(std::string_view bytes) const;
  // What libipt's block caches (in iscache_'s sections) would hold after
  // the streams decoded so far: every flow decoder shares it, as libipt's
  // decoders share the iscache, so a block's first pass is libipt's.
  [[nodiscard]] flow::LibiptCacheModel* LibiptCaches() { return &libipt_caches_; }

 private:
  PtDecoder(const std::filesystem::path& dir, const trace::Manifest& m);

  std::filesystem::path dir_;
  trace::Manifest manifest_;
  // With -j 2 the model's thread uses the Symbolizer per event while the
  // decoding thread writes stats_ and the rate per batch of events: each
  // on cache lines of its own. The Symbolizer's last fields and stats_
  // shared one, which a profile showed as misses on both threads (about 2%
  // of a -j 2 decode of a CPython trace).
  alignas(64) Symbolizer symbolizer_;
  alignas(64) DecodeStats stats_;
  // Declared before every image (kernel_, spaces_) so that it outlives them.
  alignas(64) UniqueIscache iscache_;
  ImageViews views_;  // what every image holds, for the flow decoder
  flow::LibiptCacheModel libipt_caches_;
  KernelImage kernel_;
  AddressSpaces spaces_;
  UniqueImage empty_image_ = NewImage("empty");
  Schedule schedule_;
  bool use_flow_ = true;
};

}  // namespace ptsnap::decode
