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
//   sample: --sampling only: `sample_freq` samples per second.
// Normal/high on a CPU without caps/psb_cyc fall back to low with a warning.
// With --sampling, low/normal/high are sampling frequencies instead
// (SamplingFrequency).
struct PtTiming {
  std::string preset = "normal";
  std::optional<bool> cyc, mtc, noretcomp;
  std::optional<uint32_t> cyc_thresh, mtc_period, psb_period;
  std::optional<uint64_t> sample_freq;  // preset "sample"
};

// Parses "low", "normal", "high", "custom:k=v,k=v" (keys cyc, cyc_thresh,
// mtc, mtc_period, noretcomp, psb_period; booleans 0/1/true/false) or
// "sample:N" (N samples per second, --sampling only). magic-trace's sexp
// forms "(Custom (cyc true) (mtc_period 0))" and "(Sample (freq 5000))" are
// accepted too. Errors name the bad key or value and list the valid ones.
Result<PtTiming> ParseTiming(std::string_view text);

struct PtAttrOptions {
  bool trace_user = true;
  bool trace_kernel = false;
  bool full_execution = false;  // sets aux_watermark = aux_size / 4
  uint64_t aux_size = 0;        // bytes of the AUX area
  bool enable_on_exec = false;  // `run`: start when the child execs
  // --only-in on Linux 6.13+: the event opens with AUX tracing paused
  // (aux_start_paused); the group's aux_resume event starts it.
  bool start_paused = false;
  // --ptw: PTWRITE packets (the `ptw` term) each followed by a FUP with the
  // instruction's address (`fup_on_ptw`), for ptsnap_mark()'s PTWRITE
  // encoding (<ptsnap/mark.h>). Needs caps/ptwrite.
  bool ptw = false;
  // --pwr-evt: power event packets (the `pwr_evt` term: PWRE, PWRX, MWAIT,
  // EXSTOP) for C-state changes. Needs caps/power_event_trace.
  bool pwr_evt = false;
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
// the sample preset (it belongs to --sampling);
// a requested feature missing from caps ("cyc needs caps/psb_cyc, which this
// CPU lacks"); a period value not advertised in caps ("mtc_period=5 is not
// supported; valid: 0,3,6"); `ptw` without caps/ptwrite; `pwr_evt` without
// caps/power_event_trace; a format term missing in sysfs.
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

// The CPU-wide dummy that collects PERF_RECORD_KSYMBOL and TEXT_POKE for a
// per-thread recording that traces the kernel, one per CPU (pid -1), each
// with its own ring (a CPU-wide event cannot SET_OUTPUT into a per-thread
// ring). The kernel sends these records only to CPU-wide events and to the
// current task's (perf_iterate_sb; hw-path-review.md 5b), so a per-thread
// tracking event misses the code patches and BPF loads of every other task.
// perf's record__config_text_poke, field for field where it matters:
// dummy:u (exclude_kernel: the match functions read only the two bits),
// sample_period 1, TIME in sample_type, and enabled from the open
// (`immediate`: disabled 0), so a patch made between the kcore copy and the
// start of tracing is not missed. sample_type is trace::kSampleType, the
// one trailer sideband.data holds. The bits are gated on `kernel` as
// BuildTrackingAttr gates them; nullopt when it knows neither (before 5.1).
std::optional<perf_event_attr> BuildKernelSidebandAttr(
    const std::optional<sys::KernelVersion>& kernel);

// ---- AUX pause and resume (Linux 6.13+) -----------------------------------
// perf_event_attr's `aux_action` word (uapi linux/perf_event.h of 6.13,
// commit 18d92bb57c39 "perf/core: Add aux_pause, aux_resume,
// aux_start_paused"): the u32 after aux_sample_size, which older headers
// (and kernels) call __reserved_3. Bit 0 aux_start_paused (on the AUX event:
// open paused), bit 1 aux_pause and bit 2 aux_resume (on another event of
// the AUX event's group: when it overflows, pause or resume the group
// leader's AUX tracing; kernel/events/core.c __perf_event_overflow). The
// kernel refuses (perf_event_open): aux_pause with aux_resume (EINVAL), a
// pause/resume event whose group leader is not an AUX event of a PMU with
// PERF_PMU_CAP_AUX_PAUSE (perf_get_aux_event: EINVAL), aux_start_paused on
// such a PMU (EOPNOTSUPP); kernels before 6.13 refuse any bit of the word
// (perf_copy_attr: EINVAL). Set through these helpers, which work with any
// header.
inline constexpr uint32_t kAuxStartPaused = 1u << 0;
inline constexpr uint32_t kAuxPause = 1u << 1;
inline constexpr uint32_t kAuxResume = 1u << 2;
inline constexpr size_t kAuxActionOffset = 116;  // after aux_sample_size (112)
void SetAuxAction(perf_event_attr& attr, uint32_t action);
uint32_t AuxAction(const perf_event_attr& attr);
// Whether `kernel` has AUX pause/resume (6.13+; unknown: no).
bool HasAuxPause(const std::optional<sys::KernelVersion>& kernel);

// ---- Sampling (--sampling: stack samples without PT) ----------------------

// How a sample's call stack is taken (magic-trace's -callgraph-mode, perf's
// --call-graph): frame pointers walked by the kernel, a copy of the user
// stack and registers unwound with CFI at decode time, or the CPU's LBR
// call-stack mode.
enum class CallgraphMode { kFp, kDwarf, kLbr };
std::string_view ToString(CallgraphMode m);  // "fp", "dwarf", "lbr"

struct CallgraphChoice {
  CallgraphMode mode = CallgraphMode::kDwarf;
  std::string note;  // a warning to print ("" for none)
};

// magic-trace's rule: `requested` ("" for the default, "fp", "dwarf",
// "lbr", "lbr-no-stitch", or the sexp spellings "Fp", "(Lbr)", ...). The
// default is lbr when `lbr_available` (the pdcm flag on every CPU and a
// hardware PMU that opens an LBR call-stack event), else dwarf, each with
// magic-trace's warning; lbr-no-stitch is lbr (ptsnap's decoder does no
// stitching either way) with a note. Errors: lbr without LBR (naming fp
// and dwarf), an unknown mode (listing the valid ones). Pure.
Result<CallgraphChoice> ChooseCallgraph(std::string_view requested, bool lbr_available);

// Samples per second for --timer-resolution with --sampling, as
// magic-trace maps it: low 1000, normal 10000, high `max_rate`
// (/proc/sys/kernel/perf_event_max_sample_rate), sample:N N. A frequency
// above `max_rate` is capped to it with a warning in `warnings` (the kernel
// refuses it: EINVAL); custom:... is an error (PT timing packets). Pure.
Result<uint64_t> SamplingFrequency(const PtTiming& timing, uint64_t max_rate,
                                   std::vector<std::string>* warnings);

// The sampling event: what counts toward a sample.
enum class SamplingEvent {
  kCycles,    // PERF_TYPE_HARDWARE / PERF_COUNT_HW_CPU_CYCLES (a hardware PMU exists)
  kCpuClock,  // PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK (VMs without a PMU)
};
std::string_view ToString(SamplingEvent e);  // "cycles", "cpu-clock"

struct SamplingAttrOptions {
  SamplingEvent event = SamplingEvent::kCpuClock;
  CallgraphMode callgraph = CallgraphMode::kDwarf;
  uint64_t frequency = 10000;  // attr.sample_freq (SamplingFrequency)
  bool trace_user = true;
  bool trace_kernel = false;
  bool enable_on_exec = false;
  // Gates the kernel-scope sideband bits as BuildTrackingAttr does.
  std::optional<sys::KernelVersion> kernel;
};

// perf's PERF_REGS_MASK for x86-64 user registers (tools/perf/arch/x86/
// include/perf_regs.h): AX..R15 with IP, FLAGS, SP, CS, SS, without the
// segment registers DS, ES, FS, GS, which the kernel refuses for 64-bit
// tasks. REGS_USER records the set bits' registers in bit order.
inline constexpr uint64_t kX86UserRegsMask = 0xff0fff;
// perf's default --call-graph dwarf dump size (bytes of user stack).
inline constexpr uint32_t kDwarfStackBytes = 8192;
// Callgraph fp: the registers and stack bytes the decoder needs to put back
// the caller the kernel's frame-pointer walk skips where the sampled code
// has no frame of its own (a leaf GCC built without one, a prologue before
// `mov %rsp,%rbp`, an epilogue after `pop %rbp`: decode/fp_mend.h). BP, SP
// and IP (PERF_REG_X86_BP/SP/IP 6, 7, 8), and the return address at most
// 512 bytes above %rsp (a frameless function's pushes and locals).
inline constexpr uint64_t kFpUserRegsMask = (1u << 6) | (1u << 7) | (1u << 8);
inline constexpr uint32_t kFpStackBytes = 512;
// Fields every sample carries, before the callgraph's.
inline constexpr uint64_t kSamplingBaseSampleType = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
                                                    PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                    PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;

// The one event per thread or CPU of a sampled recording: it samples
// (freq = 1, sample_type = kSamplingBaseSampleType plus CALLCHAIN; fp:
// REGS_USER kFpUserRegsMask and STACK_USER kFpStackBytes; dwarf:
// exclude_callchain_user with REGS_USER kX86UserRegsMask and STACK_USER
// kDwarfStackBytes; lbr: BRANCH_STACK with user call-stack branch
// sampling) and carries the tracking event's sideband bits (mmap, mmap2,
// comm, comm_exec, task, context_switch, sample_id_all; kernel scope:
// ksymbol, text_poke), so one ring holds both. Because sample_type's
// trailer bits are TID | TIME | CPU | IDENTIFIER, the sideband records end
// with trace::kSampleType's trailer, as sideband.data requires. Pure.
perf_event_attr BuildSamplingAttr(const SamplingAttrOptions& opts);

// A user-space execute breakpoint at `addr` that samples every hit
// (sample_period 1, wakeup_events 1) with BreakpointSample's fields.
// `aux_pause` (6.13+, opened in the intel_pt event's group): a hit pauses
// that event's AUX tracing in the kernel, before the reader wakes.
perf_event_attr BuildBreakpointAttr(uint64_t addr, bool aux_pause = false);

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

// --slower-than on real programs: an entry probe (uprobe) or a return probe
// (uretprobe) on the function at file offset `offset` of `path`, through
// the `uprobe` PMU (kernel/events/core.c perf_uprobe_event_init: config1
// is the path as a user pointer, config2 the offset in the file, and the
// PMU's `retprobe` format term selects the return probe). `path` must stay
// alive until perf_event_open returns. One sample per hit (period 1),
// waking the reader at once (wakeup_events 1); `inherit` follows the
// threads the target creates later. Fails when the PMU has no `type` or,
// for a return probe, no `retprobe` term.
Result<perf_event_attr> BuildUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                        uint64_t offset, bool retprobe, bool inherit);

// PERF_RECORD_SAMPLE body for BuildUprobeAttr's sample_type (TID | TIME |
// REGS_USER with only the stack pointer, in the kernel's order). `abi` is
// PERF_SAMPLE_REGS_ABI_NONE (0) when the kernel had no user registers; `sp`
// is then absent from the record.
struct UprobeSample {
  uint32_t pid, tid;
  uint64_t time;
  uint64_t abi;
  uint64_t sp;
};
inline constexpr uint64_t kUprobeSampleType =
    PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER;
inline constexpr int kX86RegSp = 7;  // arch/x86/include/uapi/asm/perf_regs.h PERF_REG_X86_SP
static_assert(sizeof(UprobeSample) == 32, "layout must match kUprobeSampleType");

// --only-in on 6.13+: an entry probe (`retprobe` false) that resumes, or a
// return probe that pauses, the AUX tracing of the intel_pt event whose
// group it joins (aux_resume / aux_pause; sample_period 1, so every hit
// overflows). No samples are read: sample_type 0, never mapped. Not
// inherited (a group member follows its leader's thread or CPU). Errors as
// BuildUprobeAttr's.
Result<perf_event_attr> BuildAuxActionUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                                 uint64_t offset, bool retprobe);

// A trigger on a host whose execute breakpoints count no hit
// (record/breakpoints.h): an entry uprobe on the trigger's function at file
// offset `offset` of `path`, with the breakpoint's sample layout
// (kBreakpointSampleType: the sampled IP of an entry uprobe is the probed
// instruction) and wakeup, user space only, disabled until armed;
// `aux_pause` as BuildBreakpointAttr's. Errors as BuildUprobeAttr's.
Result<perf_event_attr> BuildTriggerUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                               uint64_t offset, bool aux_pause);

}  // namespace ptsnap::perf
