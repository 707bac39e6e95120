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

// The sampling period in ns: the clock event's fixed period, or the
// frequency's; 0 when the manifest cannot say (an event counting cycles).
uint64_t NominalPeriodNs(const trace::Sampling& sa) {
  bool clock = sa.event == "cpu-clock" || sa.event == "task-clock" ||
               (sa.type == PERF_TYPE_SOFTWARE &&
                (sa.config == PERF_COUNT_SW_CPU_CLOCK || sa.config == PERF_COUNT_SW_TASK_CLOCK));
  if (sa.frequency != 0) return 1'000'000'000 / sa.frequency;
  if (clock) return sa.period;
  return 0;
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

}  // namespace

Result<void> DecodeSampledStreams(const trace::TraceReader& reader, const DecodeOptions& options,
                                  decode::PtDecoder& decoder,
                                  const std::map<int32_t, std::string>& comms,
                                  model::SliceSink& sink, DecodeReport& report) {
  const trace::Manifest& m = reader.manifest();
  if (!m.sampling) return Error("the manifest of a sampled trace has no 'sampling' object");
  const trace::Sampling& sa = *m.sampling;
  DecodeReport::Sampled& out = report.sampled;
  out.sampled = true;
  out.callgraph = sa.callgraph;
  out.event = sa.event;
  decode::SampleLayout layout;
  layout.sample_type = sa.sample_type;
  layout.regs_user = sa.regs_user;
  if ((sa.sample_type & PERF_SAMPLE_TIME) == 0 || (sa.sample_type & PERF_SAMPLE_TID) == 0) {
    return Error("the samples have no TIME or TID (sampling.sample_type " +
                 base::Hex(sa.sample_type) + "): they cannot be placed on threads' timelines");
  }
  const bool dwarf = sa.callgraph == "dwarf";
  const bool lbr = sa.callgraph == "lbr";
  const bool fp = !dwarf && !lbr;
  const size_t fp_cap = sa.max_stack != 0 ? sa.max_stack : kKernelMaxStack;
  // fp recordings since the leaf mend carry %rip, %rsp and a stack copy.
  constexpr uint64_t kIpSp = (1ull << decode::kPerfRegIp) | (1ull << decode::kPerfRegSp);
  out.fp_checked = fp && (sa.sample_type & PERF_SAMPLE_REGS_USER) != 0 &&
                   (sa.sample_type & PERF_SAMPLE_STACK_USER) != 0 &&
                   (sa.regs_user & kIpSp) == kIpSp;

  std::vector<trace::Stream> streams;
  for (const auto& s : m.streams) {
    if (s.kind != trace::StreamKind::kSamples) continue;
    if (options.snapshot != 0 && s.snapshot != options.snapshot) continue;
    streams.push_back(s);
  }
  std::stable_sort(streams.begin(), streams.end(), [](const auto& a, const auto& b) {
    return std::tie(a.snapshot, a.pid, a.tid, a.cpu) < std::tie(b.snapshot, b.pid, b.tid, b.cpu);
  });
  uint64_t total_bytes = 0, done_bytes = 0;
  for (const auto& s : streams) total_bytes += s.size;

  // Names, given before a thread's first slice.
  std::set<int32_t> pids_named, tids_named;
  auto comm = [&](int32_t tid) -> std::string {
    auto it = comms.find(tid);
    return it == comms.end() ? "" : it->second;
  };
  auto name_thread = [&](int32_t pid, int32_t tid) {
    if (pids_named.insert(pid).second) {
      std::string cmd = !m.command.empty() && !m.pids.empty() && m.pids[0] == pid
                            ? base::Join(m.command)
                            : (!comm(pid).empty() ? comm(pid)
                               : pid == 0         ? "cpus"
                                                  : "process");
      sink.OnProcess(pid, cmd + " [pid=" + std::to_string(pid) + "]");
    }
    if (tids_named.insert(tid).second) {
      std::string name = comm(tid);
      sink.OnThread(pid, tid, !name.empty() ? name : tid == 0 ? "swapper" : "thread");
    }
  };

  std::map<uint32_t, const trace::Snapshot*> snaps;
  for (const auto& sn : m.snapshots) snaps[sn.seq] = &sn;

  // The streams' bytes, one snapshot at a time.
  std::unique_ptr<model::SampleSpanModel> model;
  decode::UserUnwinder unwinder([&decoder](int32_t space) { return decoder.CodeMappings(space); },
                                &decoder.symbolizer());
  decode::FpChainMender mender([&decoder](int32_t space) { return decoder.CodeMappings(space); },
                               &decoder.symbolizer());
  // Snapshot mode: the ring is not cleared between snapshots, so a later
  // one can repeat the samples of an earlier one (as for PT): per thread,
  // the last time earlier snapshots covered.
  std::map<int32_t, uint64_t> covered, seen;
  const bool skip_overlap = m.mode == trace::Mode::kSnapshot;
  std::vector<decode::StackFrame> frames, kernel;
  for (size_t i = 0; i < streams.size();) {
    size_t j = i;
    std::vector<std::string> held;
    for (; j < streams.size() && streams[j].snapshot == streams[i].snapshot; ++j) {
      report.streams++;
      auto bytes = reader.ReadStream(streams[j]);
      if (!bytes) {
        report.missing_streams++;
        report.warnings.push_back(bytes.error().ToString());
        continue;
      }
      held.push_back(std::move(*bytes));
    }
    if (!model) {
      out.period_ns = NominalPeriodNs(sa);
      if (out.period_ns == 0) {
        out.period_ns = MeasuredPeriodNs(held, layout);
        out.period_measured = true;
        if (out.period_ns == 0) out.period_ns = 1'000'000;  // no two samples: 1 ms, a guess
      }
      model = std::make_unique<model::SampleSpanModel>(&decoder.symbolizer(), &sink, out.period_ns);
    }
    // Merge the group's streams by time: per-CPU streams hold many threads,
    // and a thread can move between CPUs.
    struct Cursor {
      std::unique_ptr<decode::SampleReader> reader;
      decode::Sample sample;
      bool has = false;
    };
    std::vector<Cursor> cursors(held.size());
    for (size_t k = 0; k < held.size(); ++k) {
      cursors[k].reader = std::make_unique<decode::SampleReader>(AsBytes(held[k]), layout);
      cursors[k].has = cursors[k].reader->Next(&cursors[k].sample);
    }
    for (;;) {
      Cursor* next = nullptr;
      for (Cursor& c : cursors) {
        if (c.has && (next == nullptr || c.sample.time < next->sample.time)) next = &c;
      }
      if (next == nullptr) break;
      const decode::Sample& s = next->sample;
      const auto pid = static_cast<int32_t>(s.pid), tid = static_cast<int32_t>(s.tid);
      bool skip = false;
      if (skip_overlap) {
        if (auto c = covered.find(tid); c != covered.end() && s.time <= c->second) {
          report.overlap_events_skipped++;
          skip = true;
        } else {
          uint64_t& t = seen[tid];
          t = std::max(t, s.time);
        }
      }
      if (!skip) {
        out.samples++;
        int32_t space = decoder.SpaceAt(pid, s.time);
        bool truncated = false;
        if (dwarf) {
          frames = decode::CallchainFrames(s, /*kernel_only=*/true, kMaxDepth);
          if (s.regs_abi != PERF_SAMPLE_REGS_ABI_NONE) {
            decode::UnwindResult u = unwinder.Unwind(space, s, kMaxDepth - frames.size());
            truncated = u.truncated;
            frames.insert(frames.end(), u.frames.begin(), u.frames.end());
          } else if (frames.empty() && s.ip != 0) {
            frames.push_back({s.ip, false});
          }
        } else if (lbr) {
          frames = decode::LbrFrames(s, kMaxDepth);
        } else {
          frames = decode::CallchainFrames(s, /*kernel_only=*/false, kMaxDepth);
          size_t entries = 0;
          for (uint64_t e : s.callchain) entries += e < static_cast<uint64_t>(PERF_CONTEXT_MAX);
          truncated = fp && entries >= std::min(fp_cap, kMaxDepth);
          if (out.fp_checked) {
            switch (mender.Mend(space, s, &frames, kMaxDepth)) {
              case decode::FpMend::kMended: out.fp_mended++; break;
              case decode::FpMend::kMendedCallerHasNoFrame:
                out.fp_mended++;
                out.fp_caller_no_frame++;
                break;
              case decode::FpMend::kNoRule:
              case decode::FpMend::kNoStack: out.fp_unmendable++; break;
              case decode::FpMend::kRight:
              case decode::FpMend::kNoUser: break;
            }
          }
        }
        (truncated ? out.truncated : out.unwound)++;
        std::reverse(frames.begin(), frames.end());
        name_thread(pid, tid);
        model->OnSample(pid, tid, space, s.time, frames);
      }
      next->has = next->reader->Next(&next->sample);
    }
    for (Cursor& c : cursors) {
      const decode::SampleStreamStats& st = c.reader->stats();
      out.bad_records += st.bad_records;
      out.torn_bytes += st.torn_bytes;
      if (!st.first_error.empty()) report.warnings.push_back(st.first_error);
    }
    std::string marker;
    uint64_t marker_ts = 0;
    if (auto it = snaps.find(streams[i].snapshot);
        it != snaps.end() && m.mode == trace::Mode::kSnapshot) {
      const trace::Snapshot& sn = *it->second;
      marker = "[snapshot " + std::to_string(sn.seq) + ": " +
               std::string(trace::ToString(sn.reason)) +
               (sn.detail.empty() ? "" : " " + sn.detail) + "]";
      marker_ts = sn.time;
      // The program died of a signal: its thread's last sample is where.
      if (sn.reason == trace::SnapshotReason::kFatalSignal && sn.tid != 0)
        model->MarkThread(static_cast<int32_t>(sn.tid), "[signal " + sn.detail + "]");
    }
    model->EndAll(marker, marker_ts);
    for (const auto& [tid, t] : seen) covered[tid] = std::max(covered[tid], t);
    seen.clear();
    for (size_t k = i; k < j; ++k) done_bytes += streams[k].size;
    if (options.progress) options.progress(done_bytes, total_bytes);
    i = j;
  }
  if (model) out.gaps = model->stats().gaps;
  return Ok();
}

}  // namespace ptsnap::pipeline
