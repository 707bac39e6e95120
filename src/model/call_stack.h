// Per-thread call-stack reconstruction from decoded branch events, following
// magic-trace's rules (trace_writer.ml) plus longjmp/exception unwinding,
// kernel nesting and pseudo frames. The rules, and how events sharing a
// timestamp are spread, are documented in docs/decoding.md.
//
// The model handles one segment (one PT stream of one thread) at a time:
// BeginSegment, OnEvent..., EndSegment. Every segment starts with an empty
// stack (each snapshot starts clean) and ends with every frame closed.
// Memory is bounded by the stack depth and the number of events that share
// one timestamp (capped), not by trace length.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "decode/pt_decoder.h"
#include "decode/symbols.h"
#include "model/slice.h"

namespace ptsnap::model {

struct ModelStats {
  uint64_t slices = 0;         // frames begun
  uint64_t inferred = 0;       // frames whose start was inferred
  uint64_t unwinds = 0;        // longjmp/exception-style unwinds
  uint64_t decode_errors = 0;  // decode-error markers
  uint64_t overflows = 0;      // overflow markers
};

class CallStackModel {
 public:
  // `symbols` resolves addresses; `sink` receives slices. Both outlive this.
  CallStackModel(decode::Symbolizer* symbols, SliceSink* sink);

  // Kernel-only traces (manifest scope "kernel"): tracing stops (TIP.PGD)
  // at every return to user space and restarts (TIP.PGE) at the next kernel
  // entry, which has nothing to do with the previous one. Then a disable
  // closes every open frame before its [untraced] frame, so each entry
  // starts a fresh stack (magic-trace clears the stack on `tr strt` in
  // kernel-only mode). Off by default: with user code traced, a disable
  // (syscall, fault) is nested inside the user frame that stays open.
  void SetKernelOnly(bool kernel_only) { kernel_only_ = kernel_only; }
  // Inline frames (docs/decoding.md, "Inline frames"): where DWARF says code
  // was inlined, the straight-line code between two events (a decoded
  // block: the previous event's `to` up to this event's `from`) is walked
  // through the Symbolizer's inline runs, and an inlined call is a frame
  // (Slice::inlined) above the real frame it lies in for as long as the
  // code stays in its ranges. On by default.
  void SetInlineFrames(bool on) { inline_frames_ = on; }

  // Starts a segment on thread `tid` of process `pid`, forgetting every
  // thread of the previous segment. Addresses resolve in `pid`'s symbol
  // space until SetSpace.
  void BeginSegment(int32_t pid, int32_t tid);
  // Per-CPU segments hold several threads: events that follow belong to
  // `tid`, whose stack, pending timestamps and reset time continue where
  // its last event left them (possibly on another CPU); the thread that was
  // current keeps its state for later.
  void SwitchThread(int32_t pid, int32_t tid);
  // The Symbolizer key addresses of the current thread resolve in (its
  // process's address space at this time: BranchEvent::space). `exec`: the
  // space is a new program, so every open frame of the thread ends (at the
  // thread's next timestamp: when the new program starts).
  void SetSpace(int32_t space, bool exec = false);
  [[nodiscard]] int32_t pid() const { return pid_; }
  [[nodiscard]] int32_t tid() const { return tid_; }
  [[nodiscard]] int32_t space() const { return space_; }
  // Inlined into the caller's loop for the commonest event, a jump inside
  // the top frame's code (QuietJump; 81% of an interpreter's events): the
  // checks and the time, with no call. Everything else: OnAnyEvent.
  void OnEvent(const decode::BranchEvent& e) {
    if (!TakeQuietJump(e)) OnAnyEvent(e);
  }
  // Closes every open frame of every thread of the segment at its last
  // event time (or `end_time` when later) and writes the deferred inferred
  // begins.
  void EndSegment(uint64_t end_time = 0);
  // When threads exited (PERF_RECORD_EXIT), by tid: a marker later than a
  // thread's exit first ends the thread's open frames at the exit.
  void SetExitTimes(std::map<int32_t, uint64_t> exits) { exits_ = std::move(exits); }
  // A zero-length marker on the current thread (snapshot boundaries).
  void Marker(uint64_t ts, const std::string& name);
  // The current thread was not traced from `ts` on until its next event (a
  // snapshot ring that wrapped between two snapshots): a marker `name` at
  // `ts`, every open frame ends there, and the next event starts a fresh
  // stack whose inferred frames begin at that event, not before the gap.
  void Gap(uint64_t ts, const std::string& name);
  // The same marker on every thread of the segment that has events.
  void MarkerOnEveryThread(uint64_t ts, const std::string& name);

  [[nodiscard]] const ModelStats& stats() const { return stats_; }
  // The last mark (docs/decoding.md, "Marks") thread `tid` wrote in any
  // segment so far, as MarkText gives it ("0x3e7"); empty: none.
  [[nodiscard]] std::string_view LastMark(int32_t tid) const;
  // Interns pseudo-frame and marker names.
  const std::string* Name(std::string_view s) { return symbols_->Intern(s); }

 private:
  struct Frame {
    const std::string* name = nullptr;
    const std::string* dso = nullptr;
    uint64_t fn_start = 0, fn_end = 0;  // [start, end) of the function
    // Code outside the function the frame runs in, entered by a jump that
    // was no tail call (a split-off `.cold` part, code shared with another
    // function): the frame goes on there, [part_start, part_end).
    uint64_t part_start = 0, part_end = 0;
    // The call instruction that began the frame (BranchEvent::from; 0: not
    // begun by a call the trace showed). A return to just past it returns
    // from this frame, whatever lies above it (MatchReturn).
    uint64_t call_site = 0;
    uint64_t address = 0;  // entry address shown (0 for pseudo frames)
    uint32_t function_id = 0;
    int32_t space = 0;    // Symbolizer key it was resolved in
    bool pseudo = false;  // [syscall], [untraced]
    // A named gap: KSYMBOL-named kernel code (a BPF program) whose bytes
    // the trace has not, from the decode error at the branch into it until
    // the thread's next event (tracing picks up again).
    bool gap = false;
    bool ksymbol = false;   // Resolved::ksymbol
    bool known = true;      // false: "[unknown @ ...]" (no symbol covers it)
    bool split = false;     // Resolved::split: a part split off a function
    bool inferred = false;  // begin time is create_time_, written at EndSegment
    // An inlined call of the real frame below it (the same function's range
    // and id, so that the rules below treat it as that frame).
    const decode::InlineScope* scope = nullptr;
    // A signal handler entered where tracing resumed (user-only traces), or
    // what it tail-calls or returns into (the sigreturn trampoline): nested
    // above the interrupted frame, ended when tracing resumes elsewhere.
    bool signal = false;
    bool idle = false;  // "[C-state Cn]" (PowerEvent)
    // idle: the kPowerEntry's `to`, and the kPowerExit's | kPowerExitSeen
    // (Slice::value, Slice::power_exit).
    uint64_t power_entry = 0, power_exit = 0;
    // Whether the function has inlined code (Symbolizer::HasInlines); -1: not asked yet.
    int8_t has_inlines = -1;
    // !known: the stretch of the file around it where every address is
    // unknown code too (Resolved::unknown_lo/hi), in `space`.
    uint64_t unknown_lo = 0, unknown_hi = 0;
  };
  // One output operation waiting for its final timestamp.
  // kCounter: the frame's name is the counter's, its `address` the value.
  enum class OpKind : uint8_t { kBegin, kEnd, kUnknown, kInstant, kInferred, kCounter };
  struct Op {
    OpKind kind;
    Frame frame;
    Via via = Via::kNone;  // kBegin: how the frame began; kEnd: how it ended
  };
  // Written at the end of the segment, at create_time_: inferred frames and
  // "[unknown]" spans (complete, ending at end_ts).
  struct Deferred {
    Frame frame;
    bool complete = false;
    uint64_t end_ts = 0;
  };

  Frame Resolve(uint64_t addr);
  Frame Pseudo(const std::string* name);
  // OnEvent's full path: every event TakeQuietJump does not take.
  void OnAnyEvent(const decode::BranchEvent& e);
  // A jump inside the top frame's code (most events of an interpreter or a
  // JIT: 81% of a CPython trace's): it changes nothing but the time. The
  // top frame is a real frame (no inlined frame above it, no pseudo frame,
  // no gap), holds the destination (or the destination is in its file's
  // unknown stretch), and the block before the jump had no inlined code to
  // follow (InlineBlock would return at once).
  [[nodiscard]] bool QuietJump(const decode::BranchEvent& e) const {
    if (!started_ || stack_.empty()) return false;
    const Frame& top = stack_.back();
    if (top.scope != nullptr || top.pseudo || top.gap) return false;
    if (!Contains(top, e.to) && !InUnknownStretch(top, e.to)) return false;
    return !InlineStep(e) || !top.known || !InHome(top, block_start_) || !InHome(top, e.from) ||
           top.has_inlines == 0;
  }
  // OnEvent's step for a QuietJump, and all the full path would do for it.
  // False: not such a jump, nothing done.
  bool TakeQuietJump(const decode::BranchEvent& e) {
    if (e.kind != decode::BranchKind::kJump || !QuietJump(e)) return false;
    block_start_ = e.to;
    SetTime(e.time);
    return true;
  }
  // Whether the block that ended with `e` is one InlineBlock follows
  // (OnEvent's step, and QuietJump's test of it).
  [[nodiscard]] bool InlineStep(const decode::BranchEvent& e) const {
    return inline_frames_ && started_ && e.from != 0 && block_start_ != 0 && block_start_ <= e.from;
  }
  // Whether the frame runs `addr`: its function's code or the part it
  // jumped into.
  static bool Contains(const Frame& f, uint64_t addr) {
    return (addr >= f.fn_start && addr < f.fn_end) || (addr >= f.part_start && addr < f.part_end);
  }
  // Whether `addr` is the frame's own function's code (what its inline
  // ranges describe).
  static bool InHome(const Frame& f, uint64_t addr) {
    return addr >= f.fn_start && addr < f.fn_end;
  }
  // Whether `addr` (in the current space) is unknown code of the same file
  // as the unknown frame `f`, without resolving it: what Resolve would say.
  bool InUnknownStretch(const Frame& f, uint64_t addr) const {
    return !f.pseudo && !f.known && f.space == space_ && addr >= f.unknown_lo &&
           addr < f.unknown_hi && f.dso != nullptr;
  }

  // magic-trace's primitives.
  void Call(const Frame& f, Via via);
  void Ret(Via via);
  void CheckCurrent(uint64_t dst);
  void PushInferred(const Frame& f);
  void ClearStack();                            // ends every frame of the current stack (kClose)
  void ClearAllStacks();                        // the current stack and every saved one
  void UntracedFrame(const std::string* name);  // [syscall]/[untraced] at the disable
  void ResetAll();                              // end_of_thread: close everything, new create time
  void NamedGap(uint64_t target);               // after a decode error at a branch to `target`
  bool UnwindTo(uint64_t dst);                  // kUnwind
  // The frame a return to `dst` returns from, as perf's thread stack finds
  // it: the topmost whose call site lies just before `dst`. Its index + 1;
  // 0 when none does.
  size_t MatchReturn(uint64_t dst) const;
  // Ends every frame above stack_[index] and that frame (a matched return).
  void ReturnFrom(size_t index);
  // A jump into `f` that is no tail call: the top frame runs on in it.
  void EnterPart(const Frame& f);
  bool SameFunction(const Frame& top, uint64_t addr);
  void Resume(uint64_t dst);  // tracing resumed at dst with the stack non-empty
  // The block [start, end] ran before the event at `end_time`: its inline
  // runs, each at its share of the time (by instructions, else code bytes).
  void InlineBlock(uint64_t start, uint64_t end, uint64_t end_time);
  // Makes the inlined frames above stack_[real - 1] the chain ending in `leaf`.
  void SyncInline(size_t real, const decode::InlineScope* leaf, int64_t bias);

  // Timestamps: queue ops at `now_`, spread them when time advances.
  // Inline: every QuietJump sets the time.
  void SetTime(uint64_t t) {
    if (!started_) {
      started_ = true;
      create_time_ = now_ = pending_time_ = t;
    }
    if (t < now_) t = now_;
    // magic-trace's "#155 hack": nothing real happens exactly at the reset
    // time, so inferred frames (which begin there) always enclose what follows.
    if (t == create_time_ && t != UINT64_MAX) t = create_time_ + 1;
    if (!pending_.empty() && t > pending_time_) Flush(t);
    now_ = t;
  }
  void Queue(OpKind kind, const Frame& f, Via via = Via::kNone);
  bool PowerEvent(const decode::BranchEvent& e);  // kCbr, kPowerEntry, kPowerExit: handled
  void Flush(uint64_t next_time);
  void Emit(const Op& op, uint64_t ts);
  Slice SliceOf(const Frame& f, uint64_t ts) const;  // on the current thread, kind unset

  // One thread's state, while another thread is current.
  struct ThreadState {
    int32_t pid = 0, space = 0;
    bool started = false;
    uint64_t now = 0, create_time = 0, pending_time = 0, last_ts = 0;
    bool last_was_begin = false;
    std::vector<Frame> stack;
    std::vector<std::vector<Frame>> inactive;
    std::deque<Deferred> deferred;
    std::vector<Op> pending;
    std::vector<uint64_t> open_begins;
    uint64_t block_start = 0;
  };
  void SaveThread();                  // the current thread's state into saved_
  void LoadThread(int32_t tid);       // from saved_ (or a fresh state)
  void EndThread(uint64_t end_time);  // closes the current thread

  decode::Symbolizer* symbols_;
  SliceSink* sink_;
  ModelStats stats_;
  int32_t pid_ = 0, tid_ = 0, space_ = 0;
  std::map<int32_t, ThreadState> saved_;  // by tid: the segment's other threads
  bool kernel_only_ = false;
  bool inline_frames_ = true;
  // Where the code the next event ends started (the last event's `to`); 0: unknown.
  uint64_t block_start_ = 0;
  std::vector<const decode::InlineScope*> chain_;    // SyncInline's scratch
  std::map<int32_t, uint64_t> exits_;                // SetExitTimes
  std::map<int32_t, const std::string*> last_mark_;  // by tid: "[mark ...]"
  std::map<int32_t, uint64_t> cbr_;                  // by tid: the last CBR ratio shown
  bool started_ = false;                             // any event seen in this segment
  uint64_t now_ = 0;                                 // current raw time
  uint64_t create_time_ = 0;
  std::vector<Frame> stack_;
  std::vector<std::vector<Frame>> inactive_;  // stacks saved by syscalls/interrupts
  std::deque<Deferred> deferred_;             // outermost first
  // Pending ops at pending_time_ and the begin times of emitted open frames.
  std::vector<Op> pending_;
  uint64_t pending_time_ = 0;
  std::vector<uint64_t> open_begins_;
  // The last timestamp written on this thread (Emit keeps them rising; 0
  // before the first) and whether it was a begin's.
  uint64_t last_ts_ = 0;
  bool last_was_begin_ = false;
  const std::string* syscall_name_;
  const std::string* untraced_name_;
  const std::string* unknown_name_;
};

}  // namespace ptsnap::model
