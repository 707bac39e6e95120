#include "model/sample_spans.h"

#include <algorithm>

namespace ptsnap::model {

SampleSpanModel::SampleSpanModel(decode::Symbolizer* symbols, SliceSink* sink, uint64_t period_ns,
                                 uint64_t gap_periods)
    : symbols_(symbols),
      sink_(sink),
      period_(std::max<uint64_t>(period_ns, 1)),
      gap_(std::max<uint64_t>(period_, period_ * gap_periods)) {}

Slice SampleSpanModel::SliceOf(int32_t tid, const Thread& t, const Frame& f, uint64_t ts) const {
  Slice s;
  s.pid = t.pid;
  s.tid = tid;
  s.space = f.space;
  s.ts = ts;
  s.name = f.name;
  s.dso = f.dso;
  s.address = f.fn_start;
  return s;
}

void SampleSpanModel::EndFrames(int32_t tid, Thread& t, size_t from_level, uint64_t ts) {
  while (t.stack.size() > from_level) {
    const Frame& f = t.stack.back();
    Slice s = SliceOf(tid, t, f, std::max(ts, f.begin));
    s.kind = Slice::kEnd;
    s.begin_ts = f.begin;
    sink_->OnSlice(s);
    t.stack.pop_back();
  }
}

void SampleSpanModel::OnSample(int32_t pid, int32_t tid, int32_t space, uint64_t time,
                               std::span<const decode::StackFrame> frames) {
  auto [it, fresh] = threads_.try_emplace(tid);
  Thread& t = it->second;
  if (fresh) order_.push_back(tid);
  if (t.active) {
    if (time < t.last) {
      stats_.out_of_order++;
      return;
    }
    // Not sampled for a while (descheduled, or not traced), or a new
    // program: nothing is known to have continued.
    if (time - t.last > gap_ || space != t.space || pid != t.pid) {
      if (time - t.last > gap_) stats_.gaps++;
      EndFrames(tid, t, 0, t.last + period_);
    }
  }
  stats_.samples++;
  t.pid = pid;
  t.space = space;
  t.last = time;
  t.active = true;

  scratch_.clear();
  for (size_t i = 0; i < frames.size(); ++i) {
    const decode::StackFrame& f = frames[i];
    uint64_t lookup = f.is_return && f.address != 0 ? f.address - 1 : f.address;
    decode::Resolved r = symbols_->Resolve(space, lookup, time);
    Frame fr;
    fr.fn_start = r.start;
    // Where this frame calls the next one: its own address, a return
    // address, known for every frame but the innermost.
    fr.call_site = i + 1 < frames.size() ? f.address : 0;
    fr.name = r.name;
    fr.dso = r.dso;
    fr.space = space;
    fr.begin = time;
    scratch_.push_back(fr);
  }
  // Level i continues when it is the same function, called from the same
  // return address in level i - 1 (where both samples show one).
  size_t same = 0;
  for (; same < t.stack.size() && same < scratch_.size(); ++same) {
    if (t.stack[same].fn_start != scratch_[same].fn_start) break;
    if (same > 0) {
      uint64_t was = t.stack[same - 1].call_site, now = scratch_[same - 1].call_site;
      if (was != 0 && now != 0 && was != now) break;
    }
  }
  for (size_t i = 0; i < same; ++i) t.stack[i].call_site = scratch_[i].call_site;
  EndFrames(tid, t, same, time);
  for (size_t i = same; i < scratch_.size(); ++i) {
    t.stack.push_back(scratch_[i]);
    Slice s = SliceOf(tid, t, scratch_[i], time);
    s.kind = Slice::kBegin;
    sink_->OnSlice(s);
    stats_.spans++;
  }
}

void SampleSpanModel::MarkThread(int32_t tid, std::string_view name) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.active) return;
  const Thread& t = it->second;
  Slice s;
  s.kind = Slice::kInstant;
  s.pid = t.pid;
  s.tid = tid;
  s.space = t.space;
  s.ts = t.last;
  s.name = symbols_->Intern(name);
  sink_->OnSlice(s);
}

void SampleSpanModel::EndAll(std::string_view marker, uint64_t marker_ts) {
  const std::string* name = marker.empty() ? nullptr : symbols_->Intern(marker);
  for (int32_t tid : order_) {
    Thread& t = threads_[tid];
    if (!t.active) continue;
    uint64_t end = t.last + period_;
    EndFrames(tid, t, 0, end);
    t.active = false;
    if (name == nullptr) continue;
    Slice s;
    s.kind = Slice::kInstant;
    s.pid = t.pid;
    s.tid = tid;
    s.space = t.space;
    s.ts = std::max(marker_ts, end);
    s.name = name;
    sink_->OnSlice(s);
  }
}

}  // namespace ptsnap::model
