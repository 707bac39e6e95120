// What the call-stack model produces and the output writers consume: a
// stream of slice events per thread (docs/decoding.md, "Slices").
#pragma once

#include <cstdint>
#include <string>

#include "ptsnap/result.h"

namespace ptsnap::model {

// How a frame began (kBegin) or ended (kEnd). Writers of timelines ignore
// it; the .events dump prints it so that another decoder's call structure
// can be compared with ours (tools/perf-agree: perf's stack has calls and
// returns only, ours also has tail calls, unwinds and pseudo frames).
enum class Via : uint8_t {
  kNone,  // markers, "[unknown]" spans
  // kBegin
  kCall,      // a call instruction
  kKernel,    // a syscall, fault or interrupt entry: the first frame of a kernel stack
  kJump,      // takes the place of the frame that ended just before it, which ends
              // with kJump too (tail call, PLT jump, a return or resume into another
              // function than the one below)
  kStart,     // tracing started, or resumed with no frame open
  kSignal,    // a signal handler, or its sigreturn trampoline
  kUntraced,  // "[syscall]" / "[untraced]"
  kGap,       // a named gap: a decode error at a branch into KSYMBOL-named code (a BPF
              // program) whose bytes the trace has not; ends with kResume
  kInferred,  // its start was not seen (the begin is written at the segment's end)
  kIdle,      // "[C-state Cn]": the CPU or thread went idle (PWRE, MWAIT); ends with
              // kResume when it wakes (PWRX) or its next event comes
  kInline,    // an inlined call (Slice::inlined): the code entered its inlined range;
              // as kEnd: the code left it (it also ends, with the frame's own reason,
              // when the real frame it lies in ends)
  // kEnd
  kReturn,  // a return instruction (near, or sysret/iret: the kernel stack's top frame)
  kUnwind,  // longjmp, exception unwinding, a signal handler's sigreturn
  kResume,  // "[syscall]"/"[untraced]": tracing resumed; a named gap: decoding resumed
  kClose,   // the stack was cleared: segment end, decode error, exec, exit, a kernel
            // stack's lower frames at sysret/iret, a kernel-only trace's disable
};
// "call", "kernel", ..., "close" ("" for kNone).
const char* ViaName(Via v);

struct Slice {
  enum Kind : uint8_t {
    kBegin,     // a frame starts at `ts`
    kEnd,       // the frame on top ends at `ts`; it began at `begin_ts`
    kComplete,  // a whole span [ts, end_ts], e.g. "[unknown]" from the reset time
    kInstant,   // a zero-length marker at `ts` (decode errors, snapshots, triggers)
    kCounter,   // the counter `name` has `value` from `ts` on (the core clock in MHz)
  };
  Kind kind = kBegin;
  // kBegin/kEnd of a frame whose start was not seen: it starts at the trace
  // start or the last decode error. Inferred kBegin events come after the
  // kEnd of the same frame in the stream (see docs/decoding.md); writers
  // that need begin and end together use kEnd's begin_ts.
  bool inferred = false;
  // A call the compiler inlined (DWARF's DW_TAG_inlined_subroutine), nested
  // in the real frame it lies in: no call or return, it lasts while the
  // executing code is in its address ranges (docs/decoding.md, "Inline
  // frames"). Its name ends in " (inlined)"; `address` is its entry.
  bool inlined = false;
  int32_t pid = 0, tid = 0;
  // The Symbolizer key `address` resolves in (the process's address space
  // at that time; see decode::BranchEvent::space): for source lookups.
  int32_t space = 0;
  uint64_t ts = 0;
  uint64_t begin_ts = 0;              // kEnd
  uint64_t end_ts = 0;                // kComplete
  const std::string* name = nullptr;  // never null; owned by the Symbolizer
  const std::string* dso = nullptr;   // may be null (pseudo frames, markers)
  uint64_t address = 0;               // function entry, 0 for pseudo frames and markers
  uint64_t value = 0;                 // kCounter's value; a "[mark ...]" kInstant's payload
  Via via = Via::kNone;               // kBegin, kEnd
  // A "[C-state Cn]" frame's kBegin and kEnd (docs/decoding.md, "Frequency
  // and power"): `value` is the decode::BranchKind::kPowerEntry's `to` that
  // began it (decode::PowerEntryArgs), and at its end `power_exit` the
  // kPowerExit's `to` | kPowerExitSeen where a PWRX ended it
  // (decode::PowerExitArgs), else 0.
  bool idle = false;
  uint64_t power_exit = 0;
};
inline constexpr uint64_t kPowerExitSeen = uint64_t{1} << 63;

// Receives the model's output. Calls arrive in the order writers must
// preserve: per thread, kBegin/kEnd nest like a stack (inferred begins
// excepted, as above). OnProcess/OnThread come before the thread's slices.
class SliceSink {
 public:
  virtual ~SliceSink() = default;
  virtual void OnProcess(int32_t pid, const std::string& name) = 0;
  virtual void OnThread(int32_t pid, int32_t tid, const std::string& name) = 0;
  virtual void OnSlice(const Slice& s) = 0;
  // After the last slice: flush and close. The first write error wins.
  virtual Result<void> Finish() = 0;
};

// Sends everything to several sinks (the writer and the summary).
class TeeSink : public SliceSink {
 public:
  TeeSink(SliceSink* a, SliceSink* b) : a_(a), b_(b) {}
  void OnProcess(int32_t pid, const std::string& name) override {
    a_->OnProcess(pid, name);
    b_->OnProcess(pid, name);
  }
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override {
    a_->OnThread(pid, tid, name);
    b_->OnThread(pid, tid, name);
  }
  void OnSlice(const Slice& s) override {
    a_->OnSlice(s);
    b_->OnSlice(s);
  }
  Result<void> Finish() override {
    auto ra = a_->Finish();
    auto rb = b_->Finish();
    if (!ra) return ra;
    return rb;
  }

 private:
  SliceSink* a_;
  SliceSink* b_;
};

}  // namespace ptsnap::model
