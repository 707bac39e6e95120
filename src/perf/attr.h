// Pure builders of perf_event_attr for the events a recording opens:
//   - the Intel PT event (type and config bits from the probed PMU's sysfs
//     format, never hard-coded; pt-kernel-interface.md 1.2, 1.5),
//   - the dummy tracking event that carries sideband (mmap2, comm, task,
//     switch, ...; 1.5),
//   - the hardware execute breakpoint used as a trigger (5.2).
// No I/O: tests build a fake PMU tree and assert every field.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptsnap/result.h"
#include "sys/kernel_version.h"
#include "sys/pmu.h"

namespace ptsnap::perf {

// What the user asked for with --timer-resolution (magic-trace's presets):
//   low:    perf's default config: tsc, mtc (mtc_period 3), psb_period 3.
//   normal: low + cyc=1, cyc_thresh=1, mtc_period=0 (about 10 ns timing).
//   high:   normal + noretcomp=1 (a TIP per return: more reliable decode).
//   custom: low, with the given keys overriding it.
// Normal/high on a CPU without caps/psb_cyc fall back to low with a warning.
struct PtTiming {
  std::string preset = "normal";
  std::optional<bool> cyc, mtc, noretcomp;
  std::optional<uint32_t> cyc_thresh, mtc_period, psb_period;
};

// Parses "low", "normal", "high" or "custom:k=v,k=v" (keys cyc, cyc_thresh,
// mtc, mtc_period, noretcomp, psb_period; booleans 0/1/true/false). magic-trace's
// sexp form "(Custom (cyc true) (mtc_period 0))" is accepted too. Errors name
// the bad key or value and list the valid ones.
Result<PtTiming> ParseTiming(std::string_view text);

struct PtAttrOptions {
  bool trace_user = true;
  bool trace_kernel = false;
  bool full_execution = false;  // sets aux_watermark = aux_size / 4
  uint64_t aux_size = 0;        // bytes of the AUX area
  bool enable_on_exec = false;  // `run`: start when the child execs
  PtTiming timing;
};

// The timing bits as opened (for the manifest and the decoder).
struct PtTimingResolved {
  bool tsc = false, mtc = false, cyc = false, noretcomp = false;
  uint32_t mtc_period = 0, cyc_thresh = 0, psb_period = 0;
};

struct PtAttr {
  perf_event_attr attr{};
  PtTimingResolved timing;
  std::vector<std::string> warnings;  // e.g. the psb_cyc downgrade
};

// Errors (one line each, naming cause and fix): PMU absent or without a type;
// a requested feature missing from caps ("cyc needs caps/psb_cyc, which this
// CPU lacks"); a period value not advertised in caps ("mtc_period=5 is not
// supported; valid: 0,3,6"); a format term missing in sysfs.
Result<PtAttr> BuildPtAttr(const sys::PmuInfo& pmu, const PtAttrOptions& opts);

// About how many trace bytes lie between two PSB packets, as perf estimates
// it (intel_pt_psb_period): 256 on early hardware without
// caps/topa_multiple_entries, else 2^(psb_period + 11) for the psb_period
// config term (0 when not set). Pure. The emulated CPU writes its PSBs at
// this period.
uint64_t PsbPeriodBytes(bool topa_multiple_entries, uint32_t psb_period);

// The dummy software event whose records are routed into the PT event's
// ring with PERF_EVENT_IOC_SET_OUTPUT. trace_kernel adds ksymbol (Linux 5.1+)
// and text_poke (5.9+), each only when `kernel` is at least that version:
// perf_copy_attr() refuses an attr with a bit the kernel does not know
// (EINVAL). An unknown kernel (nullopt) gets both.
perf_event_attr BuildTrackingAttr(bool trace_kernel, bool enable_on_exec,
                                  const std::optional<sys::KernelVersion>& kernel = std::nullopt);

// A user-space execute breakpoint at `addr` that samples every hit
// (sample_period 1, wakeup_events 1) with BreakpointSample's fields.
perf_event_attr BuildBreakpointAttr(uint64_t addr);

// PERF_RECORD_SAMPLE body for BuildBreakpointAttr's sample_type
// (IP | TID | TIME | CPU, in the kernel's order).
struct BreakpointSample {
  uint64_t ip;
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu, res;
};
inline constexpr uint64_t kBreakpointSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
static_assert(sizeof(BreakpointSample) == 32, "layout must match kBreakpointSampleType");

}  // namespace ptsnap::perf
