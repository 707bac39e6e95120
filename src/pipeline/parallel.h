// `-j N`: decoding on its own thread, ahead of the call-stack model, and
// the file's writer on another, behind it (docs/decoding.md, "Parallel
// decode").
//
// DecodeTraceDir's stream loop reads each stream, decodes it and runs the
// model over its events, one stream (or per-CPU group) after the other.
// StreamFeed stands between that loop and the reader and decoder: with one
// job it reads and decodes on the caller's thread when asked, as before;
// with more, a thread reads and decodes every stream in the loop's order
// ahead of the loop, and hands the events over in chunks through a bounded
// queue, so the model and the writer on the caller's thread run beside the
// decoder. The decoder is the same one object, driven in the same order,
// so the events, and so the output, are exactly those of one job.
#pragma once

#include <cstddef>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "decode/pt_decoder.h"
#include "model/slice.h"
#include "output/source_lookup.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// Whether `s` belongs to the per-CPU group that starts at `first`: one
// recording's (one snapshot's) per-CPU streams decode together, merged by
// time. `first` itself is in it when it is a per-CPU stream.
[[nodiscard]] bool InCpuGroup(const trace::Stream& first, const trace::Stream& s);

// The number of jobs `-j 0` means: the cores this process may run on (1
// when unknown).
[[nodiscard]] unsigned DefaultJobs();

// What -j's threads do in one decode (docs/decoding.md, "Parallel decode"):
// from 2 jobs on, one more thread, where it was measured to gain most:
// zlib's deflate for a .gz file (from 3 on, jobs - 1 of them, in blocks),
// the writer for .json, else reading and decoding ahead of the model.
struct ThreadPlan {
  unsigned jobs = 1;             // -j, resolved (0 became DefaultJobs())
  unsigned deflate_threads = 0;  // OutputFile's; 0: deflate inline (or no .gz)
  bool writer_thread = false;    // the file's writer behind a WriterThread
  bool decode_thread = false;    // StreamFeed reads and decodes ahead
};
// `jobs` >= 1; `format`: the output's (output::kOutputFormats), "" when no
// file is written; `output`: its path (a .gz suffix compresses). Pure.
[[nodiscard]] ThreadPlan PlanThreads(unsigned jobs, const std::string& format,
                                     const std::filesystem::path& output);

class StreamFeed {
 public:
  // `streams`: every stream the loop will read, in its order (per-CPU
  // groups as InCpuGroup makes them). `reader` and `decoder` must outlive
  // the feed. `jobs` <= 1: no thread. Otherwise the thread starts at the
  // first Read(); from then until Finish() or the feed's destruction, the
  // caller may use of `decoder` only what decoding does not change: its
  // Symbolizer, SpaceIsExec(), CpuThreads(), never stats().
  StreamFeed(unsigned jobs, const trace::TraceReader& reader, decode::PtDecoder& decoder,
             std::vector<trace::Stream> streams);
  ~StreamFeed();  // stops the thread (it finishes the stream it is in, unseen)
  StreamFeed(const StreamFeed&) = delete;
  StreamFeed& operator=(const StreamFeed&) = delete;

  // The bytes of `s`, which must be the next stream in the order: as
  // TraceReader::MapStream with ShortStream::kKeepWhatIsThere, errors
  // included (a file cut short gives what it has, and missing() says how
  // much is gone). With a decoding thread the bytes stay with it and those
  // returned are empty but for missing() (pass them on to Decode* as they
  // are).
  Result<trace::StreamBytes> Read(const trace::Stream& s);
  // As PtDecoder::DecodeStream / DecodeCpuStreams, for the streams just
  // Read (a per-CPU group: those of it that were read without error). `sink`
  // is called on the caller's thread, in the decoder's order. Blocks until
  // the thread has decoded the stream or group to its end.
  Result<void> DecodeStream(int32_t pid, int32_t tid, std::string_view bytes,
                            decode::EventSink& sink, uint32_t stream, uint64_t missing,
                            const trace::StreamBytes* source = nullptr);
  Result<void> DecodeCpuStreams(const std::vector<decode::PtDecoder::CpuStream>& group,
                                decode::EventSink& sink);
  // Waits for the thread to end (after the last stream): the decoder's
  // stats() are then complete and the caller may use it freely.
  void Finish();

 private:
  class Ahead;
  const trace::TraceReader& reader_;
  decode::PtDecoder& decoder_;
  std::vector<trace::Stream> streams_;
  std::unique_ptr<Ahead> ahead_;  // null: one job
};

// The file's writer on a thread of its own, behind the model: slices are
// queued in batches through a bounded queue and handed to `to` on the
// thread, in the order they came, so the file is the one `to` writes on
// the caller's thread. A writer's source lookups (the Symbolizer's, not
// thread-safe) are made here on the caller's thread as each slice is
// queued, with `lookup`, for the slice kinds in `lookup_kinds` (bit 1 <<
// Slice::Kind: those the writer looks up); the writer must be given
// WriterLookup() instead, which answers from them.
class WriterThread : public model::SliceSink {
 public:
  WriterThread(model::SliceSink* to, output::SourceLookup lookup, unsigned lookup_kinds);
  ~WriterThread() override;  // Stop()
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  void OnProcess(int32_t pid, const std::string& name) override;
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override;
  void OnSlice(const model::Slice& s) override;
  Result<void> Finish() override;  // Stop(), then `to`'s Finish()
  // Waits until everything queued is written and ends the thread; from
  // then on calls go to `to` on the caller's thread. The caller may then
  // use `to`'s writer directly.
  void Stop();
  // The lookup for the writer behind `to`: the location looked up for the
  // slice it is writing.
  output::SourceLookup WriterLookup();

 private:
  class Thread;
  struct Op {
    enum Kind : uint8_t { kProcess, kThread, kSlice } kind = kSlice;
    model::Slice slice;  // kSlice; kProcess, kThread: pid and tid
    const decode::SourceLocation* loc = nullptr;
    const std::string* name = nullptr;  // kProcess, kThread: in names_
  };
  void Add(const Op& op);
  void Apply(const Op& op);

  model::SliceSink* to_;
  output::SourceLookup lookup_;
  unsigned lookup_kinds_;
  // Process and thread names, one per track: Op stays a few plain words.
  // Only the caller adds; the elements never move.
  std::deque<std::string> names_;
  // The slice being written's location: written by the writer's thread for
  // every slice, so on a cache line of its own (no false sharing with what
  // the caller reads per slice).
  struct alignas(64) Current {
    const decode::SourceLocation* loc = nullptr;
  } current_;
  std::unique_ptr<Thread> thread_;  // null: stopped
};

}  // namespace ptsnap::pipeline
