#include "pipeline/pt_streams.h"

#include <algorithm>
#include <tuple>

#include "output/summary.h"
#include "pipeline/snapshot_markers.h"

namespace ptsnap::pipeline {

std::vector<trace::Stream> StreamsToDecode(const trace::Manifest& m, uint32_t snapshot) {
  std::vector<trace::Stream> streams = m.streams;
  if (snapshot != 0)
    std::erase_if(streams, [&](const trace::Stream& s) { return s.snapshot != snapshot; });
  std::stable_sort(streams.begin(), streams.end(), [](const auto& a, const auto& b) {
    return std::tie(a.snapshot, a.pid, a.tid, a.cpu) < std::tie(b.snapshot, b.pid, b.tid, b.cpu);
  });
  return streams;
}

PtStreams::PtStreams(const trace::TraceReader& reader, decode::PtDecoder& decoder,
                     model::CallStackModel& model, const DecodeOptions& options,
                     DecodeReport& report)
    : reader_(reader),
      m_(reader.manifest()),
      decoder_(decoder),
      model_(model),
      options_(options),
      report_(report),
      overlap_(m_.mode == trace::Mode::kSnapshot),
      slow_(m_.snapshots) {
  for (const auto& sn : m_.snapshots) snaps_[sn.seq] = &sn;
}

Result<void> PtStreams::Decode(std::vector<trace::Stream> streams, unsigned feed_jobs) {
  streams_ = std::move(streams);
  for (const auto& s : streams_) total_bytes_ += trace::ViewedBytes(s);
  for (const auto& s : streams_) report_.wrapped = report_.wrapped || s.wrapped;
  // -j: reading and decoding on a thread of their own, ahead of the model (parallel.h).
  StreamFeed feed(feed_jobs, reader_, decoder_, streams_);
  for (size_t i = 0; i < streams_.size();) {
    const trace::Stream& s = streams_[i];
    if (s.tid < 0 && s.cpu >= 0) {
      PTSNAP_ASSIGN_OR_RETURN(i, DecodeCpuGroup(feed, i));
    } else {
      ++i;
      PTSNAP_TRY(DecodeThreadStream(feed, s));
    }
  }
  if (stitching_) model_.EndSegment();
  feed.Finish();
  CollectDamage();
  report_.overlap_events_skipped = overlap_.skipped();
  report_.snapshot_gaps = overlap_.gaps();
  // The ring could not hold the whole slow call: say so with the fix.
  for (auto& w : slow_.Warnings(m_.snapshot_size)) report_.warnings.push_back(std::move(w));
  return Ok();
}

Result<size_t> PtStreams::DecodeCpuGroup(StreamFeed& feed, size_t i) {
  const trace::Stream& s = streams_[i];
  // One recording's per-CPU streams decode together, merged by time,
  // each thread's stack continuing across CPUs (docs/decoding.md).
  std::vector<trace::StreamBytes> held;
  std::vector<decode::PtDecoder::CpuStream> group;
  size_t j = i;
  for (; j < streams_.size() && InCpuGroup(s, streams_[j]); ++j) {
    report_.streams++;
    report_.lost_bytes += streams_[j].lost_bytes;
    auto bytes = feed.Read(streams_[j]);
    if (!bytes) {
      report_.missing_streams++;
      report_.warnings.push_back(bytes.error().ToString());
      continue;
    }
    NoteCut(streams_[j], *bytes);
    held.push_back(std::move(*bytes));
    group.push_back({streams_[j].cpu, {}, streams_[j].id, held.back().missing()});
  }
  for (size_t k = 0; k < group.size(); ++k) {
    group[k].bytes = held[k].view();
    group[k].source = &held[k];
  }
  if (stitching_) model_.EndSegment();  // per-thread streams before: not stitched to these
  stitching_ = false;
  overlap_.BeginStream(stitching_);
  model_.BeginSegment(0, -1 - s.cpu);
  slow_.Watch(s.snapshot);
  PTSNAP_TRY(feed.DecodeCpuStreams(group, *this));
  for (size_t k = i; k < j; ++k) done_bytes_ += trace::ViewedBytes(streams_[k]);
  if (auto name = EndMarker(s.snapshot); !name.empty()) {
    model_.MarkerOnEveryThread(snaps_.at(s.snapshot)->time, name);
  }
  model_.EndSegment();
  EndSegment();
  return j;
}

Result<void> PtStreams::DecodeThreadStream(StreamFeed& feed, const trace::Stream& s) {
  report_.streams++;
  report_.lost_bytes += s.lost_bytes;
  const int32_t pid = s.pid >= 0 ? s.pid : 0;
  const int32_t tid = s.tid >= 0 ? s.tid : pid;
  auto bytes = feed.Read(s);
  if (stitching_) {
    model_.SwitchThread(pid, tid);
  } else {
    model_.BeginSegment(pid, tid);
    stitching_ = overlap_.active();
  }
  overlap_.BeginStream(stitching_);
  if (!bytes) {
    report_.missing_streams++;
    report_.warnings.push_back(bytes.error().ToString());
    return Ok();
  }
  NoteCut(s, *bytes);
  slow_.Watch(s.snapshot);
  PTSNAP_TRY(feed.DecodeStream(pid, tid, bytes->view(), *this, s.id, bytes->missing(), &*bytes));
  done_bytes_ += trace::ViewedBytes(s);
  // The program died of a signal: "[signal SIGSEGV]" ends the thread it
  // killed (the snapshot's tid; its main thread when unknown).
  if (auto sn = snaps_.find(s.snapshot); sn != snaps_.end()) {
    if (auto name = SignalMarker(*sn->second, pid, tid); !name.empty())
      model_.Marker(sn->second->time, name);
  }
  if (auto name = EndMarker(s.snapshot); !name.empty()) {
    model_.Marker(snaps_.at(s.snapshot)->time, name);
  }
  if (!stitching_) model_.EndSegment();
  EndSegment();
  return Ok();
}

void PtStreams::OnEvent(const decode::BranchEvent& e) {
  slow_.OnEvent(e.tid, e.time);
  if (const SnapshotOverlap::Verdict v = overlap_.OnEvent(e.pid, e.tid, e.time); v.skip) {
    return;
  } else if (v.gap) {
    if (e.tid != model_.tid() || e.pid != model_.pid()) model_.SwitchThread(e.pid, e.tid);
    model_.Gap(v.gap_from, "[not traced until " + output::FormatDuration(e.time - v.gap_from) +
                               " later: the ring wrapped between two snapshots]");
  }
  if (e.tid != model_.tid() || e.pid != model_.pid()) model_.SwitchThread(e.pid, e.tid);
  if (e.space != model_.space()) model_.SetSpace(e.space, decoder_.SpaceIsExec(e.space));
  model_.OnEvent(e);
  if (options_.progress && ++events_ - last_progress_ >= (1u << 20)) {
    last_progress_ = events_;
    options_.progress(done_bytes_, total_bytes_);
  }
}

void PtStreams::NoteCut(const trace::Stream& s, const trace::StreamBytes& b) {
  if (b.missing() == 0) return;
  cuts_.push_back({.stream = s.id,
                   .file = s.file,
                   .offset = trace::ViewedBytes(s) - b.missing(),
                   .bytes = b.missing(),
                   .cut = true});
}

void PtStreams::EndSegment() {
  overlap_.EndSegment();
  if (options_.progress) options_.progress(done_bytes_, total_bytes_);
}

std::string PtStreams::EndMarker(uint32_t snapshot) const {
  auto it = snaps_.find(snapshot);
  if (it == snaps_.end() || m_.mode != trace::Mode::kSnapshot) return "";
  const trace::Snapshot& sn = *it->second;
  const std::string_view last_mark =
      sn.reason == trace::SnapshotReason::kSlowCall
          ? model_.LastMark(sn.tid != 0 ? static_cast<int32_t>(sn.tid) : model_.tid())
          : std::string_view();
  return SnapshotEndMarker(sn, last_mark, slow_.FirstSeen(snapshot));
}

void PtStreams::CollectDamage() {
  // Each stream's damage in stream order: skipped stretches, then its cut.
  std::map<uint32_t, std::string> files;
  for (const trace::Stream& st : streams_) files[st.id] = st.file;
  for (const decode::SkippedBytes& k : decoder_.stats().skipped)
    report_.damage.push_back({.stream = k.stream,
                              .file = files[k.stream],
                              .offset = k.offset,
                              .bytes = k.size,
                              .error = k.error});
  report_.damage.insert(report_.damage.end(), cuts_.begin(), cuts_.end());
  std::stable_sort(report_.damage.begin(), report_.damage.end(),
                   [](const DecodeReport::Damage& a, const DecodeReport::Damage& b) {
                     return a.stream != b.stream ? a.stream < b.stream : a.offset < b.offset;
                   });
}

}  // namespace ptsnap::pipeline
