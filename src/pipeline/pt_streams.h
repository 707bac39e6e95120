// The PT half of DecodeTraceDir: each stream through the decoder into the
// call-stack model, per snapshot and CPU group, with the snapshot-overlap
// filter, the stitching of a thread's snapshots, the snapshot and signal
// markers, the slow-call check and the damage list. (Sampled traces go
// through sampled.h instead.) Internal to pipeline/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "decode/pt_decoder.h"
#include "model/call_stack.h"
#include "pipeline/parallel.h"
#include "pipeline/pipeline.h"
#include "pipeline/slow_call_check.h"
#include "pipeline/snapshot_overlap.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// The streams to decode, in decoding order: snapshot `snapshot`'s (0:
// every one), by snapshot, pid, tid and CPU (so one recording's per-CPU
// streams are adjacent: InCpuGroup). Pure.
[[nodiscard]] std::vector<trace::Stream> StreamsToDecode(const trace::Manifest& m,
                                                         uint32_t snapshot);

class PtStreams final : public decode::EventSink {
 public:
  // Everything passed must outlive the object. Fills report's streams,
  // missing_streams, lost_bytes, wrapped, overlap_events_skipped,
  // snapshot_gaps, damage and warnings (missing streams, slow calls).
  PtStreams(const trace::TraceReader& reader, decode::PtDecoder& decoder,
            model::CallStackModel& model, const DecodeOptions& options, DecodeReport& report);

  // Decodes `streams` (StreamsToDecode's) in order; `feed_jobs` > 1 reads
  // and decodes on a thread ahead of the model (StreamFeed). Errors: the
  // decoder's (a stream's trouble is counted, not an error).
  Result<void> Decode(std::vector<trace::Stream> streams, unsigned feed_jobs);

  // decode::EventSink: the decoder's events, in order.
  void OnEvents(std::span<const decode::BranchEvent> events) override {
    for (const decode::BranchEvent& e : events) OnEvent(e);
  }

 private:
  // One recording's per-CPU streams from streams_[i] on, decoded together
  // and merged by time; returns the index after the group.
  Result<size_t> DecodeCpuGroup(StreamFeed& feed, size_t i);
  // One per-thread (or per-process) stream.
  Result<void> DecodeThreadStream(StreamFeed& feed, const trace::Stream& s);
  void OnEvent(const decode::BranchEvent& e);
  // A stream file shorter than listed decodes up to its end; the rest is lost.
  void NoteCut(const trace::Stream& s, const trace::StreamBytes& b);
  // A segment of the model ended: the overlap filter's new coverage, progress.
  void EndSegment();
  // "[snapshot N: ...]" for the end of `snapshot`'s streams, "" outside
  // snapshot mode.
  [[nodiscard]] std::string EndMarker(uint32_t snapshot) const;
  // The decoder's skipped stretches and the cut files, by stream and offset.
  void CollectDamage();

  const trace::TraceReader& reader_;
  const trace::Manifest& m_;
  decode::PtDecoder& decoder_;
  model::CallStackModel& model_;
  const DecodeOptions& options_;
  DecodeReport& report_;
  std::vector<trace::Stream> streams_;
  std::map<uint32_t, const trace::Snapshot*> snaps_;
  SnapshotOverlap overlap_;
  SlowCallCheck slow_;
  // Snapshot mode stitches a thread's snapshots (per-thread streams): its
  // stack goes on from one snapshot to the next, so a frame that runs
  // through both is one slice. Where the next snapshot repeats none of
  // the last one (its ring wrapped in between), the gap is not traced:
  // the frames end at its start (CallStackModel::Gap). docs/decoding.md,
  // "Overlapping snapshots".
  bool stitching_ = false;  // one model segment holds every per-thread stream so far
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  uint64_t events_ = 0, last_progress_ = 0;
  std::vector<DecodeReport::Damage> cuts_;
};

}  // namespace ptsnap::pipeline
