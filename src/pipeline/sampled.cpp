#include "pipeline/sampled.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "base/string_util.h"
#include "decode/fp_mend.h"
#include "decode/samples.h"
#include "decode/unwind.h"
#include "model/sample_spans.h"

namespace ptsnap::pipeline {

namespace {

// Frames per stack at most (kernel and user together).
constexpr size_t kMaxDepth = 256;
// The kernel's default sysctl perf_event_max_stack: a callchain this long
// was cut by the kernel.
constexpr size_t kKernelMaxStack = 127;

std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// The median spacing of consecutive samples of one thread, over `bytes`.
uint64_t MeasuredPeriodNs(const std::vector<std::string>& streams,
                          const decode::SampleLayout& layout) {
  std::vector<uint64_t> deltas;
  std::map<uint32_t, uint64_t> last;
  decode::Sample s;
  for (const auto& b : streams) {
    decode::SampleReader reader(AsBytes(b), layout);
    while (reader.Next(&s) && deltas.size() < 100000) {
      auto [it, fresh] = last.try_emplace(s.tid, s.time);
      if (!fresh && s.time > it->second) deltas.push_back(s.time - it->second);
      it->second = s.time;
    }
  }
  if (deltas.empty()) return 0;
  std::nth_element(deltas.begin(), deltas.begin() + static_cast<ptrdiff_t>(deltas.size() / 2),
                   deltas.end());
  return deltas[deltas.size() / 2];
}

// One decode of a sampled trace: the streams of each snapshot merged by time,
// each sample's stack built by its callgraph and handed to the span model.
class SampledDecode {
 public:
  SampledDecode(const trace::TraceReader& reader, const DecodeOptions& options,
                decode::PtDecoder& decoder, const std::map<int32_t, std::string>& comms,
                model::SliceSink& sink, DecodeReport& report)
      : reader_(reader),
        m_(reader.manifest()),
        sa_(*m_.sampling),
        options_(options),
        decoder_(decoder),
        comms_(comms),
        sink_(sink),
        report_(report),
        out_(report.sampled),
        unwinder_([&decoder](int32_t space) { return decoder.CodeMappings(space); },
                  &decoder.symbolizer()),
        mender_([&decoder](int32_t space) { return decoder.CodeMappings(space); },
                &decoder.symbolizer()) {
    layout_.sample_type = sa_.sample_type;
    layout_.regs_user = sa_.regs_user;
    dwarf_ = sa_.callgraph == "dwarf";
    lbr_ = sa_.callgraph == "lbr";
    fp_ = !dwarf_ && !lbr_;
    fp_cap_ = sa_.max_stack != 0 ? sa_.max_stack : kKernelMaxStack;
    // fp recordings since the leaf mend carry %rip, %rsp and a stack copy.
    constexpr uint64_t kIpSp = (1ull << decode::kPerfRegIp) | (1ull << decode::kPerfRegSp);
    out_.sampled = true;
    out_.callgraph = sa_.callgraph;
    out_.event = sa_.event;
    out_.fp_checked = fp_ && (sa_.sample_type & PERF_SAMPLE_REGS_USER) != 0 &&
                      (sa_.sample_type & PERF_SAMPLE_STACK_USER) != 0 &&
                      (sa_.regs_user & kIpSp) == kIpSp;
    for (const auto& sn : m_.snapshots) snaps_[sn.seq] = &sn;
  }

  void Run() {
    for (const auto& s : m_.streams) {
      if (s.kind != trace::StreamKind::kSamples) continue;
      if (options_.snapshot != 0 && s.snapshot != options_.snapshot) continue;
      streams_.push_back(s);
    }
    std::stable_sort(streams_.begin(), streams_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.snapshot, a.pid, a.tid, a.cpu) < std::tie(b.snapshot, b.pid, b.tid, b.cpu);
    });
    for (const auto& s : streams_) total_bytes_ += s.size;
    for (size_t i = 0; i < streams_.size();) i = DecodeSnapshot(i);
    if (model_) out_.gaps = model_->stats().gaps;
  }

 private:
  // The streams of streams_[i]'s snapshot, merged by time; returns the
  // index after them.
  size_t DecodeSnapshot(size_t i) {
    size_t j = i;
    std::vector<std::string> held;
    for (; j < streams_.size() && streams_[j].snapshot == streams_[i].snapshot; ++j) {
      report_.streams++;
      auto bytes = reader_.ReadStream(streams_[j]);
      if (!bytes) {
        report_.missing_streams++;
        report_.warnings.push_back(bytes.error().ToString());
        continue;
      }
      held.push_back(std::move(*bytes));
    }
    if (!model_) MakeModel(held);
    MergeByTime(held);
    EndSnapshot(streams_[i].snapshot);
    for (size_t k = i; k < j; ++k) done_bytes_ += streams_[k].size;
    if (options_.progress) options_.progress(done_bytes_, total_bytes_);
    return j;
  }

  // The span model, with the sampling period the manifest gives or, where
  // it cannot, the first snapshot's samples' spacing.
  void MakeModel(const std::vector<std::string>& held) {
    out_.period_ns = NominalPeriodNs(sa_);
    if (out_.period_ns == 0) {
      out_.period_ns = MeasuredPeriodNs(held, layout_);
      out_.period_measured = true;
      if (out_.period_ns == 0) out_.period_ns = 1'000'000;  // no two samples: 1 ms, a guess
    }
    model_ =
        std::make_unique<model::SampleSpanModel>(&decoder_.symbolizer(), &sink_, out_.period_ns);
  }

  // Merge the group's streams by time: per-CPU streams hold many threads,
  // and a thread can move between CPUs.
  void MergeByTime(const std::vector<std::string>& held) {
    struct Cursor {
      std::unique_ptr<decode::SampleReader> reader;
      decode::Sample sample;
      bool has = false;
    };
    std::vector<Cursor> cursors(held.size());
    for (size_t k = 0; k < held.size(); ++k) {
      cursors[k].reader = std::make_unique<decode::SampleReader>(AsBytes(held[k]), layout_);
      cursors[k].has = cursors[k].reader->Next(&cursors[k].sample);
    }
    for (;;) {
      Cursor* next = nullptr;
      for (Cursor& c : cursors) {
        if (c.has && (next == nullptr || c.sample.time < next->sample.time)) next = &c;
      }
      if (next == nullptr) break;
      OnSample(next->sample);
      next->has = next->reader->Next(&next->sample);
    }
    for (Cursor& c : cursors) {
      const decode::SampleStreamStats& st = c.reader->stats();
      out_.bad_records += st.bad_records;
      out_.torn_bytes += st.torn_bytes;
      if (!st.first_error.empty()) report_.warnings.push_back(st.first_error);
    }
  }

  void OnSample(const decode::Sample& s) {
    const auto pid = static_cast<int32_t>(s.pid), tid = static_cast<int32_t>(s.tid);
    // Snapshot mode: the ring is not cleared between snapshots, so a later
    // one can repeat the samples of an earlier one (as for PT): per thread,
    // the last time earlier snapshots covered.
    if (m_.mode == trace::Mode::kSnapshot) {
      if (auto c = covered_.find(tid); c != covered_.end() && s.time <= c->second) {
        report_.overlap_events_skipped++;
        return;
      }
      uint64_t& t = seen_[tid];
      t = std::max(t, s.time);
    }
    out_.samples++;
    const int32_t space = decoder_.SpaceAt(pid, s.time);
    const bool truncated = Stack(s, space);
    (truncated ? out_.truncated : out_.unwound)++;
    std::reverse(frames_.begin(), frames_.end());
    NameThread(pid, tid);
    model_->OnSample(pid, tid, space, s.time, frames_);
  }

  // The sample's stack into frames_, leaf first, by the callgraph; true
  // when it was cut short.
  bool Stack(const decode::Sample& s, int32_t space) {
    bool truncated = false;
    if (dwarf_) {
      frames_ = decode::CallchainFrames(s, /*kernel_only=*/true, kMaxDepth);
      if (s.regs_abi != PERF_SAMPLE_REGS_ABI_NONE) {
        decode::UnwindResult u = unwinder_.Unwind(space, s, kMaxDepth - frames_.size());
        truncated = u.truncated;
        frames_.insert(frames_.end(), u.frames.begin(), u.frames.end());
      } else if (frames_.empty() && s.ip != 0) {
        frames_.push_back({s.ip, false});
      }
    } else if (lbr_) {
      frames_ = decode::LbrFrames(s, kMaxDepth);
    } else {
      frames_ = decode::CallchainFrames(s, /*kernel_only=*/false, kMaxDepth);
      size_t entries = 0;
      for (uint64_t e : s.callchain) entries += e < static_cast<uint64_t>(PERF_CONTEXT_MAX);
      truncated = fp_ && entries >= std::min(fp_cap_, kMaxDepth);
      if (out_.fp_checked) Mend(s, space);
    }
    return truncated;
  }

  // Frame pointers: the caller the kernel's walk skipped, put back.
  void Mend(const decode::Sample& s, int32_t space) {
    switch (mender_.Mend(space, s, &frames_, kMaxDepth)) {
      case decode::FpMend::kMended: out_.fp_mended++; break;
      case decode::FpMend::kMendedCallerHasNoFrame:
        out_.fp_mended++;
        out_.fp_caller_no_frame++;
        break;
      case decode::FpMend::kNoRule:
      case decode::FpMend::kNoStack: out_.fp_unmendable++; break;
      case decode::FpMend::kRight:
      case decode::FpMend::kNoUser: break;
    }
  }

  // Names, given before a thread's first slice.
  void NameThread(int32_t pid, int32_t tid) {
    if (pids_named_.insert(pid).second) {
      std::string cmd = !m_.command.empty() && !m_.pids.empty() && m_.pids[0] == pid
                            ? base::Join(m_.command)
                            : (!Comm(pid).empty() ? Comm(pid)
                               : pid == 0         ? "cpus"
                                                  : "process");
      sink_.OnProcess(pid, cmd + " [pid=" + std::to_string(pid) + "]");
    }
    if (tids_named_.insert(tid).second) {
      std::string name = Comm(tid);
      sink_.OnThread(pid, tid, !name.empty() ? name : tid == 0 ? "swapper" : "thread");
    }
  }
  [[nodiscard]] std::string Comm(int32_t tid) const {
    auto it = comms_.find(tid);
    return it == comms_.end() ? "" : it->second;
  }

  // The snapshot's marker ends every thread's frames; what it saw is covered.
  void EndSnapshot(uint32_t snapshot) {
    std::string marker;
    uint64_t marker_ts = 0;
    if (auto it = snaps_.find(snapshot); it != snaps_.end() && m_.mode == trace::Mode::kSnapshot) {
      const trace::Snapshot& sn = *it->second;
      marker = "[snapshot " + std::to_string(sn.seq) + ": " +
               std::string(trace::ToString(sn.reason)) +
               (sn.detail.empty() ? "" : " " + sn.detail) + "]";
      marker_ts = sn.time;
      // The program died of a signal: its thread's last sample is where.
      if (sn.reason == trace::SnapshotReason::kFatalSignal && sn.tid != 0)
        model_->MarkThread(static_cast<int32_t>(sn.tid), "[signal " + sn.detail + "]");
    }
    model_->EndAll(marker, marker_ts);
    for (const auto& [tid, t] : seen_) covered_[tid] = std::max(covered_[tid], t);
    seen_.clear();
  }

  const trace::TraceReader& reader_;
  const trace::Manifest& m_;
  const trace::Sampling& sa_;
  const DecodeOptions& options_;
  decode::PtDecoder& decoder_;
  const std::map<int32_t, std::string>& comms_;
  model::SliceSink& sink_;
  DecodeReport& report_;
  DecodeReport::Sampled& out_;
  decode::SampleLayout layout_;
  bool dwarf_ = false, lbr_ = false, fp_ = false;
  size_t fp_cap_ = 0;
  std::vector<trace::Stream> streams_;
  std::map<uint32_t, const trace::Snapshot*> snaps_;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  std::set<int32_t> pids_named_, tids_named_;
  std::unique_ptr<model::SampleSpanModel> model_;
  decode::UserUnwinder unwinder_;
  decode::FpChainMender mender_;
  std::map<int32_t, uint64_t> covered_, seen_;
  std::vector<decode::StackFrame> frames_;
};

}  // namespace

uint64_t NominalPeriodNs(const trace::Sampling& sa) {
  bool clock = sa.event == "cpu-clock" || sa.event == "task-clock" ||
               (sa.type == PERF_TYPE_SOFTWARE &&
                (sa.config == PERF_COUNT_SW_CPU_CLOCK || sa.config == PERF_COUNT_SW_TASK_CLOCK));
  if (sa.frequency != 0) return 1'000'000'000 / sa.frequency;
  if (clock) return sa.period;
  return 0;
}

Result<void> DecodeSampledStreams(const trace::TraceReader& reader, const DecodeOptions& options,
                                  decode::PtDecoder& decoder,
                                  const std::map<int32_t, std::string>& comms,
                                  model::SliceSink& sink, DecodeReport& report) {
  const trace::Manifest& m = reader.manifest();
  if (!m.sampling) return Error("the manifest of a sampled trace has no 'sampling' object");
  const trace::Sampling& sa = *m.sampling;
  if ((sa.sample_type & PERF_SAMPLE_TIME) == 0 || (sa.sample_type & PERF_SAMPLE_TID) == 0) {
    return Error("the samples have no TIME or TID (sampling.sample_type " +
                 base::Hex(sa.sample_type) + "): they cannot be placed on threads' timelines");
  }
  SampledDecode(reader, options, decoder, comms, sink, report).Run();
  return Ok();
}

}  // namespace ptsnap::pipeline
