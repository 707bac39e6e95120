#include "model/call_stack.h"

#include <algorithm>

#include "decode/interpolate.h"

namespace ptsnap::model {

using decode::BranchKind;

const char* ViaName(Via v) {
  switch (v) {
    case Via::kNone: return "";
    case Via::kCall: return "call";
    case Via::kKernel: return "kernel";
    case Via::kJump: return "jump";
    case Via::kStart: return "start";
    case Via::kSignal: return "signal";
    case Via::kUntraced: return "untraced";
    case Via::kIdle: return "idle";
    case Via::kGap: return "gap";
    case Via::kInferred: return "inferred";
    case Via::kInline: return "inline";
    case Via::kReturn: return "return";
    case Via::kUnwind: return "unwind";
    case Via::kResume: return "resume";
    case Via::kClose: return "close";
  }
  return "";
}

namespace {
// Ops sharing one timestamp are held until time advances; past this many
// they are written at that timestamp, so memory stays bounded on traces
// without timing packets.
constexpr size_t kMaxPending = 1 << 16;
// The longest x86 instruction: a return lands at most this far past its call.
constexpr uint64_t kMaxInsnLength = 15;
}  // namespace

CallStackModel::CallStackModel(decode::Symbolizer* symbols, SliceSink* sink)
    : symbols_(symbols), sink_(sink) {
  syscall_name_ = symbols_->Intern("[syscall]");
  untraced_name_ = symbols_->Intern("[untraced]");
  unknown_name_ = symbols_->Intern("[unknown]");
}

CallStackModel::Frame CallStackModel::Resolve(uint64_t addr) {
  decode::Resolved r = symbols_->Resolve(space_, addr, now_);
  Frame f;
  f.space = space_;
  f.name = r.name;
  f.dso = r.dso;
  f.fn_start = r.start;
  f.fn_end = r.end;
  f.address = r.start;
  f.function_id = r.function_id;
  f.known = r.known;
  f.split = r.split;
  f.ksymbol = r.ksymbol;
  f.unknown_lo = r.unknown_lo;
  f.unknown_hi = r.unknown_hi;
  return f;
}

CallStackModel::Frame CallStackModel::Pseudo(const std::string* name) {
  Frame f;
  f.name = name;
  f.pseudo = true;
  return f;
}

void CallStackModel::BeginSegment(int32_t pid, int32_t tid) {
  pid_ = pid;
  tid_ = tid;
  space_ = pid;
  saved_.clear();
  started_ = false;
  now_ = create_time_ = pending_time_ = 0;
  last_ts_ = 0;
  last_was_begin_ = false;
  stack_.clear();
  inactive_.clear();
  deferred_.clear();
  pending_.clear();
  open_begins_.clear();
  block_start_ = 0;
}

void CallStackModel::SaveThread() {
  if (!started_) return;  // nothing happened on it yet
  // Ops queued at its last timestamp take that time: the thread does not
  // run again until another stretch, and the time between is not theirs.
  if (!pending_.empty()) Flush(now_);
  ThreadState& t = saved_[tid_];
  t.pid = pid_;
  t.space = space_;
  t.started = started_;
  t.now = now_;
  t.create_time = create_time_;
  t.pending_time = pending_time_;
  t.last_ts = last_ts_;
  t.last_was_begin = last_was_begin_;
  t.stack = std::move(stack_);
  t.inactive = std::move(inactive_);
  t.deferred = std::move(deferred_);
  t.pending = std::move(pending_);
  t.open_begins = std::move(open_begins_);
  t.block_start = block_start_;
}

void CallStackModel::LoadThread(int32_t tid) {
  tid_ = tid;
  stack_.clear();
  inactive_.clear();
  deferred_.clear();
  pending_.clear();
  open_begins_.clear();
  block_start_ = 0;
  auto it = saved_.find(tid);
  if (it == saved_.end()) {
    started_ = false;
    now_ = create_time_ = pending_time_ = 0;
    last_ts_ = 0;
    last_was_begin_ = false;
    return;
  }
  ThreadState& t = it->second;
  pid_ = t.pid;
  space_ = t.space;
  started_ = t.started;
  now_ = t.now;
  create_time_ = t.create_time;
  pending_time_ = t.pending_time;
  last_ts_ = t.last_ts;
  last_was_begin_ = t.last_was_begin;
  stack_ = std::move(t.stack);
  inactive_ = std::move(t.inactive);
  deferred_ = std::move(t.deferred);
  pending_ = std::move(t.pending);
  open_begins_ = std::move(t.open_begins);
  block_start_ = t.block_start;
  saved_.erase(it);
}

void CallStackModel::SwitchThread(int32_t pid, int32_t tid) {
  if (tid == tid_ && pid == pid_) return;
  SaveThread();
  LoadThread(tid);
  if (!started_) space_ = pid;
  pid_ = pid;
}

void CallStackModel::SetSpace(int32_t space, bool exec) {
  if (exec && started_) ClearAllStacks();
  space_ = space;
}

void CallStackModel::Queue(OpKind kind, const Frame& f, Via via) {
  if (pending_.empty()) pending_time_ = now_;
  // Filled in place: a temporary Op, built on the stack by stores of
  // several widths and copied by 16-byte loads, stalled every load on
  // store forwarding (60% of this function's samples on a fib trace).
  Op& op = pending_.emplace_back();
  op.kind = kind;
  op.frame = f;
  op.via = via;
  if (pending_.size() >= kMaxPending) Flush(pending_time_);
}

// magic-trace's interpolation (trace_writer.ml `flush`): the interval up to
// the next timestamp is shared evenly among the calls of the batch; returns
// and markers take the current offset and consume no time.
void CallStackModel::Flush(uint64_t next_time) {
  uint64_t total = next_time > pending_time_ ? next_time - pending_time_ : 0;
  uint64_t count = 0;
  for (const Op& op : pending_) count += op.kind == OpKind::kBegin;
  uint64_t offset = 0, consumed = 0;
  for (const Op& op : pending_) {
    uint64_t ts = pending_time_ + offset;
    if (op.kind == OpKind::kBegin) {
      offset += (total - offset) / (count - consumed);
      ++consumed;
    }
    Emit(op, ts);
  }
  pending_.clear();
}

Slice CallStackModel::SliceOf(const Frame& f, uint64_t ts) const {
  Slice s;
  s.pid = pid_;
  s.tid = tid_;
  s.space = f.space;
  s.ts = ts;
  s.name = f.name;
  s.dso = f.dso;
  s.address = f.address;
  s.inlined = f.scope != nullptr;
  if (f.idle) {
    s.idle = true;
    s.value = f.power_entry;
    s.power_exit = f.power_exit;
  }
  return s;
}

void CallStackModel::Emit(const Op& op, uint64_t ts) {
  // Outputs a viewer cannot misread (docs/decoding.md, "Timestamps"): on a
  // thread, whatever follows a begin lies at least 1 ns after it, and
  // nothing lies before the op before it. So no slice has zero length, a
  // child begins after its parent, and slices that share a timestamp in the
  // trace still nest by time interval exactly as they nest here.
  if (op.kind != OpKind::kInferred) {
    // Saturating: a corrupt trace's times can reach UINT64_MAX (the
    // decoder saturates its extrapolation), and wrapping to 0 would end a
    // frame before it began.
    ts = std::max(ts, last_was_begin_ && last_ts_ != UINT64_MAX ? last_ts_ + 1 : last_ts_);
    last_ts_ = ts;
    last_was_begin_ = op.kind == OpKind::kBegin;
  }
  Slice s = SliceOf(op.frame, ts);
  switch (op.kind) {
    case OpKind::kBegin:
      s.kind = Slice::kBegin;
      s.via = op.via;
      open_begins_.push_back(ts);
      sink_->OnSlice(s);
      break;
    case OpKind::kEnd:
      s.kind = Slice::kEnd;
      s.via = op.via;
      if (op.frame.inferred) {
        s.inferred = true;
        s.begin_ts = create_time_;
      } else if (!open_begins_.empty()) {
        s.begin_ts = open_begins_.back();
        open_begins_.pop_back();
      }
      sink_->OnSlice(s);
      break;
    case OpKind::kInstant:
      s.kind = Slice::kInstant;
      s.value = op.frame.address;  // a mark's payload (0 for other markers)
      s.address = 0;
      sink_->OnSlice(s);
      break;
    case OpKind::kCounter:
      s.kind = Slice::kCounter;
      s.value = op.frame.address;
      s.address = 0;
      sink_->OnSlice(s);
      break;
    case OpKind::kUnknown: deferred_.push_front(Deferred{op.frame, true, ts}); break;
    case OpKind::kInferred: deferred_.push_front(Deferred{op.frame, false, 0}); break;
  }
}

void CallStackModel::Call(const Frame& f, Via via) {
  stack_.push_back(f);
  stats_.slices++;
  Queue(OpKind::kBegin, f, via);
}

void CallStackModel::PushInferred(const Frame& f) {
  Frame g = f;
  g.inferred = true;
  stack_.push_back(g);
  stats_.slices++;
  stats_.inferred++;
  Queue(OpKind::kInferred, g);
}

void CallStackModel::Ret(Via via) {
  if (!stack_.empty()) {
    // Inlined frames end with the real frame they lie in.
    while (stack_.size() > 1 && stack_.back().scope != nullptr) {
      Frame f = stack_.back();
      stack_.pop_back();
      Queue(OpKind::kEnd, f, via);
    }
    Frame f = stack_.back();
    stack_.pop_back();
    Queue(OpKind::kEnd, f, via);
  } else {
    // A return with no known frame: "[unknown]" from the reset time to now.
    Queue(OpKind::kUnknown, Pseudo(unknown_name_));
  }
}

void CallStackModel::CheckCurrent(uint64_t dst) {
  // After every operation the function under the pc is the top frame.
  if (!stack_.empty() && Contains(stack_.back(), dst)) return;
  // Still in the same file's unknown code (below): one frame.
  if (!stack_.empty() && InUnknownStretch(stack_.back(), dst)) return;
  Frame f = Resolve(dst);
  if (stack_.empty()) {
    PushInferred(f);
  } else if (!stack_.back().pseudo && !stack_.back().known && !f.known && f.dso != nullptr &&
             stack_.back().dso == f.dso) {
    return;  // still in the same file's unknown code: one frame
  } else if (stack_.back().function_id != f.function_id || stack_.back().pseudo) {
    f.signal = stack_.back().signal;  // a handler's tail call stays its frame
    // A tail-called function returns where the frame it replaces would have.
    f.call_site = stack_.back().call_site;
    Ret(Via::kJump);  // tail call, PLT jump, return past the known stack: adjacent spans
    Call(f, Via::kJump);
  }
}

bool CallStackModel::SameFunction(const Frame& top, uint64_t addr) {
  if (top.pseudo) return false;
  if (Contains(top, addr)) return true;
  Frame f = Resolve(addr);
  if (!top.known && !f.known) return f.dso != nullptr && top.dso == f.dso;
  return top.function_id == f.function_id;
}

// Tracing resumed (TIP.PGE) at `dst` after an [untraced]/[syscall] span,
// with the interrupted stack below. In user-only traces that is where a
// signal shows: tracing stops in the interrupted function (or at its
// syscall), resumes at the handler's entry, the handler returns into the
// sigreturn trampoline, whose rt_sigreturn resumes at the interrupted IP.
void CallStackModel::Resume(uint64_t dst) {
  // Back from a handler (sigreturn): its frames end, the interrupted
  // function continues with its own frame.
  while (stack_.size() > 1 && stack_.back().signal && !SameFunction(stack_.back(), dst)) {
    Ret(Via::kUnwind);
  }
  if (SameFunction(stack_.back(), dst)) return;
  // Back in a caller after untraced code (a callee outside --filter's
  // ranges): the frames above it returned while tracing was off.
  if (stack_.size() > 1 && UnwindTo(dst)) return;
  Frame f = Resolve(dst);
  if (dst != f.fn_start) return;  // mid-function: the next block boundary switches frames
  // A handler's entry: its own frame, nested above the interrupted one.
  f.signal = true;
  Call(f, Via::kSignal);
}

size_t CallStackModel::MatchReturn(uint64_t dst) const {
  for (size_t i = stack_.size(); i-- > 0;) {
    const Frame& f = stack_[i];
    if (f.call_site != 0 && dst > f.call_site && dst - f.call_site <= kMaxInsnLength) return i + 1;
  }
  return 0;
}

void CallStackModel::ReturnFrom(size_t index) {
  bool skipped = false;
  while (stack_.size() > index) {
    // Ret ends the top real frame with the inlined frames above it.
    size_t top_real = stack_.size() - 1;
    while (top_real > 0 && stack_[top_real].scope != nullptr) --top_real;
    const bool returned = top_real <= index;
    skipped = skipped || !returned;
    Ret(returned ? Via::kReturn : Via::kUnwind);
  }
  if (skipped) stats_.unwinds++;
}

void CallStackModel::EnterPart(const Frame& f) {
  Frame& top = stack_.back();
  top.part_start = f.fn_start;
  top.part_end = f.fn_end;
}

bool CallStackModel::UnwindTo(uint64_t dst) {
  // longjmp / C++ exceptions: the landing address is inside a frame below
  // the top; everything above it ends now.
  for (size_t i = stack_.size(); i-- > 1;) {
    const Frame& f = stack_[i - 1];
    if (!f.pseudo && Contains(f, dst)) {
      while (stack_.size() > i) Ret(Via::kUnwind);
      stats_.unwinds++;
      return true;
    }
  }
  return false;
}

void CallStackModel::ClearStack() {
  while (!stack_.empty()) Ret(Via::kClose);
}

void CallStackModel::ClearAllStacks() {
  ClearStack();
  while (!inactive_.empty()) {
    stack_ = std::move(inactive_.back());
    inactive_.pop_back();
    ClearStack();
  }
}

void CallStackModel::ResetAll() {
  ClearAllStacks();
  Flush(now_);
  for (const Deferred& d : deferred_) {
    Slice s = SliceOf(d.frame, create_time_);
    s.inferred = true;
    if (d.complete) {
      s.kind = Slice::kComplete;
      s.end_ts = d.end_ts;
    } else {
      s.kind = Slice::kBegin;
      s.via = Via::kInferred;
    }
    sink_->OnSlice(s);
  }
  deferred_.clear();
  open_begins_.clear();
  create_time_ = now_;
}

// The time until the next timestamp is spent untraced, not in the calls
// queued at this one: they are written now, and the pseudo frame, first of
// a new batch, begins at the disable's own time.
void CallStackModel::UntracedFrame(const std::string* name) {
  if (!pending_.empty()) Flush(pending_time_);
  Call(Pseudo(name), Via::kUntraced);
}

// The decoder could not read the code at `target` (the branch into it is
// the error's `from`). Where a KSYMBOL names that code at this time, the
// time until decoding resumes was spent there (docs/decoding.md, "Kernel
// JIT (eBPF)"): a frame with its name, dso and entry, as a call would
// show it, marked as a gap.
void CallStackModel::NamedGap(uint64_t target) {
  Frame f = Resolve(target);
  if (!f.ksymbol) return;
  f.gap = true;
  Call(f, Via::kGap);
}

void CallStackModel::SyncInline(size_t real, const decode::InlineScope* leaf, int64_t bias) {
  chain_.clear();
  for (const decode::InlineScope* s = leaf; s != nullptr; s = s->parent) chain_.push_back(s);
  std::reverse(chain_.begin(), chain_.end());
  size_t keep = 0;
  while (real + keep < stack_.size() && keep < chain_.size() &&
         stack_[real + keep].scope == chain_[keep]) {
    ++keep;
  }
  while (stack_.size() > real + keep) {
    Frame f = stack_.back();
    stack_.pop_back();
    Queue(OpKind::kEnd, f, Via::kInline);
  }
  for (size_t i = keep; i < chain_.size(); ++i) {
    Frame f = stack_[real - 1];
    f.scope = chain_[i];
    f.name = chain_[i]->display;
    f.address = chain_[i]->entry + static_cast<uint64_t>(bias);
    f.inferred = false;
    f.call_site = 0;  // returns match the real frame below
    Call(f, Via::kInline);
  }
}

// Time inside a block is not measured: the block ran between the previous
// event's time and this one's, and an inline run starts at its share of
// that interval by the block's instructions retired before it (by code
// bytes where the code could not be counted): docs/decoding.md, "Inline
// frames".
void CallStackModel::InlineBlock(uint64_t start, uint64_t end, uint64_t end_time) {
  size_t real = stack_.size();
  while (real > 0 && stack_[real - 1].scope != nullptr) --real;
  if (real == 0) return;
  Frame& r = stack_[real - 1];
  if (r.pseudo || !r.known || !InHome(r, start) || !InHome(r, end)) return;
  // Most functions have no inlined code: asked once per frame, not per block.
  if (r.has_inlines < 0) r.has_inlines = symbols_->HasInlines(r.space, r.fn_start) ? 1 : 0;
  const decode::InlineRuns* runs =
      r.has_inlines != 0 ? symbols_->Inlines(r.space, r.fn_start, start, end) : nullptr;
  if (runs == nullptr) {
    if (stack_.size() > real) SyncInline(real, nullptr, 0);
    return;
  }
  const uint64_t t0 = now_;
  const uint64_t span = end_time > t0 ? end_time - t0 : 0;
  auto share = [&](const decode::InlineRun& run) -> uint64_t {
    if (runs->insns != 0) return decode::MulDiv(span, run.insn, runs->insns);
    return static_cast<uint64_t>(static_cast<double>(span) * static_cast<double>(run.addr - start) /
                                 static_cast<double>(end - start + 1));
  };
  for (const decode::InlineRun& run : runs->runs) {
    if (run.addr > start && span != 0) SetTime(t0 + share(run));
    SyncInline(real, run.leaf, runs->bias);
  }
}

void CallStackModel::OnAnyEvent(const decode::BranchEvent& e) {
  if (e.kind == BranchKind::kMark) {  // no block boundary: inline frames step at the next event
    SetTime(e.time);
    const std::string* name = Name("[mark " + decode::MarkText(e.to) + "]");
    last_mark_[tid_] = name;
    Frame f = Pseudo(name);
    f.address = e.to;  // the payload: Slice::value
    Queue(OpKind::kInstant, f);
    return;
  }
  if (PowerEvent(e)) return;
  if (InlineStep(e)) InlineBlock(block_start_, e.from, e.time);
  switch (e.kind) {
    case BranchKind::kDisable:
    case BranchKind::kStop:
    case BranchKind::kError: block_start_ = 0; break;
    default: block_start_ = e.to; break;
  }
  SetTime(e.time);
  if (!stack_.empty() && stack_.back().idle) Ret(Via::kResume);  // awake: it runs again
  if (!stack_.empty() && stack_.back().gap) {
    // Decoding picked up again (at a sync point): the named gap ends at
    // the first event after it, and frames inferred from here on begin
    // here, after the gap, not at the error.
    Ret(Via::kResume);
    create_time_ = now_;
  }
  // (ptsnap) A call or return with nothing on the stack (the segment's
  // first branch) leaves the function its source lies in: that frame is
  // inferred first. For a return, magic-trace writes "[unknown]" instead;
  // named, a segment that starts with a return shows what one that starts
  // with a jump shows, and what perf shows.
  if ((e.kind == BranchKind::kCall || e.kind == BranchKind::kReturn) && stack_.empty() &&
      e.from != 0) {
    PushInferred(Resolve(e.from));
  }
  switch (e.kind) {
    case BranchKind::kCall: {
      Frame f = Resolve(e.to);
      f.call_site = e.from;
      Call(f, Via::kCall);
      break;
    }
    case BranchKind::kReturn: {
      // To just past a call on the stack: that frame returns, and any frame
      // above it ended unseen (perf's thread stack does the same), so one
      // misread jump cannot shift every later return.
      if (size_t i = MatchReturn(e.to); i != 0) {
        ReturnFrom(i - 1);
        CheckCurrent(e.to);
        break;
      }
      bool from_signal = !stack_.empty() && stack_.back().signal;
      Ret(Via::kReturn);
      if (!stack_.empty() && Contains(stack_.back(), e.to)) break;
      if (from_signal && !stack_.empty()) {
        if (UnwindTo(e.to)) break;
        // A handler returns into the sigreturn trampoline (__restore_rt),
        // not into the interrupted function: the trampoline is the
        // handler's too, nested above the interrupted frame.
        Frame f = Resolve(e.to);
        f.signal = true;
        Call(f, Via::kSignal);
        break;
      }
      if (stack_.size() > 1 && UnwindTo(e.to)) break;  // exception unwinding returns
      CheckCurrent(e.to);
      break;
    }
    case BranchKind::kJump: {
      if (!stack_.empty() && Contains(stack_.back(), e.to)) break;
      // Unknown code to unknown code of the same file (below), unresolved.
      if (!stack_.empty() && InUnknownStretch(stack_.back(), e.to)) break;
      Frame f = Resolve(e.to);
      if (!stack_.empty() && !stack_.back().pseudo && stack_.back().function_id == f.function_id) {
        break;
      }
      // Code without symbols resolves per address; a jump from unknown code
      // to unknown code of the same file stays in the same frame.
      if (!stack_.empty() && !stack_.back().pseudo && !stack_.back().known && !f.known &&
          f.dso != nullptr && stack_.back().dso == f.dso) {
        break;
      }
      // A jump into a split-off part is no tail call: the frame runs on
      // there. Into the middle of a caller's function it is a longjmp; into
      // the middle of another function (shared code: glibc's mempcpy jumps
      // into memmove's body) a tail call, as perf names that code, with or
      // without symbols (docs/decoding.md, "Call stacks on optimized
      // code"). Only from the top frame's own code: where the jump's source
      // is not in it, the top frame is already stale, and the target is
      // where the code runs.
      if (!stack_.empty() && !stack_.back().pseudo && f.known && f.split && e.from != 0 &&
          Contains(stack_.back(), e.from)) {
        EnterPart(f);
        break;
      }
      if (e.to != f.fn_start && stack_.size() > 1 && UnwindTo(e.to)) break;
      CheckCurrent(e.to);
      break;
    }
    case BranchKind::kInterrupt:
      // An asynchronous entry (fault, interrupt) happens at its own time,
      // which libipt knows exactly: calls queued before it at the same
      // timestamp are written there without taking any of the time after,
      // and the handler's frame begins at the event's time, first of a new
      // batch (as a disable's pseudo frame).
      if (!pending_.empty()) Flush(pending_time_);
      [[fallthrough]];
    case BranchKind::kFarCall:
      // A syscall or interrupt runs on a new stack above the user stack.
      inactive_.push_back(std::move(stack_));
      stack_.clear();
      Call(Resolve(e.to), Via::kKernel);
      break;
    case BranchKind::kFarReturn:
      // sysret/iret returns from the top frame; the rest of the kernel
      // stack ends with it.
      if (!stack_.empty()) Ret(Via::kReturn);
      ClearStack();
      if (!inactive_.empty()) {
        stack_ = std::move(inactive_.back());
        inactive_.pop_back();
      } else {
        CheckCurrent(e.to);
      }
      break;
    case BranchKind::kDisable:
      // Kernel-only: the return to user space ends this kernel entry.
      if (kernel_only_) ClearAllStacks();
      UntracedFrame(e.syscall ? syscall_name_ : untraced_name_);
      break;
    case BranchKind::kStop: UntracedFrame(untraced_name_); break;
    case BranchKind::kEnable:
      if (!stack_.empty() && stack_.back().pseudo) {
        Ret(Via::kResume);
        if (stack_.empty() && e.to != 0) {
          Call(Resolve(e.to), Via::kStart);
        } else if (e.to != 0) {
          Resume(e.to);
        }
      } else if (stack_.empty()) {
        if (e.to != 0) Call(Resolve(e.to), Via::kStart);
      } else if (e.to != 0) {
        CheckCurrent(e.to);
      }
      break;
    case BranchKind::kOverflow:
      stats_.overflows++;
      Queue(OpKind::kInstant, Pseudo(Name("[overflow: trace data lost]")));
      ResetAll();
      break;
    case BranchKind::kError:
      stats_.decode_errors++;
      Queue(OpKind::kInstant, Pseudo(Name("[decode error: " + decode::ErrorMessage(e) + "]")));
      ResetAll();
      if (e.to != 0) NamedGap(e.to);
      break;
    case BranchKind::kMark:  // above
    case BranchKind::kCbr:
    case BranchKind::kPowerEntry:
    case BranchKind::kPowerExit: break;
  }
}

// Frequency and power (docs/decoding.md, "Frequency and power"): no frame
// changes, no block boundary.
bool CallStackModel::PowerEvent(const decode::BranchEvent& e) {
  switch (e.kind) {
    case BranchKind::kCbr: {
      SetTime(e.time);
      auto [it, added] = cbr_.try_emplace(tid_, e.to);
      if (!added && it->second == e.to) return true;  // every PSB+ repeats it
      it->second = e.to;
      Frame f = Pseudo(Name("[core clock MHz]"));
      f.address = e.to * 100;  // the bus clock of every Core since Sandy Bridge: 100 MHz
      Queue(OpKind::kCounter, f);
      return true;
    }
    case BranchKind::kPowerEntry:
      SetTime(e.time);
      if (stack_.empty() || !stack_.back().idle) {
        if (!pending_.empty()) Flush(pending_time_);
        Frame f = Pseudo(Name("[C-state " + decode::CStateName(e.to) + "]"));
        f.idle = true;
        f.power_entry = e.to;
        Call(f, Via::kIdle);
      }
      return true;
    case BranchKind::kPowerExit:
      SetTime(e.time);
      if (!stack_.empty() && stack_.back().idle) {
        stack_.back().power_exit = e.to | kPowerExitSeen;
        Ret(Via::kResume);
      }
      return true;
    default: return false;
  }
}

std::string_view CallStackModel::LastMark(int32_t tid) const {
  auto it = last_mark_.find(tid);
  if (it == last_mark_.end()) return {};
  return std::string_view(*it->second).substr(6, it->second->size() - 7);  // "[mark " ... "]"
}

void CallStackModel::Marker(uint64_t ts, const std::string& name) {
  // A thread that exited before the marker (a snapshot taken later, for
  // the other threads): its frames, the exit's [syscall] among them, end
  // at its exit.
  if (auto e = exits_.find(tid_); started_ && e != exits_.end() && e->second < ts) {
    if (e->second > now_) SetTime(e->second);
    ResetAll();
  }
  SetTime(ts);
  Queue(OpKind::kInstant, Pseudo(Name(name)));
}

void CallStackModel::Gap(uint64_t ts, const std::string& name) {
  if (!started_) return;
  Marker(std::max(ts, now_), name);
  EndThread(0);
}

void CallStackModel::MarkerOnEveryThread(uint64_t ts, const std::string& name) {
  int32_t pid = pid_, tid = tid_;
  std::vector<std::pair<int32_t, int32_t>> threads;
  if (started_) threads.emplace_back(pid_, tid_);
  for (const auto& [t, st] : saved_) threads.emplace_back(st.pid, t);
  for (const auto& [p, t] : threads) {
    SwitchThread(p, t);
    Marker(ts, name);
  }
  SwitchThread(pid, tid);
}

void CallStackModel::EndThread(uint64_t end_time) {
  if (!started_) return;
  if (end_time > now_) SetTime(end_time);
  ResetAll();
  started_ = false;
}

void CallStackModel::EndSegment(uint64_t end_time) {
  EndThread(end_time);
  while (!saved_.empty()) {
    auto it = saved_.begin();
    int32_t pid = it->second.pid;
    LoadThread(it->first);
    pid_ = pid;
    EndThread(end_time);
  }
}

}  // namespace ptsnap::model
