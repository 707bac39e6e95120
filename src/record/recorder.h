// The recording orchestration behind `ptsnap run` and `ptsnap attach`:
// checks (PMU, privileges, options) before anything is opened or written,
// the traced program or processes, triggers and signals, snapshots, the
// kcore copy, and the trace directory (docs/trace-format.md).
//
// Blocking: Record() runs until the program exits, the trigger fires (single
// snapshot), the Control asks it to stop, or --duration elapses. It installs
// no signal handlers: whoever drives it turns signals into Control requests
// (record/control.h), and every ptrace request on the program comes from the
// thread that calls it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/root_path.h"
#include "perf/attr.h"
#include "ptsnap/result.h"
#include "record/control.h"
#include "record/hardware_source.h"
#include "record/options.h"
#include "record/processes.h"
#include "record/sampling_source.h"
#include "sys/cpuid.h"
#include "sys/kernel_version.h"
#include "sys/pmu.h"
#include "sys/privileges.h"
#include "trace/manifest.h"

namespace ptsnap::record {

// Everything decided before touching the traced program.
struct Prepared {
  HardwareConfig hw;
  trace::PtConfig pt;
  trace::Scope scope = trace::Scope::kUser;
  trace::Mode mode = trace::Mode::kSnapshot;
  uint64_t aux_bytes = 0;
  std::vector<std::string> warnings;  // printed by the caller
  sys::CpuInfo cpu;
  sys::Privileges privileges;
  // System-wide mode: the CPUs to open events on (sorted); empty: per-thread.
  std::vector<int> cpus;
  // --sampling (PrepareSampling): the SamplingSource's configuration and the
  // manifest's `sampling` object. Absent for PT; `hw` then only carries the
  // ring size (data_pages) for explanations of a refused mmap.
  std::optional<SamplingConfig> sampling;
  trace::Sampling sampling_info;
  // An emulated recording (emulate::PrepareEmulated): the manifest's
  // `emulator` line, and `source` "emulated". `cpu` and `pt` are then the
  // virtual CPU's, and `virtual_clock` says how its clock runs.
  std::string emulator;
  trace::VirtualClock virtual_clock = trace::VirtualClock::kInstructions;
};

// The explanations of what the machine refuses (no PMU, privileges, errnos
// of perf_event_open and mmap) are probe/explain.h's.

// The CPUs to trace: `requested` (from --cpu) when every one of them is
// online, else an error naming the offline ones and the online list; all of
// `online` when `requested` is empty. Pure.
Result<std::vector<int>> SelectCpus(const std::vector<int>& requested,
                                    const std::vector<int>& online);

// "0-3,7": the sysfs spelling of a sorted CPU list. Pure.
std::string FormatCpuList(const std::vector<int>& cpus);

// What PT and --sampling read and check alike: the privileges (into
// p.privileges, with p.scope), perf_event_open's rules for opts's scope
// and, with --all-cpus or --cpu, system-wide recording (they do not depend
// on the event; errors of kind kPrivilege), then the CPUs: p.cpus selected
// from the online ones system-wide (SelectCpus; "listing the CPUs to VERB
// with --all-cpus" when they cannot be read).
struct HostFacts {
  std::optional<sys::KernelVersion> kernel;  // gates CAP_PERFMON (5.8) and the tracking bits
  Result<std::vector<int>> online = std::vector<int>{};  // as read: an error is kept
};
Result<HostFacts> ReadHostFacts(const RecordOptions& opts, const base::RootPath& root,
                                const char* verb, Prepared& p);

// Checks and builds the event attributes. Nothing is opened or written.
// The default --snapshot-size is the probe's rule (probe::DefaultSnapshotBytes).
// Errors of kind kNoPmu and kPrivilege say why the machine cannot record
// (the CLI's exit codes, docs/errors.md).
// With opts.sampling it is PrepareSampling with the live probe.
Result<Prepared> Prepare(const RecordOptions& opts, const base::RootPath& root,
                         const sys::CpuidSource& cpuid);

// What PrepareSampling asks the machine live: whether an event opens on
// this process (perf_event_open of `attr` for pid 0, cpu -1, closed again).
// Tests inject answers.
using OpenProbe = std::function<bool(const perf_event_attr& attr)>;
bool LiveOpenProbe(const perf_event_attr& attr);

// --sampling: privileges as for PT (user scope at perf_event_paranoid <= 2,
// kernel <= 1, system-wide <= 0, or CAP_PERFMON/CAP_SYS_ADMIN), the event
// (cycles when `can_open` opens it, else cpu-clock), the callgraph
// (perf::ChooseCallgraph: lbr needs cycles, the pdcm flag on every CPU in
// root/proc/cpuinfo and an LBR call-stack event that opens), the frequency
// (perf::SamplingFrequency against root/proc/sys/kernel/
// perf_event_max_sample_rate), the snapshot ring (--snapshot-size, default
// DefaultSamplingSnapshotBytes) and the data ring (SamplingDataPages within the
// mlock budget). Nothing is opened but the probes.
Result<Prepared> PrepareSampling(const RecordOptions& opts, const base::RootPath& root,
                                 const sys::CpuidSource& cpuid,
                                 const OpenProbe& can_open = LiveOpenProbe);

// The default sampling ring per stream: about one second of samples at
// `frequency` (`record_bytes` each), at least magic-trace's fixed 512 KiB,
// at most 64 MiB (a dwarf sample is ~8.5 KiB: at 10 kHz the cap keeps
// ~0.75 s). Memory fills only as a thread runs. Pure.
inline constexpr uint64_t kSamplingSnapshotMinBytes = 512 << 10;
inline constexpr uint64_t kSamplingSnapshotMaxBytes = uint64_t{64} << 20;
uint64_t DefaultSamplingSnapshotBytes(uint64_t frequency, uint64_t record_bytes);

// About how many bytes one sample takes (header, the fixed fields and the
// callgraph's: a 64-frame callchain for fp, 32 LBR entries for lbr, the
// 8 KiB stack copy and registers for dwarf). Pure.
uint64_t SampleRecordBytes(perf::CallgraphMode mode);

// Data pages for one sampling ring: `frequency` samples a second of
// `record_bytes` for 25 ms (five of the loop's 5 ms drains, to ride out a
// slow disk), as a power of two from 16 to 1024 pages, and never beyond
// `budget_bytes` (the ring's share of the mlock budget, header page
// included; nullopt: unlimited). 0 when the budget cannot hold a ring of
// at least two samples. Pure.
size_t SamplingDataPages(uint64_t frequency, uint64_t record_bytes,
                         std::optional<uint64_t> budget_bytes);

struct Outcome {
  int program_status = 0;  // run: the program's exit status (shell style)
  uint32_t snapshots = 0;
  bool interrupted = false;  // Ctrl-C / SIGTERM ended it
  std::vector<std::string> warnings;
};

// Makes the PtSource a recording uses; tests pass one that returns a fake.
using SourceFactory = std::function<Result<std::unique_ptr<PtSource>>(const HardwareConfig&)>;

// Records according to `opts` into `trace_dir` (which must not hold a trace
// yet). `prepared.hw.pt_attr` may be empty to record sideband only (tests).
// With `prepared.cpus` set it records system-wide: one PT and tracking event
// per CPU, mappings of every process synthesized from /proc/*/maps, the
// program (run) or the processes of -p (attach) only hosting the trigger.
// On failure after the directory was created, the directory is finished in
// state "interrupted" (the error in its stop_error) so what was captured
// stays readable. `make_source` defaults to HardwarePtSource::Create (or
// SamplingSource's); the emulator passes its own, a self-driven source
// (pt_source.h). Errors carry their ErrorKind:
// kTraceDirExists, kProcessGone, kTrigger, kPrivilege, kBufferMapping.
// Snapshot requests from `control` are taken as they come (reason "signal");
// progress, snapshots, data loss and the target's exit go to `events`.
Result<Outcome> Record(const RecordOptions& opts, Prepared prepared,
                       const std::filesystem::path& trace_dir, const base::RootPath& root,
                       Control& control, const EventFn& events,
                       const SourceFactory& make_source = nullptr);

}  // namespace ptsnap::record
