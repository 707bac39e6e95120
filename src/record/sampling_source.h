// SamplingSource: the PtSource of `--sampling` (docs/recording.md,
// "Sampling mode"): stack samples through perf_event_open where there is no
// Intel PT. Per traced thread (cpu -1), or per CPU (pid -1) with -a, it
// opens ONE event (perf::BuildSamplingAttr: cycles or cpu-clock, with the
// sideband bits) owning one data ring, so samples and sideband arrive in
// order in the same ring; plus the trigger breakpoints (TriggerBreakpoints)
// as HardwarePtSource has them.
//
// Draining a ring (DrainSideband) splits it: PERF_RECORD_SAMPLE records go
// to the unit's samples, everything else to the writer's sideband.
//   - snapshot mode: each unit keeps its most recent samples in a SampleRing
//     of the snapshot size; Snapshot() drains, then writes each non-empty
//     ring as a samples/<id>.data stream tagged with the snapshot's seq.
//   - full mode (--full-execution): DrainAux appends the drained samples to
//     one growing stream per unit.
// Threads that are not sampled (without --multi-thread) get a one-page
// dummy event for their sideband, as with PT.
#pragma once

#include <linux/perf_event.h>

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "record/breakpoints.h"
#include "record/pt_source.h"
#include "record/sample_ring.h"
#include "trace/manifest.h"

namespace ptsnap::record {

struct SamplingConfig {
  perf_event_attr sampling_attr{};      // perf::BuildSamplingAttr
  perf_event_attr tracking_attr{};      // untraced threads' sideband (perf::BuildTrackingAttr)
  size_t data_pages = 64;               // the sampling event's ring (power of two)
  uint64_t snapshot_bytes = 512 << 10;  // snapshot mode: samples kept per unit (see Prepare)
  bool full_execution = false;
  bool single_shot_triggers = false;  // as HardwareConfig's
  bool sideband_for_untraced_threads = false;
};

class SamplingSource final : public PtSource {
 public:
  static Result<std::unique_ptr<SamplingSource>> Create(SamplingConfig config);

  Result<void> AddThread(pid_t pid, pid_t tid, bool trace) override;
  Result<void> AddCpu(int cpu) override;
  Result<void> ArmTriggers(const std::vector<TriggerPoint>& points) override;
  Result<void> EnableSideband() override;
  Result<void> EnableAll() override;
  // Also returns what a Snapshot's own drain saw since the last call.
  Result<SidebandEvents> DrainSideband(trace::TraceWriter& writer) override;
  Result<void> DrainAux(trace::TraceWriter& writer) override;
  Result<std::vector<TriggerHit>> PollTriggers() override;
  [[nodiscard]] std::vector<int> WakeFds() const override;
  Result<void> ThreadExited(pid_t tid, trace::TraceWriter& writer) override;
  static constexpr size_t kMaxExitedKept = 16;  // as HardwarePtSource's
  // Drains every ring (its sideband into the writer), then writes each
  // unit's samples. Without `resume` the sampling events are disabled after
  // the drain, so nothing later accrues (the recording is ending).
  Result<void> Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) override;
  Result<void> Finish(trace::TraceWriter& writer) override;
  uint64_t Now() const override;
  [[nodiscard]] size_t traced_threads() const override;
  [[nodiscard]] bool HasThread(pid_t tid) const override { return units_.count(Key{-1, tid}) != 0; }
  [[nodiscard]] std::optional<trace::TimeConv> time_conv() const override;

  [[nodiscard]] const perf::RingStats& stats() const { return stats_; }

 private:
  explicit SamplingSource(SamplingConfig config) : config_(config) {}

  // A sampled thread (cpu -1), a CPU (pid and tid -1), or a thread that
  // only has sideband and breakpoints.
  struct Unit {
    pid_t pid = 0, tid = 0;
    int cpu = -1;
    std::unique_ptr<perf::PerfEvent> event;  // sampling or dummy; may be null
    std::unique_ptr<perf::DataRingReader> ring;
    bool sampled = false;
    std::unique_ptr<SampleRing> samples;  // snapshot mode
    std::vector<std::byte> pending;       // full mode: drained, not yet written
    std::optional<uint32_t> stream;       // full mode: its stream, once it has samples
    TriggerBreakpoints breakpoints;
    bool exited = false;
  };
  using Key = std::pair<int, pid_t>;  // {cpu, tid}: {-1, tid} or {cpu, -1}
  Result<void> Open(Unit& u, const perf_event_attr& attr, size_t pages, const std::string& what);
  Result<void> DrainUnit(Unit& u, SidebandEvents& ev);
  Result<void> WritePending(Unit& u, trace::TraceWriter& writer);

  SamplingConfig config_;
  std::map<Key, Unit> units_;
  std::vector<TriggerPoint> triggers_;
  std::vector<Key> exited_;            // oldest first
  std::vector<TriggerHit> late_hits_;  // CloseUnitKeepingHits's
  perf::RingStats stats_;
  std::vector<std::byte> batch_;  // sideband of the current drain
  SidebandEvents carried_;        // seen by a Snapshot's drain, for the next DrainSideband
  bool started_ = false;
};

}  // namespace ptsnap::record
