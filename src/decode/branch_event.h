// The decode wing's vocabulary: a branch event (what the stream decoders
// hand the call-stack model: calls, returns, jumps, far transfers, where
// tracing stops and starts, errors, marks, power), the texts made from one
// when it is shown, and the sink that takes them in batches.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptsnap::decode {

enum class BranchKind : uint8_t {
  kCall,       // near call from -> to
  kReturn,     // near return from -> to
  kJump,       // jump, taken conditional, or a block boundary: from -> to
  kFarCall,    // syscall/int/far call with the destination traced (kernel traced)
  kFarReturn,  // sysret/iret/far ret to a traced destination
  kInterrupt,  // asynchronous branch (interrupt, exception, fault) from -> to
  kEnable,     // tracing (re)starts at `to` (TIP.PGE)
  kDisable,    // tracing stops after `from` (TIP.PGD); `syscall` says why
  kOverflow,   // the CPU's internal buffer overflowed: trace lost until `to`
  kError,      // decode error (`error`, ErrorMessage); decoding resumes at the next PSB
  kStop,       // TraceStop packet
  // A mark (docs/decoding.md, "Marks"): a PTW packet's payload, or an
  // emulated PTWRITE's (perf's encoding in TNT bits), in `to`; `from` is
  // the PTWRITE's address when the trace gives it, else 0. No frame changes.
  kMark,
  // Frequency and power (docs/decoding.md, "Frequency and power"), from
  // hardware traces only (an emulated CPU has neither):
  kCbr,         // a CBR packet: the core:bus clock ratio in `to`
  kPowerEntry,  // PWRE (`to`: kPowerPwre | state | sub-state << 8 | hardware-initiated << 16)
                // or MWAIT (`to`: its hints, EAX; `from`: its address): the CPU or thread
                // goes idle
  kPowerExit,   // PWRX (`to`: last core C-state | deepest << 8 | wake reasons: interrupt
                // << 16, store to the monitored address << 17, autonomous << 18): it woke
};
// kPowerEntry's `to`: a PWRE's (else an MWAIT's hints).
inline constexpr uint64_t kPowerPwre = uint64_t{1} << 32;
std::string_view ToString(BranchKind k);

struct BranchEvent {
  BranchKind kind = BranchKind::kJump;
  bool syscall = false;  // kDisable: tracing stopped at a syscall instruction
  bool tsx_abort = false;
  // The thread the event belongs to: the stream's thread, or for per-CPU
  // streams the thread the switch sideband says ran then (pid 0, tid
  // -1 - cpu when none is known or the CPU was idle).
  int32_t pid = 0, tid = 0;
  // The address space to symbolise in: a Symbolizer key that is `pid` for
  // a process's first address space and a synthetic id (>= kFirstSpaceId)
  // for each later one (after an exec, or an mmap over mapped code).
  int32_t space = 0;
  uint64_t time = 0;          // perf clock ns (0 when the stream has no timing at all)
  uint64_t from = 0, to = 0;  // 0 when unknown / suppressed
  uint64_t insns = 0;         // instructions executed since the previous event
  // kError only: libipt's status (a negative pte_* code; the flow decoder
  // uses the same codes), and whether the message names `from` (code not
  // mapped there). The text is ErrorMessage's, made only when shown: an
  // event holds no heap memory and copies as plain bytes. For -pte_nomap,
  // `to` is the address whose code is not in the image when the decode
  // stopped at the start of a block (a branch's target, e.g. a call into
  // a BPF program not in the kcore copy), else 0; `from` is the branch.
  int32_t error = 0;
  bool error_at_from = false;
};
// A kError event's message: libipt's text for `error`, with " at 0xFROM"
// when error_at_from ("no memory mapped at this address at 0x401000").
// Empty for other kinds.
std::string ErrorMessage(const BranchEvent& e);
// A mark's payload as the timeline shows it: "0x1234", and when the bytes
// (little-endian) are printable ASCII padded with NULs, as perf script
// prints them, the text too: "0x6f6c6c6548 \"Hello\"".
std::string MarkText(uint64_t payload);
// The C-state a kPowerEntry asks for, as the SDM numbers them ("C1", "C6",
// "C0" for 0xf): MWAIT's hint (EAX[7:4]) and PWRE's resolved state both
// hold the state minus one.
std::string CStateName(uint64_t power_entry_to);
// A "[C-state Cn]" slice's arguments (docs/decoding.md, "Frequency and
// power"): names and values from fixed tables, so their addresses are
// stable (writers intern them by address).
struct PowerArg {
  const std::string* name;
  const std::string* value;
};
// Where it begins, from the kPowerEntry's `to`: c_state ("C6") and
// sub_state ("0"), and for a PWRE hardware_initiated ("true"/"false").
std::vector<PowerArg> PowerEntryArgs(uint64_t power_entry_to);
// Where a PWRX ends it, from the kPowerExit's `to`: last_c_state and
// deepest_c_state (the core's, "C6"), and wake ("interrupt", "store",
// "hardware", comma-separated; left out when the PWRX names no reason).
std::vector<PowerArg> PowerExitArgs(uint64_t power_exit_to);
// The text for a kError event's `error`: libipt's message, or ptsnap's
// for the codes below.
std::string StatusMessage(int status);
// A kError event's `error` where a stream file ends before the bytes the
// manifest lists (cut or truncated): not a libipt status.
inline constexpr int kErrStreamCut = -0x10000;
// A kError event's `error` where the time the packets since a PSB gave ran
// ahead of the next PSB's TSC (a changed MTC, CYC or TSC: docs/decoding.md,
// "Damaged streams"): the stretch between the two PSBs is damaged.
inline constexpr int kErrTimeAhead = -0x10001;

// Receives decoded events in order, a batch at a time (one virtual call
// per batch, not per event, on the hot path). The span is valid only
// during the call. PtDecoder calls it on the thread that decodes.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnEvents(std::span<const BranchEvent> events) = 0;
};
// An EventSink calling `f(const BranchEvent&)` per event, inlined into the
// batch loop: `auto sink = EventSinkOf([&](const BranchEvent& e) {...});`.
template <typename F>
class EventSinkFn final : public EventSink {
 public:
  explicit EventSinkFn(F f) : f_(std::move(f)) {}
  void OnEvents(std::span<const BranchEvent> events) override {
    for (const BranchEvent& e : events) f_(e);
  }

 private:
  F f_;
};
template <typename F>
EventSinkFn<F> EventSinkOf(F f) {
  return EventSinkFn<F>(std::move(f));
}

}  // namespace ptsnap::decode
