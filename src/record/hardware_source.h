// HardwarePtSource: the PtSource behind `ptsnap run`/`attach` on real
// hardware. Per traced thread it opens (pt-kernel-interface.md section 0):
//   - the intel_pt event (cpu -1, the thread's tid), owning a data ring and
//     an AUX area (read-only: snapshot mode; read-write: full mode);
//   - the dummy tracking event, redirected into the PT event's ring with
//     PERF_EVENT_IOC_SET_OUTPUT so sideband keeps flowing while PT is
//     disabled for a snapshot;
//     (on a CPU its context_switch gives PERF_RECORD_SWITCH_CPU_WIDE);
//   - one execute breakpoint per armed trigger point, each with a one-page
//     ring that receives its samples (threads only: a CPU-wide breakpoint
//     would fire in every process).
// Without a PT attr (tests, and hosts without intel_pt that only want
// sideband) the tracking event owns the ring instead: everything but the
// PT bytes works, which is how the integration tests run on a VM.
#pragma once

#include <linux/perf_event.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "perf/perf_event.h"
#include "perf/ring_buffer.h"
#include "record/aux_stream.h"
#include "record/breakpoints.h"
#include "record/pt_source.h"
#include "trace/manifest.h"

namespace ptsnap::record {

// --only-in on Linux 6.13+: an entry uprobe that resumes and a return
// uprobe that pauses the AUX tracing of the intel_pt event whose group they
// join (perf::BuildAuxActionUprobeAttr; the intel_pt event opens with
// aux_start_paused).
struct AuxActionProbes {
  std::string symbol;  // for messages
  std::string path;    // the file holding it: config1 points here while they open
  uint64_t offset = 0;
  perf_event_attr resume{};  // entry probe, aux_resume (config1 0 until opened)
  perf_event_attr pause{};   // return probe, aux_pause
};

// Opens a member of a group: perf::PerfEvent::Open without mappings (tests
// pass a fake that records the calls).
using GroupMemberOpener = std::function<Result<perf::PerfEvent>(
    const perf_event_attr& attr, pid_t pid, int cpu, int group_fd, const std::string& what)>;

// Opens `probes`' resume then pause event as members of the group led by
// `leader_fd`, the intel_pt event of (pid, cpu): the kernel wants the AUX
// event as group leader and every member on the leader's task and CPU
// (perf_get_aux_event; perf_event_open's group checks), so they are opened
// right after each intel_pt event, on the same (pid, cpu): per thread
// (tid, -1), system-wide (-1, cpu). Unmapped: their hits are not read.
// `open` null: the real perf_event_open. Errors name the probe and where.
Result<std::vector<perf::PerfEvent>> OpenAuxActionProbes(const AuxActionProbes& probes,
                                                         int leader_fd, pid_t pid, int cpu,
                                                         const std::string& where,
                                                         const GroupMemberOpener& open = nullptr);

struct HardwareConfig {
  std::optional<perf_event_attr> pt_attr;  // absent: sideband only
  perf_event_attr tracking_attr{};
  size_t data_pages = 64;   // sideband ring per thread (power of two)
  size_t aux_pages = 1024;  // AUX per thread (power of two)
  bool full_execution = false;
  // Each trigger breakpoint fires once and then disables itself
  // (PERF_EVENT_IOC_REFRESH 1, as magic-trace does): a single-snapshot
  // recording pays one trap per thread, not one per call, until it ends.
  bool single_shot_triggers = false;
  // Per-thread mode: threads not traced with PT (without --multi-thread)
  // still get a sideband event, so a sibling thread's dlopen/mmap is
  // recorded and the traced thread's later code in it decodes. Off
  // system-wide, where the CPUs' events see every task already.
  bool sideband_for_untraced_threads = false;
  // Per-thread recordings that trace the kernel: perf::BuildKernelSidebandAttr's
  // CPU-wide dummy, opened by Create on each of these CPUs with a ring of
  // its own (kernel_sideband_pages data pages), drained with the rest of the
  // sideband. The tracking attr then leaves ksymbol and text_poke to it. A
  // refused open (privilege, locked memory) is logged as a warning, and the
  // tracking events get the two bits back: the traced threads' own records,
  // as without these events.
  std::optional<perf_event_attr> kernel_sideband_attr;
  std::vector<int> kernel_sideband_cpus;
  size_t kernel_sideband_pages = 16;
  // --filter in the kernel's syntax (record/addr_filter.h), set with
  // PERF_EVENT_IOC_SET_FILTER on every intel_pt event before it is enabled;
  // "" for none.
  std::string addr_filter;
  // --only-in on 6.13+: opened with every intel_pt event, in its group.
  std::optional<AuxActionProbes> only_in;
  // 6.13+, one snapshot: each trigger breakpoint joins its thread's intel_pt
  // group with aux_pause, so the ring stops at the hit itself. Not with
  // --multi-snapshot: a paused event stays paused through IOC_DISABLE and
  // IOC_ENABLE (pt_config_start skips TraceEn while hw.aux_paused) and only
  // an aux_resume event resumes it, so tracing would not go on after the
  // first snapshot.
  bool trigger_aux_pause = false;
};

// The one-line warning of a per-thread kernel-scope recording without the
// CPU-wide KSYMBOL/TEXT_POKE events (HardwareConfig): what may decode
// wrongly, and `why` they are missing. Pure.
std::string KernelSidebandWarning(const std::string& why);

// Full-execution mode: what to do with a PT event once its AUX area has been
// drained (hw-path-review.md 3c). perf re-enables after every read
// (intel_pt_read_finish; perf-intel-pt.txt: "perf tools always re-enable
// the intel_pt event after copying out data"), because the kernel can leave
// the event disabled without a TRUNCATED record reaching the reader: the
// record is lost when the data ring is full, perf_aux_output_begin disables
// without one when it finds no room at sched-in, and an ENABLE issued before
// the deferred (irq_work) disable runs is undone by it. Waiting for TRUNCATED
// could leave PT off for the rest of the run; IOC_ENABLE on an enabled event
// is a no-op. After a TRUNCATED record: DISABLE then ENABLE, so that
// pt_event_start runs again even when the kernel left the event ACTIVE but
// stopped (PERF_HES_STOPPED, where IOC_ENABLE does nothing: the 2024-2025
// pending_disable window). Nothing once Finish has stopped the events.
enum class AuxRestart { kNone, kEnable, kDisableEnable };
AuxRestart AuxRestartAfterDrain(bool truncated_seen, bool finishing);

// A snapshot's order, kept apart from the perf events so it is tested:
// every PT event disabled (IOC_DISABLE is synchronous: aux_head is final),
// every ring copied to memory, PT enabled again (`resume`), and only then
// the copies written to the trace directory, so the disk's time is not a
// gap in the trace (perf copies first too). PT is enabled again even when
// a copy or the disable failed, so a failed snapshot does not end tracing.
// Holds every ring's bytes at once (the traced threads' or CPUs' AUX sizes).
struct SnapshotSteps {
  std::function<Result<void>()> disable_all;
  std::function<std::vector<std::pair<trace::Stream, std::vector<std::byte>>>()> copy_all;
  std::function<Result<void>()> enable_all;
  std::function<Result<void>(const trace::Stream&, const std::vector<std::byte>&)> write;
};
Result<void> RunSnapshot(const SnapshotSteps& steps, bool resume);

class HardwarePtSource final : public PtSource {
 public:
  static Result<std::unique_ptr<HardwarePtSource>> Create(HardwareConfig config);

  Result<void> AddThread(pid_t pid, pid_t tid, bool trace_pt) override;
  Result<void> AddCpu(int cpu) override;
  Result<void> ArmTriggers(const std::vector<TriggerPoint>& points) override;
  Result<void> EnableSideband() override;
  Result<void> EnableAll() override;
  Result<SidebandEvents> DrainSideband(trace::TraceWriter& writer) override;
  Result<void> DrainAux(trace::TraceWriter& writer) override;
  Result<std::vector<TriggerHit>> PollTriggers() override;
  [[nodiscard]] std::vector<int> WakeFds() const override;
  Result<void> ThreadExited(pid_t tid, trace::TraceWriter& writer) override;
  // Exited threads whose rings wait for the next snapshot; beyond this the
  // oldest is closed (its last moments then miss later snapshots).
  static constexpr size_t kMaxExitedKept = 16;
  Result<void> Snapshot(trace::TraceWriter& writer, uint32_t seq, bool resume) override;
  Result<void> Finish(trace::TraceWriter& writer) override;
  uint64_t Now() const override;
  [[nodiscard]] size_t traced_threads() const override;
  [[nodiscard]] bool HasThread(pid_t tid) const override { return units_.count(Key{-1, tid}) != 0; }
  // perf clock <-> TSC from the first ring's user page (seqlock-read), or
  // nullopt before any event is added.
  [[nodiscard]] std::optional<trace::TimeConv> time_conv() const override;

  [[nodiscard]] const perf::RingStats& stats() const { return stats_; }
  [[nodiscard]] size_t traced_cpus() const;
  // CPUs whose KSYMBOL/TEXT_POKE event is open (HardwareConfig).
  [[nodiscard]] size_t kernel_sideband_cpus() const { return kernel_sideband_.size(); }

 private:
  explicit HardwarePtSource(HardwareConfig config) : config_(std::move(config)) {}

  // A traced thread (cpu -1) or CPU (pid and tid -1).
  struct Thread {
    pid_t pid = 0, tid = 0;
    int cpu = -1;
    std::unique_ptr<perf::PerfEvent> pt;         // may be null (sideband only / breakpoints only)
    std::vector<perf::PerfEvent> aux_probes;     // --only-in: members of pt's group (closed first)
    std::unique_ptr<perf::PerfEvent> tracking;   // may be null (breakpoints only)
    std::unique_ptr<perf::DataRingReader> ring;  // the ring the tracking records land in
    std::unique_ptr<perf::AuxSnapshotReader> snapshot;
    std::unique_ptr<AuxStreamer> full;
    TriggerBreakpoints breakpoints;
    bool truncated = false;  // full mode: a TRUNCATED record since the last restart
    bool exited = false;     // snapshot mode: kept for the next snapshot, then closed
  };
  using Key = std::pair<int, pid_t>;  // {cpu, tid}: {-1, tid} or {cpu, -1}
  Result<void> AddBreakpoints(Thread& t, const std::vector<TriggerPoint>& points);
  // Opens the PT and tracking events of `t` on (t.tid, t.cpu) with rings.
  Result<void> OpenEvents(Thread& t, const std::string& what);
  // A sideband event (`attr`, a dummy) with its own ring of `pages` data
  // pages, no PT.
  Result<void> OpenSidebandOnly(Thread& t, const perf_event_attr& attr, const std::string& what,
                                size_t pages);
  // Create: the per-CPU KSYMBOL/TEXT_POKE events, or the fallback.
  void OpenKernelSideband();
  // Full mode: drains t's AUX area, then restarts its PT event as
  // AuxRestartAfterDrain says.
  Result<void> DrainAndRestart(Thread& t, trace::TraceWriter& writer);

  HardwareConfig config_;
  std::map<Key, Thread> units_;
  std::vector<Thread> kernel_sideband_;  // one per CPU: ring only, no PT
  std::vector<TriggerPoint> triggers_;
  std::vector<Key> exited_;            // oldest first
  std::vector<TriggerHit> late_hits_;  // CloseUnitKeepingHits's
  perf::RingStats stats_;
  std::vector<std::byte> batch_;
  bool started_ = false;    // EnableAll ran: new threads start enabled
  bool finishing_ = false;  // Finish ran: no re-enabling after a drain
};

// The bookkeeping of one sideband record every source does: an executable
// MMAP2 of a file adds its path to `mapped_files`, FORK a new thread, EXIT
// an exited one. Malformed records are ignored.
void NoteSidebandRecord(std::span<const std::byte> record, SidebandEvents& ev);

// Reads time_zero/time_mult/time_shift under the user page's seqlock
// (tools/perf/util/tsc.c perf_read_tsc_conversion); trace::TscToPerfTime
// converts with them.
trace::TimeConv ReadTimeConv(const perf_event_mmap_page* page);

// The perf clock now: from the TSC through `tc` when the kernel publishes
// time_zero (cap_user_time_zero), else CLOCK_MONOTONIC.
uint64_t PerfClockNow(const std::optional<trace::TimeConv>& tc);

}  // namespace ptsnap::record
