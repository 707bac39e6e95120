#include "perf/attr.h"

#include <linux/hw_breakpoint.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstddef>
#include <cstring>

#include "base/string_util.h"
#include "trace/perf_record.h"

namespace ptsnap::perf {
namespace {

constexpr const char* kTimingKeys = "cyc, cyc_thresh, mtc, mtc_period, noretcomp, psb_period";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<bool> ParseBool(std::string_view key, std::string_view v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return Error("--timer-resolution: " + std::string(key) + "=" + std::string(v) +
               " is not a boolean (use 0/1 or true/false)");
}

Result<void> SetKey(PtTiming& t, std::string_view key, std::string_view value) {
  if (key == "cyc" || key == "mtc" || key == "noretcomp") {
    PTSNAP_ASSIGN_OR_RETURN(bool b, ParseBool(key, value));
    (key == "cyc" ? t.cyc : key == "mtc" ? t.mtc : t.noretcomp) = b;
    return Ok();
  }
  if (key == "cyc_thresh" || key == "mtc_period" || key == "psb_period") {
    auto n = base::ParseUint(value, 0);
    if (!n || *n > 15)
      return Error("--timer-resolution: " + std::string(key) + "=" + std::string(value) +
                   " is not a number from 0 to 15");
    (key == "cyc_thresh"   ? t.cyc_thresh
     : key == "mtc_period" ? t.mtc_period
                           : t.psb_period) = static_cast<uint32_t>(*n);
    return Ok();
  }
  return Error("--timer-resolution: unknown key '" + std::string(key) +
               "'; valid keys: " + kTimingKeys);
}

// Valid values of a period term are the set bits of its caps bitmap.
std::string ListBits(uint64_t bitmap) {
  std::string out;
  for (int i = 0; i < 64; ++i) {
    if ((bitmap >> i) & 1) out += (out.empty() ? "" : ",") + std::to_string(i);
  }
  return out.empty() ? "none" : out;
}

// perf's intel_pt_default_config: 3, or the nearest lower supported value,
// else the lowest supported one.
uint32_t DefaultPeriod(uint64_t bitmap) {
  for (int v = 3; v >= 0; --v)
    if ((bitmap >> v) & 1) return static_cast<uint32_t>(v);
  for (int v = 4; v < 16; ++v)
    if ((bitmap >> v) & 1) return static_cast<uint32_t>(v);
  return 0;
}

Result<void> CheckPeriod(const sys::PmuInfo& pmu, const char* term, const char* cap,
                         uint32_t value) {
  const uint64_t bitmap = pmu.Cap(cap);
  if (((bitmap >> value) & 1) == 0)
    return Error(std::string(term) + "=" + std::to_string(value) +
                 " is not supported by this CPU (caps/" + cap + " allows: " + ListBits(bitmap) +
                 ")");
  return Ok();
}

Result<void> Place(const sys::PmuInfo& pmu, const char* term, uint64_t value, uint64_t* config) {
  if (!pmu.HasTerm(term))
    return Error("the intel_pt PMU has no '" + std::string(term) +
                 "' format term in sysfs (kernel too old for this option?)");
  return sys::SetTerm(pmu, term, value, config);
}

}  // namespace

Result<PtTiming> ParseTiming(std::string_view text) {
  PtTiming t;
  std::string s = Lower(base::Trim(text));
  if (s == "low" || s == "normal" || s == "high") {
    t.preset = s;
    return t;
  }
  // --sampling's frequency: "sample:N", magic-trace's "(Sample (freq N))".
  if (s == "sample" || base::StartsWith(s, "sample:") || base::StartsWith(s, "(sample")) {
    std::string n;
    if (base::StartsWith(s, "sample:")) {
      n = std::string(base::Trim(std::string_view(s).substr(7)));
    } else if (base::StartsWith(s, "(sample")) {
      std::string flat = s;
      std::replace(flat.begin(), flat.end(), '(', ' ');
      std::replace(flat.begin(), flat.end(), ')', ' ');
      auto words = base::SplitWhitespace(flat);
      if (words.size() != 3 || words[1] != "freq")
        return Error("--timer-resolution: malformed '" + std::string(text) +
                     "' (expected (Sample (freq N)))");
      n = std::string(words[2]);
    }
    auto freq = base::ParseUint(n);
    if (n.empty() || !freq || *freq == 0)
      return Error(
          "--timer-resolution sample needs a frequency in samples per second: sample:N, "
          "e.g. sample:5000");
    t.preset = "sample";
    t.sample_freq = *freq;
    return t;
  }
  t.preset = "custom";
  std::vector<std::pair<std::string, std::string>> pairs;
  if (base::StartsWith(s, "custom:")) {
    for (std::string_view kv : base::Split(std::string_view(s).substr(7), ',')) {
      kv = base::Trim(kv);
      if (kv.empty()) continue;
      auto eq = kv.find('=');
      if (eq == std::string_view::npos)
        return Error("--timer-resolution: expected key=value in '" + std::string(kv) + "'");
      pairs.emplace_back(std::string(base::Trim(kv.substr(0, eq))),
                         std::string(base::Trim(kv.substr(eq + 1))));
    }
  } else if (base::StartsWith(s, "(custom")) {
    // magic-trace's sexp: (Custom (cyc true) (mtc_period 0)).
    std::string flat = s;
    std::replace(flat.begin(), flat.end(), '(', ' ');
    std::replace(flat.begin(), flat.end(), ')', ' ');
    auto words = base::SplitWhitespace(flat);
    if (words.size() % 2 != 1)
      return Error("--timer-resolution: malformed '" + std::string(text) + "'");
    for (size_t i = 1; i + 1 < words.size(); i += 2)
      pairs.emplace_back(std::string(words[i]), std::string(words[i + 1]));
  } else if (s == "custom") {
    return Error("--timer-resolution custom needs keys: custom:cyc=1,mtc_period=0 (valid keys: " +
                 std::string(kTimingKeys) + ")");
  } else {
    return Error("--timer-resolution: '" + std::string(text) +
                 "' is not low, normal, high, custom:KEY=VALUE,... or sample:N");
  }
  for (const auto& [k, v] : pairs) PTSNAP_TRY(SetKey(t, k, v));
  return t;
}

uint64_t PsbPeriodBytes(bool topa_multiple_entries, uint32_t psb_period) {
  // "Use caps/topa_multiple_entries to indicate early hardware that had
  // extra frequent PSBs" (perf's intel_pt_psb_period).
  if (!topa_multiple_entries) return 256;
  return uint64_t{1} << (std::min<uint32_t>(psb_period, 15) + 11);
}

Result<PtAttr> BuildPtAttr(const sys::PmuInfo& pmu, const PtAttrOptions& opts) {
  if (!pmu.present) return Error("no " + pmu.name + " PMU in sysfs");
  if (!pmu.type) return Error("the " + pmu.name + " PMU has no readable 'type' file");
  if (!opts.trace_user && !opts.trace_kernel)
    return Error("nothing to trace: both user and kernel excluded");

  PtAttr out;
  const bool psb_cyc = pmu.Cap("psb_cyc") != 0;
  // pt_event_valid() refuses mtc when caps/mtc_periods is 0 (no period is
  // valid), and perf's intel_pt_default_config adds mtc only `if (mtc_periods)`.
  const bool has_mtc_caps = pmu.Cap("mtc") != 0;
  const bool has_mtc = has_mtc_caps && pmu.Cap("mtc_periods") != 0;
  const PtTiming& req = opts.timing;
  const std::string& preset = req.preset;
  // magic-trace: "[-timer-resolution Sample] can only be used in sampling
  // mode. (Did you forget [-sampling]?)".
  if (preset == "sample")
    return Error(
        "--timer-resolution sample:N can only be used with --sampling (did you forget "
        "--sampling?)");
  if (preset != "low" && preset != "normal" && preset != "high" && preset != "custom")
    return Error("--timer-resolution: unknown preset '" + preset + "'");

  // Start from perf's default (the "low" preset).
  PtTimingResolved t;
  t.tsc = true;
  t.mtc = has_mtc && pmu.HasTerm("mtc");
  if (t.mtc) t.mtc_period = DefaultPeriod(pmu.Cap("mtc_periods"));
  bool set_psb = psb_cyc && pmu.HasTerm("psb_period");
  if (set_psb) t.psb_period = DefaultPeriod(pmu.Cap("psb_periods"));

  if (preset == "normal" || preset == "high") {
    if (!psb_cyc || !pmu.HasTerm("cyc")) {
      out.warnings.push_back(
          "this CPU has no cycle-accurate mode (caps/psb_cyc is 0): timing granularity will be "
          "about 1us instead of about 10ns (--timer-resolution " +
          preset + " downgraded to low)");
    } else {
      t.cyc = true;
      t.cyc_thresh = ((pmu.Cap("cycle_thresholds") >> 1) & 1) ? 1 : 0;
      if (t.mtc && ((pmu.Cap("mtc_periods") & 1) != 0)) t.mtc_period = 0;
      if (preset == "high") t.noretcomp = pmu.HasTerm("noretcomp");
    }
  } else if (preset == "custom") {
    if (req.mtc) {
      if (*req.mtc && !has_mtc_caps)
        return Error(
            "mtc=1 needs caps/mtc, which this CPU lacks (drop mtc from --timer-resolution)");
      if (*req.mtc && !has_mtc) {
        out.warnings.push_back(
            "mtc=1 ignored: this CPU advertises no MTC period (caps/mtc_periods is 0) and the "
            "kernel refuses MTC without one; timing comes from TSC packets only");
      } else {
        t.mtc = *req.mtc;
      }
    }
    if (req.mtc_period) {
      if (!t.mtc) return Error("mtc_period needs mtc packets, which are off or unsupported here");
      PTSNAP_TRY(CheckPeriod(pmu, "mtc_period", "mtc_periods", *req.mtc_period));
      t.mtc_period = *req.mtc_period;
    }
    if (req.cyc) {
      if (*req.cyc && !psb_cyc)
        return Error("cyc=1 needs caps/psb_cyc, which this CPU lacks (try --timer-resolution low)");
      t.cyc = *req.cyc;
    }
    if (req.cyc_thresh) {
      if (!psb_cyc) return Error("cyc_thresh needs caps/psb_cyc, which this CPU lacks");
      if (!t.cyc) return Error("cyc_thresh only makes sense with cyc=1");
      PTSNAP_TRY(CheckPeriod(pmu, "cyc_thresh", "cycle_thresholds", *req.cyc_thresh));
      t.cyc_thresh = *req.cyc_thresh;
    }
    if (req.psb_period) {
      if (!psb_cyc)
        return Error(
            "psb_period needs caps/psb_cyc (configurable PSB frequency), which this CPU "
            "lacks");
      PTSNAP_TRY(CheckPeriod(pmu, "psb_period", "psb_periods", *req.psb_period));
      t.psb_period = *req.psb_period;
      set_psb = true;
    }
    if (req.noretcomp) t.noretcomp = *req.noretcomp;
  }

  // PTWRITE exists from Goldmont and Ice Lake on; without it the
  // instruction faults (#UD), so the program must not be told to use it.
  if (opts.ptw && pmu.Cap("ptwrite") == 0)
    return Error(
        "--ptw needs the PTWRITE instruction, which this CPU lacks (" + pmu.name +
        "'s caps/ptwrite is 0 or missing): drop --ptw; ptsnap_mark() (<ptsnap/mark.h>) then "
        "uses its emulated encoding, the default, which needs no CPU support");
  // Power Event Trace is a CPUID leaf 14H feature (EBX bit 4) that the
  // kernel reports as caps/power_event_trace; it refuses PwrEvtEn without it.
  if (opts.pwr_evt && pmu.Cap("power_event_trace") == 0)
    return Error("--pwr-evt needs Power Event Trace, which this CPU lacks (" + pmu.name +
                 "'s caps/power_event_trace is 0 or missing): record without --pwr-evt (the "
                 "core clock from CBR packets needs no option)");

  uint64_t config = 0;
  // `pt` (pass-through) makes BranchEn follow `branch`; older kernels have
  // neither term and force BranchEn on themselves.
  if (pmu.HasTerm("pt")) PTSNAP_TRY(Place(pmu, "pt", 1, &config));
  if (pmu.HasTerm("branch")) PTSNAP_TRY(Place(pmu, "branch", 1, &config));
  PTSNAP_TRY(Place(pmu, "tsc", 1, &config));
  if (t.mtc) {
    PTSNAP_TRY(Place(pmu, "mtc", 1, &config));
    PTSNAP_TRY(Place(pmu, "mtc_period", t.mtc_period, &config));
  }
  if (t.cyc) {
    PTSNAP_TRY(Place(pmu, "cyc", 1, &config));
    PTSNAP_TRY(Place(pmu, "cyc_thresh", t.cyc_thresh, &config));
  }
  if (t.noretcomp) PTSNAP_TRY(Place(pmu, "noretcomp", 1, &config));
  if (set_psb) PTSNAP_TRY(Place(pmu, "psb_period", t.psb_period, &config));
  // IA32_RTIT_CTL.PTWEn and FUPonPTW (SDM vol. 3C, "IA32_RTIT_CTL MSR"): each PTWRITE gives a PTW
  // packet and a FUP with its address, as `perf record -e
  // intel_pt/ptw,fup_on_ptw/` asks for.
  if (opts.ptw) {
    PTSNAP_TRY(Place(pmu, "ptw", 1, &config));
    PTSNAP_TRY(Place(pmu, "fup_on_ptw", 1, &config));
  }
  // IA32_RTIT_CTL.PwrEvtEn (SDM vol. 3C, "Power Event Trace"): PWRE, PWRX,
  // MWAIT and EXSTOP packets around C-state changes, as `perf record -e
  // intel_pt/pwr_evt/` asks for. CBR packets need no bit.
  if (opts.pwr_evt) PTSNAP_TRY(Place(pmu, "pwr_evt", 1, &config));

  perf_event_attr& a = out.attr;
  a.size = sizeof(a);
  a.type = *pmu.type;
  a.config = config;
  a.exclude_kernel = opts.trace_kernel ? 0 : 1;
  a.exclude_user = opts.trace_user ? 0 : 1;
  a.exclude_hv = 1;
  a.disabled = 1;
  a.enable_on_exec = opts.enable_on_exec ? 1 : 0;
  a.sample_id_all = 1;
  a.sample_type = trace::kSampleType;
  if (opts.start_paused) SetAuxAction(a, kAuxStartPaused);
  if (opts.full_execution) {
    // perf: auxtrace_mmap_pages * page_size / 4, capped at UINT_MAX.
    a.aux_watermark = static_cast<uint32_t>(std::min<uint64_t>(opts.aux_size / 4, UINT_MAX));
  }
  out.timing = t;
  return out;
}

perf_event_attr BuildTrackingAttr(bool trace_kernel, bool enable_on_exec,
                                  const std::optional<sys::KernelVersion>& kernel) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  a.sample_period = 1;
  a.sample_type = trace::kSampleType;
  a.sample_id_all = 1;
  a.disabled = 1;
  a.enable_on_exec = enable_on_exec ? 1 : 0;
  a.exclude_kernel = trace_kernel ? 0 : 1;
  a.exclude_hv = 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.context_switch = 1;
  if (trace_kernel) {
    // Each bit came with its record type: PERF_RECORD_KSYMBOL in 5.1
    // (76193a94522f), PERF_RECORD_TEXT_POKE in 5.9 (e17d43b93e54). Older
    // kernels see them in __reserved_1 and perf_copy_attr() returns EINVAL.
    a.ksymbol = !kernel || kernel->AtLeast(5, 1) ? 1 : 0;
    a.text_poke = !kernel || kernel->AtLeast(5, 9) ? 1 : 0;
  }
  return a;
}

std::optional<perf_event_attr> BuildKernelSidebandAttr(
    const std::optional<sys::KernelVersion>& kernel) {
  // The tracking event's dummy, trailer and gated bits, without its
  // per-task records (every task's on the CPU would flood the ring).
  perf_event_attr a = BuildTrackingAttr(true, false, kernel);
  if (a.ksymbol == 0 && a.text_poke == 0) return std::nullopt;
  a.mmap = 0;
  a.mmap2 = 0;
  a.comm = 0;
  a.comm_exec = 0;
  a.task = 0;
  a.context_switch = 0;
  a.exclude_kernel = 1;  // dummy:u; the two match functions read only their bits
  a.disabled = 0;        // perf's `immediate`
  return a;
}

std::string_view ToString(CallgraphMode m) {
  switch (m) {
    case CallgraphMode::kFp: return "fp";
    case CallgraphMode::kDwarf: return "dwarf";
    case CallgraphMode::kLbr: return "lbr";
  }
  return "?";
}

std::string_view ToString(SamplingEvent e) {
  switch (e) {
    case SamplingEvent::kCycles: return "cycles";
    case SamplingEvent::kCpuClock: return "cpu-clock";
  }
  return "?";
}

Result<CallgraphChoice> ChooseCallgraph(std::string_view requested, bool lbr_available) {
  // magic-trace's sexp spellings ("Lbr", "(Dwarf)") come down to the same
  // lower-case words.
  std::string r = Lower(base::Trim(requested));
  std::erase(r, '(');
  std::erase(r, ')');
  std::replace(r.begin(), r.end(), '_', '-');
  r = std::string(base::Trim(r));
  CallgraphChoice c;
  if (r.empty()) {
    if (lbr_available) {
      c.mode = CallgraphMode::kLbr;
      c.note =
          "--callgraph-mode not given: defaulting to lbr, which may lose data and has limited "
          "call stack depth (pass --callgraph-mode dwarf or fp to choose)";
    } else {
      c.mode = CallgraphMode::kDwarf;
      c.note =
          "--callgraph-mode not given: defaulting to dwarf, which may have high overhead and "
          "decoding time (no LBR here; pass --callgraph-mode fp for programs built with frame "
          "pointers)";
    }
    return c;
  }
  if (r == "fp" || r == "frame-pointer") {
    c.mode = CallgraphMode::kFp;
    return c;
  }
  if (r == "dwarf") {
    c.mode = CallgraphMode::kDwarf;
    return c;
  }
  if (r == "lbr" || r == "lbr-no-stitch" || r == "last-branch-record") {
    if (!lbr_available)
      return Error("--callgraph-mode " + std::string(requested) +
                   ": this machine has no LBR call-stack support (needs a hardware PMU and the "
                   "pdcm flag on every CPU in /proc/cpuinfo); use --callgraph-mode fp or dwarf");
    c.mode = CallgraphMode::kLbr;
    if (r == "lbr-no-stitch")
      c.note =
          "--callgraph-mode lbr-no-stitch records as lbr (the samples are the same; "
          "ptsnap does not stitch LBR call stacks)";
    return c;
  }
  return Error("--callgraph-mode: unknown mode '" + std::string(requested) +
               "'; valid: lbr, lbr-no-stitch, fp, dwarf");
}

Result<uint64_t> SamplingFrequency(const PtTiming& timing, uint64_t max_rate,
                                   std::vector<std::string>* warnings) {
  uint64_t freq = 0;
  const std::string& p = timing.preset;
  if (p == "low") {
    freq = 1000;
  } else if (p == "normal") {
    freq = 10000;
  } else if (p == "high") {
    freq = max_rate;
  } else if (p == "sample" && timing.sample_freq) {
    freq = *timing.sample_freq;
  } else if (p == "custom") {
    // magic-trace: "[-timer-resolution Custom] can only be used with Intel PT".
    return Error(
        "--timer-resolution custom:... sets Intel PT timing packets and cannot be used with "
        "--sampling; use low, normal, high or sample:N (samples per second)");
  } else {
    return Error("--timer-resolution: unknown preset '" + p + "'");
  }
  if (max_rate != 0 && freq > max_rate) {
    if (warnings != nullptr)
      warnings->push_back(
          "--timer-resolution: " + std::to_string(freq) +
          " samples per second is above kernel.perf_event_max_sample_rate (" +
          std::to_string(max_rate) + "); sampling at " + std::to_string(max_rate) +
          " instead (raise it with `sysctl -w kernel.perf_event_max_sample_rate=N`)");
    freq = max_rate;
  }
  if (freq == 0) return Error("--timer-resolution: a sampling frequency of 0");
  return freq;
}

perf_event_attr BuildSamplingAttr(const SamplingAttrOptions& opts) {
  // The sideband bits and scope exactly as the tracking event has them.
  perf_event_attr a = BuildTrackingAttr(opts.trace_kernel, opts.enable_on_exec, opts.kernel);
  if (opts.event == SamplingEvent::kCycles) {
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CPU_CYCLES;
  } else {
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
  }
  a.exclude_user = opts.trace_user ? 0 : 1;
  a.freq = 1;
  a.sample_freq = opts.frequency;
  a.sample_type = kSamplingBaseSampleType | PERF_SAMPLE_CALLCHAIN;
  switch (opts.callgraph) {
    case CallgraphMode::kFp:
      // perf --call-graph fp takes the kernel's walk alone; the registers
      // and a small stack copy let the decoder mend it where the sampled
      // function had no frame (decode/fp_mend.h).
      a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
      a.sample_regs_user = kFpUserRegsMask;
      a.sample_stack_user = kFpStackBytes;
      break;
    case CallgraphMode::kDwarf:
      // perf's --call-graph dwarf: the kernel's callchain keeps only kernel
      // frames; user frames come from unwinding the stack copy.
      a.exclude_callchain_user = 1;
      a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
      a.sample_regs_user = kX86UserRegsMask;
      a.sample_stack_user = kDwarfStackBytes;
      break;
    case CallgraphMode::kLbr:
      a.sample_type |= PERF_SAMPLE_BRANCH_STACK;
      a.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_CALL_STACK;
      break;
  }
  return a;
}

static_assert(offsetof(perf_event_attr, aux_sample_size) + 4 == kAuxActionOffset &&
                  kAuxActionOffset + 4 <= sizeof(perf_event_attr),
              "aux_action is the u32 after aux_sample_size");

void SetAuxAction(perf_event_attr& attr, uint32_t action) {
  std::memcpy(reinterpret_cast<char*>(&attr) + kAuxActionOffset, &action, sizeof(action));
}

uint32_t AuxAction(const perf_event_attr& attr) {
  uint32_t action = 0;
  std::memcpy(&action, reinterpret_cast<const char*>(&attr) + kAuxActionOffset, sizeof(action));
  return action;
}

bool HasAuxPause(const std::optional<sys::KernelVersion>& kernel) {
  return kernel && kernel->AtLeast(6, 13);
}

perf_event_attr BuildBreakpointAttr(uint64_t addr, bool aux_pause) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_BREAKPOINT;
  a.bp_type = HW_BREAKPOINT_X;
  a.bp_addr = addr;
  a.bp_len = sizeof(long);  // x86 requires sizeof(long) for execute breakpoints
  a.sample_period = 1;
  a.sample_type = kBreakpointSampleType;
  a.wakeup_events = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.disabled = 1;
  if (aux_pause) SetAuxAction(a, kAuxPause);
  return a;
}

Result<perf_event_attr> BuildUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                        uint64_t offset, bool retprobe, bool inherit) {
  if (!uprobe_pmu.type)
    return Error(
        "the kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe/type): --slower-than "
        "needs CONFIG_UPROBE_EVENTS (Linux 4.17+)");
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = *uprobe_pmu.type;
  if (retprobe) {
    uint64_t config = 0;
    auto set = sys::SetTerm(uprobe_pmu, "retprobe", 1, &config);
    a.config = config;
    if (!set)
      return Error("the uprobe PMU has no usable retprobe format term (" + set.error().ToString() +
                   "): --slower-than needs return probes");
  }
  a.config1 = reinterpret_cast<uintptr_t>(path);
  a.config2 = offset;
  a.sample_period = 1;
  a.sample_type = kUprobeSampleType;
  a.sample_regs_user = uint64_t{1} << kX86RegSp;
  a.wakeup_events = 1;
  a.inherit = inherit ? 1 : 0;
  return a;
}

Result<perf_event_attr> BuildAuxActionUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                                 uint64_t offset, bool retprobe) {
  PTSNAP_ASSIGN_OR_RETURN(perf_event_attr a,
                          BuildUprobeAttr(uprobe_pmu, path, offset, retprobe, false));
  a.sample_type = 0;
  a.sample_regs_user = 0;
  a.wakeup_events = 0;
  // Enabled with its group: it counts only while the intel_pt leader is
  // scheduled (the leader opens disabled, or with enable_on_exec).
  a.disabled = 0;
  SetAuxAction(a, retprobe ? kAuxPause : kAuxResume);
  return a;
}

Result<perf_event_attr> BuildTriggerUprobeAttr(const sys::PmuInfo& uprobe_pmu, const char* path,
                                               uint64_t offset, bool aux_pause) {
  PTSNAP_ASSIGN_OR_RETURN(perf_event_attr a,
                          BuildUprobeAttr(uprobe_pmu, path, offset, false, false));
  a.sample_type = kBreakpointSampleType;
  a.sample_regs_user = 0;
  a.exclude_kernel = 1;
  a.disabled = 1;
  if (aux_pause) SetAuxAction(a, kAuxPause);
  return a;
}

}  // namespace ptsnap::perf
