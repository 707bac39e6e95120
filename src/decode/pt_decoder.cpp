#include "decode/pt_decoder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <functional>
#include <queue>
#include <utility>
#include <variant>

#include "base/check.h"
#include "base/file_util.h"
#include "decode/classify.h"
#include "decode/event_times.h"
#include "decode/libipt_engine.h"
#include "elf/elf_file.h"
#include "flow/flow_decoder.h"
#include "flow/libipt_config.h"
#include "trace/owned_file.h"
#include "trace/trace_dir.h"

namespace ptsnap::decode {

PtDecoder::PtDecoder(const std::filesystem::path& dir, const trace::Manifest& m)
    : dir_(dir),
      manifest_(m),
      iscache_(NewIscache("ptsnap")),
      views_(iscache_.get()),
      kernel_(iscache_.get(), &views_),
      spaces_(dir_, manifest_.binaries, iscache_.get(), kernel_, symbolizer_, stats_, &views_) {}

PtDecoder::~PtDecoder() = default;

uint64_t PtDecoder::MtcPeriodNs() const {
  const trace::CpuId& c = manifest_.cpu;
  if (!manifest_.pt.mtc || c.cpuid_15_eax == 0 || c.cpuid_15_ebx == 0) return 0;
  const uint64_t tsc =
      (uint64_t{c.cpuid_15_ebx} << std::min<uint32_t>(manifest_.pt.mtc_freq, 15)) / c.cpuid_15_eax;
  return TscToNs(tsc) - TscToNs(0);
}

uint64_t PtDecoder::TscToNs(uint64_t tsc) const {
  if (manifest_.time_conv.time_mult == 0) return tsc;  // no conversion recorded: raw TSC
  return trace::TscToPerfTime(manifest_.time_conv, tsc);
}

Result<std::unique_ptr<PtDecoder>> PtDecoder::Create(
    const std::filesystem::path& dir, const trace::Manifest& manifest,
    const std::vector<trace::Record>& records, std::vector<std::filesystem::path> debug_dirs) {
  std::unique_ptr<PtDecoder> d(new PtDecoder(dir, manifest));
  if (!debug_dirs.empty()) {
    debug_dirs.push_back(elf::kSystemDebugDir);
    d->symbolizer_.SetDebugDirs(std::move(debug_dirs));
  }
  d->kernel_.Load(dir, manifest, d->symbolizer_, d->stats_);
  d->spaces_.LoadJit(manifest);
  // Sideband in time order: fork copies the parent's address space, exec
  // starts a new one, mmaps add sections (or start a new space when they
  // replace mapped code), text pokes make new kernel image versions and
  // switches fill the schedule. Streams switch spaces and pokes at their
  // times.
  for (const auto& rec : records) {
    if (const auto* tp = std::get_if<trace::TextPoke>(&rec.body)) {
      d->kernel_.AddTextPoke(rec.sample_id.time, *tp, d->stats_);
    } else if (rec.type == PERF_RECORD_SWITCH_CPU_WIDE || rec.type == PERF_RECORD_ITRACE_START) {
      d->schedule_.Add(rec);
    } else {
      d->spaces_.Apply(rec);
    }
  }
  // JIT code loads after the last record; JIT maps' names.
  d->spaces_.FinishSideband(manifest.pids);
  return d;
}

namespace {

// One stream's decode state, as a resumable state machine: Step() does one
// unit of work (a sync, one event or one block). Events go to the sink
// directly or, for per-CPU streams merged by time, to a small queue.
class StreamDecoder {
 public:
  // `cpu` >= 0: a per-CPU stream, its thread from the switch sideband;
  // else `thread` for the whole stream.
  // `dec` null: ptsnap's flow decoder over `bytes` (src/flow), reading the
  // same images through the owner's ImageViews. `skip`: events of this
  // stream already delivered (by a flow decoder that stopped at what it
  // does not decode): decoded again, not delivered again.
  StreamDecoder(PtDecoder* owner, UniqueBlockDecoder dec, std::string_view bytes,
                PtDecoder::ThreadId thread, int32_t cpu, EventSink* sink, uint32_t stream,
                uint64_t skip = 0)
      : owner_(owner),
        bytes_(bytes),
        stream_(stream),
        cpu_(cpu),
        thread_(thread),
        sink_(sink),
        stats_(own_stats_),
        skip_(skip),
        cycle_accurate_(owner->cycle_accurate()),
        mtc_period_ns_(owner->MtcPeriodNs()),
        times_(owner->hardware_clock(), cycle_accurate_, mtc_period_ns_) {
    if (sink_ != nullptr) out_.reserve(kOutBatch);
    if (dec) {
      libipt_ =
          std::make_unique<LibiptEngine>(std::move(dec), owner->Iscache(), owner->EmptyImage());
    } else {
      code_.views = &owner->views();
      code_.image = owner->KernelImageForFlow();
      flow_ = std::make_unique<flow::FlowDecoder>(owner->FlowConfig(bytes), &code_,
                                                  owner->LibiptCaches());
    }
  }
  StreamDecoder(const StreamDecoder&) = delete;
  StreamDecoder& operator=(const StreamDecoder&) = delete;

  void Run() {
    while (Step()) {
    }
    FlushOut();
  }
  // Queue mode: decodes until an event is queued; false at the end.
  bool Fill() {
    while (queue_.empty() && Step()) {
    }
    return !queue_.empty();
  }
  std::deque<BranchEvent>& queue() { return queue_; }
  // The flow decoder met what it does not decode: this stream must be
  // decoded again with libipt, skipping delivered() events. Nothing of it
  // is counted in the owner's stats but those delivered events.
  [[nodiscard]] bool needs_libipt() const { return needs_libipt_; }
  // Bytes of the stream missing after its end (PtDecoder::DecodeStream).
  void set_missing(uint64_t missing) { missing_ = missing; }
  // Where the bytes are mapped from: pages behind the decode are dropped.
  void set_source(const trace::StreamBytes* source) { source_ = source; }
  [[nodiscard]] uint64_t delivered() const { return delivered_; }

 private:
  enum class State : uint8_t { kSync, kSegment, kDone };

  // One engine's items, one at a time: the flow decoder's, or libipt's
  // (LibiptEngine, one step per call).
  bool Step() {
    if (state_ == State::kDone) return false;
    if (item_i_ == item_n_) {
      // Images change between blocks: one step at a time while a change
      // may come (the flow decoder would otherwise decode ahead).
      const bool may_change = next_change_ != UINT64_MAX || cpu_ >= 0;
      const bool block_next = libipt_ ? libipt_->BlockNext() : flow_->BlockNext();
      if (may_change && block_next && next_change_ != UINT64_MAX) {
        uint64_t now = Now();
        if (now >= next_change_) Retarget(now, /*thread=*/false);
      }
      item_n_ = libipt_ ? libipt_->Decode(items_.data())
                        : flow_->Decode(items_.data(), may_change ? 2 : items_.size());
      item_i_ = 0;
      if (item_n_ == 0) return Done();
    }
    const flow::Item& it = items_[item_i_++];
    flow_has_now_ = it.has_now;
    flow_now_ = it.now;
    switch (it.kind) {
      case flow::ItemKind::kSync:
        if (skipping_) EndSkip(it.offset != UINT64_MAX ? it.offset : skip_from_);
        flow_offset_ = it.offset;
        have_prev_ = false;
        eptw_hide_ = EptwHide::kNone;  // a new segment: nothing known of the stack
        state_ = State::kSegment;
        Retarget(Now(), /*thread=*/true);
        HoldFrom();  // from the PSB's time
        return true;
      case flow::ItemKind::kBlock: {
        auto iclass = static_cast<enum pt_insn_class>(it.iclass);
        if (iclass == ptic_error && flow_) {  // LibiptEngine classified its own
          uint8_t buf[16];
          const size_t n = code_.Read(it.end_ip, buf, sizeof buf);
          if (n != 0) iclass = ClassifyInstruction(buf, n, static_cast<enum pt_exec_mode>(it.mode));
        }
        HandleBlock(it, iclass);
        // An emulated PTWRITE's payload was complete at this block's last
        // branch (the function's 64th conditional branch).
        if (it.mark) Emit(BranchKind::kMark, it.end_ip, it.payload);
        return true;
      }
      case flow::ItemKind::kEvent:
        flow_offset_ = it.offset;
        HandleEvent(it);
        return true;
      case flow::ItemKind::kError:
        if (it.error == flow::kErrUnsupported) {
          needs_libipt_ = true;
          state_ = State::kDone;
          return false;
        }
        Error(it.error, it.ip);
        // Up to the next sync point, nothing of this stretch is decoded.
        if (it.offset != UINT64_MAX)
          BeginSkip(IsDamage(it.error) ? std::min(it.offset, held_from_) : it.offset, it.error);
        state_ = State::kSync;
        return true;
      case flow::ItemKind::kNextIp: return true;  // the oracle's, never from Decode
    }
    return true;
  }
  // Nothing is decoded from `offset` to the next sync point, after an
  // error with libipt status `error`.
  void BeginSkip(uint64_t offset, int error) {
    skip_from_ = offset;
    skipping_ = true;
    skip_error_ = error;
  }
  // The stretch skipped since skip_from_ ends at `at` (a sync point, or
  // the stream's end): undecoded, and damage unless it came before the
  // first sync point (a snapshot's ring starts anywhere) or after code
  // that was not mapped (the bytes are whole, the code is missing).
  void EndSkip(uint64_t at) {
    if (at > skip_from_) {
      stats_.undecoded_bytes += at - skip_from_;
      if (skip_error_ != 0 && pt_errcode(skip_error_) != pte_nomap)
        stats_.skipped.push_back({stream_, skip_from_, at - skip_from_, skip_error_});
    }
    skipping_ = false;
    skip_error_ = 0;
  }
  bool Done() {
    if (skipping_) EndSkip(bytes_.size());  // no further sync point: the rest is undecoded
    EmitTrailingBranch();                   // before: inside a transaction, it goes with it
    DropTransaction();                      // its outcome is not in the trace
    // The file was cut: what ran on is not in it, and the frames open here
    // did not end here.
    if (missing_ != 0) Error(kErrStreamCut);
    ResolvePending(0, /*have_next=*/false);
    ReleaseHeld();
    holding_ = false;
    state_ = State::kDone;
    MergeStats(owner_->mutable_stats(), own_stats_);
    return false;
  }

  // Chooses the thread (per-CPU streams, when `thread`), its process's
  // address space and the text-poke version for time `now`, and switches
  // libipt's image when they changed. Spaces and pokes change at their
  // times (checked between blocks, at libipt's latest timing packet, which
  // may be a little ahead of the block); threads change only where tracing
  // (re)starts, so a stretch between two such points stays on one thread.
  void Retarget(uint64_t now, bool thread) {
    if (thread && cpu_ >= 0) {
      PtDecoder::ThreadId t = owner_->ThreadAt(cpu_, now);
      if (!(t == thread_)) {
        if (have_thread_) stats_.thread_switches++;
        thread_ = t;
      }
      have_thread_ = true;
    }
    // A stream without timing packets has no place in time: it decodes
    // against the address space at the end of the recording. A timing
    // packet of 0 is a time (an emulated trace starts at TSC 0): taken for
    // none, the start of a program that later execs decoded against the
    // new program's mappings (Emulate.ExecIsFollowedInTheSameStream).
    uint64_t at = now != 0 || timed_ ? now : UINT64_MAX;
    int32_t space = owner_->SpaceAt(thread_.pid, at);
    size_t k = applied_pokes_;
    while (k < owner_->PokeCount() && owner_->PokeTime(k) <= now) ++k;
    next_change_ = owner_->NextSpaceChange(thread_.pid, at);
    if (k < owner_->PokeCount()) next_change_ = std::min(next_change_, owner_->PokeTime(k));
    if (space == space_ && k == applied_pokes_ && have_image_) return;
    join_ = false;  // the next block is in another image: its boundary stays an event
    space_ = space;
    applied_pokes_ = k;
    have_image_ = true;
    struct pt_image* image = owner_->PokedImage(space, k);
    if (flow_) {
      if (image != code_.image) {
        code_.image = image;
        flow_->InvalidateCode();
      }
      return;
    }
    libipt_->SetImage(image);
  }

  uint64_t Now() {
    if (flow_) {
      if (flow_has_now_) timed_ = true;
      if (flow_has_now_ && flow_now_ != 0) Advance(owner_->TscToNs(flow_now_));
      return last_time_;
    }
    uint64_t tsc = 0;
    const bool r = libipt_->Time(&tsc);  // live: the engine steps once per call
    if (r) timed_ = true;
    if (r && tsc != 0) Advance(owner_->TscToNs(tsc));
    return last_time_;
  }
  void Advance(uint64_t ns) {
    if (ns > last_time_) last_time_ = ns;  // monotone per stream
  }
  // Events wait in times_ until the next time anchor places them
  // (event_times.h). `gap`: tracing stops at the event (a disable, an
  // error, an overflow) and the next anchor may lie after time the trace
  // does not cover; `lower` is then the time libipt knew there.
  void Emit(const BranchEvent& e, bool gap = false, uint64_t lower = 0) {
    BranchEvent& p = Pend(gap, lower);
    p = e;
    Pended(p);
  }
  // A new pending event, for the caller to fill in place (no copy on the
  // per-block path) and hand to Pended.
  BranchEvent& Pend(bool gap, uint64_t lower) { return times_.Pend(pos_, gap, lower, in_tx_); }
  void Pended(BranchEvent& e) {
    e.insns = insns_;
    insns_ = 0;
    e.pid = thread_.pid;
    e.tid = thread_.tid;
    e.space = space_;
    if (times_.full()) ResolvePending(0, /*have_next=*/false);
  }
  // A time anchor: `time` is the time after the first `pos` instructions of
  // the stream. Places the pending events and delivers them.
  void Anchor(uint64_t pos, uint64_t time) {
    const bool any = !times_.empty();
    const bool any_tx = times_.Anchor(pos, time);
    if (any) DeliverPending(any_tx);
  }
  // Places every pending event (EventTimes::Place) and delivers them.
  void ResolvePending(uint64_t next_time, bool have_next, uint64_t next_pos = 0) {
    if (times_.empty()) return;
    DeliverPending(times_.Place(next_time, have_next, next_pos));
  }
  // Delivers the placed pending events in order. TSX events are held
  // until the transaction commits, dropped if it aborts (magic-trace's
  // rule). Without those or events to skip, the sink reads them where they
  // lie, after the events delivered before them.
  void DeliverPending(bool any_tx) {
    std::vector<BranchEvent>& pending = times_.events();
    const std::vector<EventTimes::Meta>& meta = times_.meta();
    if (holding_) {
      for (size_t i = 0; i < pending.size(); ++i) {
        if (meta[i].tx) {
          tx_.push_back(pending[i]);
        } else {
          Hold(pending[i]);
        }
      }
      times_.Clear();
      return;
    }
    if (!any_tx && skip_ == 0 && sink_ != nullptr) {
      FlushOut();
      delivered_ += pending.size();
      owner_->mutable_stats().events += pending.size();
      sink_->OnEvents(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) {
        if (meta[i].tx) {
          tx_.push_back(pending[i]);
        } else {
          Deliver(pending[i]);
        }
      }
    }
    times_.Clear();
  }
  void Deliver(const BranchEvent& e) {
    if (holding_) {
      Hold(e);
      return;
    }
    delivered_++;
    if (skip_ > 0) {  // delivered before, by the flow decoder
      skip_--;
      return;
    }
    owner_->mutable_stats().events++;
    if (sink_ != nullptr) {
      out_.push_back(e);
      if (out_.size() >= kOutBatch) FlushOut();
    } else {
      queue_.push_back(e);
    }
  }
  // Hands the events delivered so far to the sink, one call per batch.
  void FlushOut() {
    if (out_.empty()) return;
    sink_->OnEvents(out_);
    out_.clear();
  }
  void CommitTransaction() {
    in_tx_ = false;
    for (const BranchEvent& e : tx_) Deliver(e);
    tx_.clear();
    times_.CommitTransaction();
  }
  void DropTransaction() {
    in_tx_ = false;
    tx_.clear();
    times_.DropTransaction();
  }
  // An event's own time when libipt has one: by the time an event is
  // returned, pt_blk_time() may already have read ahead to a later timing
  // packet (e.g. the TSC before the TIP.PGE that ends a [syscall] span).
  uint64_t EventTime(const flow::Item& ev) {
    if (!ev.has_tsc) return Now();
    Advance(owner_->TscToNs(ev.tsc));
    return last_time_;
  }
  void Emit(BranchKind kind, uint64_t from, uint64_t to, bool syscall = false) {
    BranchEvent& e = Pend(/*gap=*/false, 0);
    e.kind = kind;
    e.from = from;
    e.to = to;
    e.syscall = syscall;
    Pended(e);
  }
  // An event where tracing stops, at libipt's time `time` for it. When no
  // timing packet came since the last anchor, that time is stale, and the
  // event is placed when the next anchor is known (ResolvePending).
  void EmitStop(BranchKind kind, uint64_t from, bool syscall, uint64_t time, bool known) {
    // A time later than the last anchor came from a timing packet since: a
    // CYC just before the event's packet, or a TSC (exact), or an MTC (the
    // event lies within one MTC period after it, as for a tick).
    if (known && (!times_.have_anchor() || time > times_.anchor_time()))
      Anchor(pos_, TickTime(time));
    BranchEvent e;
    e.kind = kind;
    e.from = from;
    e.syscall = syscall;
    Emit(e, /*gap=*/true, time);
  }
  // The time of the branch a tick names (EventTimes::TickTime).
  uint64_t TickTime(uint64_t time) const { return times_.TickTime(time, pos_); }
  // An event with its own fresh time (a TSC just before a TIP.PGE, a PSB+):
  // an anchor.
  void AnchorAt(uint64_t time) {
    if (!times_.have_anchor() || time > times_.anchor_time()) Anchor(pos_, time);
  }
  // `unread`: the address whose code could not be read, when known.
  void Error(int status, uint64_t unread = 0) {
    DropTransaction();  // magic-trace: an error inside a transaction drops it
    const bool damage = IsDamage(status);
    if (damage) DropHeld();
    stats_.errors++;
    if (pt_errcode(status) == pte_nomap) stats_.nomap_errors++;
    BranchEvent e;
    e.kind = BranchKind::kError;
    e.from = have_prev_ ? prev_end_ : 0;
    e.error = status;
    e.error_at_from = pt_errcode(status) == pte_nomap && have_prev_;
    e.to = pt_errcode(status) == pte_nomap ? unread : 0;
    have_prev_ = false;
    // After damage, libipt's time is what the damaged packets made it.
    Emit(e, /*gap=*/true, damage ? last_time_ : Now());
  }

  // Whether the stream's time ran ahead of `psb_ns`, the TSC of the PSB+
  // just read, by more than what estimating between timing packets can
  // overshoot (two MTC periods, at least 10 us): on an intact stream the
  // next PSB's TSC is never earlier than the times before it.
  bool TimeRanAhead(uint64_t psb_ns) const {
    if (!holding_) return false;
    const uint64_t slack = std::max<uint64_t>(2 * mtc_period_ns_, 10'000);
    return last_time_ > psb_ns && last_time_ - psb_ns > slack;
  }
  // Damage (docs/decoding.md, "Damaged streams"): an error in the packets
  // themselves, not unmapped code, the end of the stream or a cut file.
  static bool IsDamage(int status) {
    return status < 0 && status != kErrStreamCut && pt_errcode(status) != pte_nomap &&
           pt_errcode(status) != pte_eos;
  }
  // The events decoded since the last PSB are held until the next PSB (a
  // PSB+ status update), a sync or the end shows that stretch decoded
  // without damage: changed bytes are found only where the code or the
  // packets contradict them, and until then the decoder follows them, so
  // the stretch before an error is as suspect as what follows it (wrong
  // branches, and times a changed MTC or TSC moved on by milliseconds,
  // which the timeline, monotone per thread, would keep). Also the time
  // state there, to go back to.
  void HoldFrom() {
    ReleaseHeld();
    holding_ = true;
    held_from_ = LastPsb();
    DropDecoded(held_from_);
    times_.NewSegment();  // a new segment measures its own rate
    held_time_ = {last_time_, times_.Save()};
  }
  // Where the PSB the decoder last read begins: the last PSB pattern (SDM
  // 33.4.2.17: 02 82 eight times) at or before its position (libipt's
  // offset, or the flow decoder's item's: both read a little ahead), so
  // that both decoders name the same byte.
  uint64_t LastPsb() const {
    uint64_t at = 0;
    if (flow_) {
      at = flow_offset_;
    } else if (!libipt_->Offset(&at)) {
      return 0;
    }
    static constexpr char kPsb[] =
        "\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82";
    const size_t psb =
        bytes_.rfind(std::string_view(kPsb, 16), std::min<uint64_t>(at, bytes_.size()));
    return psb == std::string_view::npos ? at : psb;
  }
  // The stream's pages before `psb`, where the segment being decoded
  // begins, are not read again but by LastPsb's search back for a PSB
  // (within a segment): every 2 MiB, the pages more than 256 KiB behind it
  // leave the process's memory (StreamBytes::DropBefore).
  void DropDecoded(uint64_t psb) {
    static constexpr uint64_t kStep = 2 << 20, kMargin = 256 << 10;
    if (source_ == nullptr || psb < dropped_ + kStep) return;
    source_->DropBefore(psb - kMargin);
    dropped_ = psb;
  }
  void Hold(const BranchEvent& e) {
    held_.push_back(e);
    if (held_.size() >= kMaxHeld) ReleaseHeld();  // bounded memory; less to drop
  }
  void ReleaseHeld() {
    const bool was = holding_;
    holding_ = false;
    for (const BranchEvent& e : held_) Deliver(e);
    held_.clear();
    holding_ = was;
  }
  // An error in the packets: what was decoded since the last PSB goes, and
  // the time goes back to what it was there (the rate measured since too).
  void DropHeld() {
    if (!holding_) return;
    const HeldTime& h = held_time_;
    // Errors stay (an earlier stretch's, placed by this one's time: no
    // later than where it began).
    std::erase_if(held_, [](const BranchEvent& e) { return e.kind != BranchKind::kError; });
    for (BranchEvent& e : held_) e.time = std::min(e.time, h.last_time);
    last_time_ = h.last_time;
    // The instructions decoded since are no measure of the time either.
    times_.Restore(h.times, pos_);
  }

  // The trace ends after a block (a snapshot's stream ends wherever the
  // buffer was copied) whose last branch retired and whose destination the
  // decoder already knows: from the packet that ended the block (an indirect
  // call's TIP, a TNT bit) or from the code (a direct call). That branch is
  // an event as if a block followed at its destination, as perf's decoder
  // reports it. Nothing after it is decoded: where tracing stopped, nothing
  // says that more instructions ran.
  void EmitTrailingBranch() {
    if (!have_prev_) return;
    uint64_t to = 0;
    if (flow_) {
      if (!flow_->NextIp(&to)) return;
    } else if (!libipt_->NextIp(&to)) {
      return;
    }
    if (!HiddenBoundary(PrevBranchKind(), /*eptw_jump=*/false))
      Emit(PrevBranchKind(), prev_end_, to);
    have_prev_ = false;
  }

  // The kind of branch the previous block ended with.
  BranchKind PrevBranchKind() const {
    switch (prev_iclass_) {
      case ptic_call: return BranchKind::kCall;
      case ptic_return: return BranchKind::kReturn;
      case ptic_far_call: return BranchKind::kFarCall;
      case ptic_far_return: return BranchKind::kFarReturn;
      default: return BranchKind::kJump;
    }
  }

  // The emulated PTWRITE's own frame is hidden (the issue of marks asks it,
  // as perf's --itrace=ew shows only the payload): the call into the
  // function, the jumps inside it and its return are no events, so its
  // instructions are its caller's time. Entered by a jump (a tail call),
  // its return is the caller's and stays. True: no event for this boundary.
  bool HiddenBoundary(BranchKind kind, bool eptw_jump) {
    if (eptw_jump && eptw_hide_ == EptwHide::kNone &&
        (kind == BranchKind::kCall || kind == BranchKind::kJump)) {
      eptw_hide_ = kind == BranchKind::kCall ? EptwHide::kCalled : EptwHide::kJumpedTo;
      return true;
    }
    if (eptw_hide_ == EptwHide::kNone) return false;
    if (kind == BranchKind::kJump) return true;
    const bool called = eptw_hide_ == EptwHide::kCalled;
    eptw_hide_ = EptwHide::kNone;
    return kind == BranchKind::kReturn && called;
  }

  // A block of either engine, `iclass` its last instruction's class.
  void HandleBlock(const flow::Item& b, enum pt_insn_class iclass) {
    stats_.blocks++;
    stats_.instructions += b.ninsn;
    if (b.speculative && !in_tx_) in_tx_ = true;
    // A block that ended on an instruction that is not a branch, with no
    // event after it, ended where libipt's block cache held the next
    // address (or its block reached a size limit): the code runs straight
    // on into this block. No event there, so the timeline does not depend
    // on what libipt had cached, which depends on the order streams are
    // decoded in (docs/decoding.md, "libipt's block caches, modelled").
    // Nor is a conditional branch not taken (the block starts right after
    // it): no frame changes there (docs/decoding.md, "Pipeline", step 3),
    // and they were 65% of a CPython trace's events. The first
    // boundary after tracing (re)starts stays an event: the model ends a
    // gap, and the untraced time of a [syscall], there.
    if (!have_prev_) restarted_ = true;
    const bool fell_through = have_prev_ && prev_iclass_ == ptic_cond_jump && prev_size_ != 0 &&
                              b.ip == prev_end_ + prev_size_ && !restarted_;
    if (have_prev_ && !join_ && !fell_through) {
      if (!HiddenBoundary(PrevBranchKind(), b.eptw_jump)) Emit(PrevBranchKind(), prev_end_, b.ip);
      restarted_ = false;
    }
    insns_ += b.ninsn;
    pos_ += b.ninsn;
    have_prev_ = true;
    prev_end_ = b.end_ip;
    prev_iclass_ = iclass;
    join_ = prev_iclass_ == ptic_other;
    prev_size_ = 0;
    if (prev_iclass_ == ptic_cond_jump) prev_size_ = b.size;
  }
  // An event of either engine (flow::Item's fields by event, flow_decoder.h).
  void HandleEvent(const flow::Item& ev) {
    join_ = false;
    if (ev.status_update && state_ == State::kSegment) {  // a PSB+
      if (ev.has_tsc && TimeRanAhead(owner_->TscToNs(ev.tsc))) {
        // The stretch since the last PSB had times no intact stream has:
        // damaged, though its packets decoded.
        const uint64_t at = LastPsb();
        const uint64_t from = held_from_;
        Error(kErrTimeAhead);
        if (at > from) {
          stats_.undecoded_bytes += at - from;
          stats_.skipped.push_back({stream_, from, at - from, kErrTimeAhead});
        }
      }
    }
    if (ev.has_tsc) Advance(owner_->TscToNs(ev.tsc));
    // A PSB+: what was held before it decoded whole; hold from its time.
    if (ev.status_update && state_ == State::kSegment) HoldFrom();
    switch (ev.event) {
      case flow::EventType::kEnabled: {
        have_prev_ = false;
        uint64_t t = EventTime(ev);
        if (ev.has_tsc) AnchorAt(t);   // the TSC before the TIP.PGE
        Retarget(t, /*thread=*/true);  // a context switch shows as a gap in the trace
        Emit(BranchKind::kEnable, 0, ev.ip_suppressed ? 0 : ev.ip, false);
        break;
      }
      case flow::EventType::kDisabled:
        // A TIP.PGD with an IP: the branch that ended the previous block
        // left the address filters (--filter) for that IP. It retired: the
        // call or return happened, to code outside the trace. (A syscall's
        // TIP.PGD has its IP suppressed.)
        if (!ev.ip_suppressed && have_prev_ && prev_iclass_ != ptic_far_call &&
            prev_iclass_ != ptic_far_return)
          Emit(PrevBranchKind(), prev_end_, ev.ip);
        EmitStop(BranchKind::kDisable, have_prev_ ? prev_end_ : 0,
                 have_prev_ && prev_iclass_ == ptic_far_call, EventTime(ev), ev.has_tsc);
        have_prev_ = false;
        break;
      case flow::EventType::kAsyncDisabled:
        EmitStop(BranchKind::kDisable, ev.ip, false, EventTime(ev), ev.has_tsc);
        have_prev_ = false;
        break;
      case flow::EventType::kAsyncBranch: {
        uint64_t t = EventTime(ev);
        if (cycle_accurate_ && ev.has_tsc) AnchorAt(t);
        Emit(BranchKind::kInterrupt, ev.ip, ev.to, false);
        have_prev_ = false;
        break;
      }
      case flow::EventType::kOverflow: {
        DropTransaction();
        stats_.overflows++;
        uint64_t t = EventTime(ev);
        // Trace was lost before the overflow, for a time nothing measures:
        // the events before it (and the marker) end where the instructions
        // since the last anchor lead; tracing resumes at the overflow's time.
        BranchEvent e;
        e.kind = BranchKind::kOverflow;
        e.to = ev.ip_suppressed ? 0 : ev.ip;
        Emit(e, /*gap=*/true, 0);
        if (ev.has_tsc) AnchorAt(t);
        Retarget(t, /*thread=*/true);
        have_prev_ = false;
        break;
      }
      case flow::EventType::kTick:
        if (ev.has_tsc) AnchorAt(TickTime(owner_->TscToNs(ev.tsc)));
        break;
      case flow::EventType::kTsx:
        if (ev.aborted) {
          // The speculative work never happened. The next block starts at
          // the abort handler: a jump from the aborting instruction.
          stats_.tsx_aborts++;
          DropTransaction();
          prev_end_ = ev.ip_suppressed ? prev_end_ : ev.ip;
          prev_iclass_ = ptic_jump;
          have_prev_ = true;
        } else if (ev.speculative) {
          in_tx_ = true;
        } else {
          CommitTransaction();
        }
        break;
      case flow::EventType::kStop:
        EmitStop(BranchKind::kStop, have_prev_ ? prev_end_ : 0, false, EventTime(ev), ev.has_tsc);
        have_prev_ = false;
        break;
      case flow::EventType::kPaging:  // CR3 write: on a per-CPU stream, maybe another process
      case flow::EventType::kAsyncPaging:
        if (cpu_ >= 0) Retarget(Now(), /*thread=*/true);
        break;
      case flow::EventType::kPtwrite:
        if (ev.has_tsc) AnchorAt(owner_->TscToNs(ev.tsc));
        Emit(BranchKind::kMark, ev.ip_suppressed ? 0 : ev.ip, ev.payload);
        break;
      case flow::EventType::kCbr:
        if (ev.has_tsc) AnchorAt(owner_->TscToNs(ev.tsc));
        times_.set_cbr(ev.ratio);
        if (owner_->hardware_clock()) Emit(BranchKind::kCbr, 0, ev.ratio);
        break;
      case flow::EventType::kMwait:
        Emit(BranchKind::kPowerEntry, ev.ip_suppressed ? 0 : ev.ip,
             static_cast<uint32_t>(ev.payload));
        break;
      case flow::EventType::kPwre:
        // state | sub_state << 8 | hw << 16, as the engines pack it
        Emit(BranchKind::kPowerEntry, 0, kPowerPwre | (ev.payload & 0x10f0f));
        break;
      case flow::EventType::kPwrx:
        // last | deepest << 8 | interrupt << 16 | store << 17 | autonomous << 18
        Emit(BranchKind::kPowerExit, 0, ev.payload & 0x70f0f);
        break;
      case flow::EventType::kExecMode:  // 16/32/64-bit: libipt applies it; nothing to show
      case flow::EventType::kVmcs:
      case flow::EventType::kAsyncVmcs:
      case flow::EventType::kExstop:  // execution stopped: the PWRE or MWAIT beside it says more
      case flow::EventType::kMnt:
        // Status events of a PSB+ carry its TSC: the time at this position.
        if (ev.has_tsc) AnchorAt(owner_->TscToNs(ev.tsc));
        break;
    }
  }

  // What the flow decoder reads: an image's bytes as libipt reads them.
  struct ViewReader : flow::CodeReader {
    const ImageViews* views = nullptr;
    const struct pt_image* image = nullptr;
    size_t Read(uint64_t ip, uint8_t* buf, size_t size) override {
      return views->Read(image, ip, buf, size);
    }
    // The section around the last key asked for: blocks ask for their
    // instructions' keys one after the other.
    bool LibiptCacheKey(uint64_t ip, uint64_t* key) override {
      if (image != key_image || ip < key_lo || ip >= key_hi) {
        uint64_t k = 0;
        if (!views->CacheKey(image, ip, &k, &key_lo, &key_hi)) return false;
        key_image = image;
        key_base = k - (ip - key_lo);
      }
      *key = key_base + (ip - key_lo);
      return true;
    }
    const struct pt_image* key_image = nullptr;
    uint64_t key_lo = 0, key_hi = 0, key_base = 0;
  };
  static void MergeStats(DecodeStats& to, const DecodeStats& s) {
    to.undecoded_bytes += s.undecoded_bytes;
    to.skipped.insert(to.skipped.end(), s.skipped.begin(), s.skipped.end());
    to.blocks += s.blocks;
    to.instructions += s.instructions;
    to.errors += s.errors;
    to.nomap_errors += s.nomap_errors;
    to.overflows += s.overflows;
    to.tsx_aborts += s.tsx_aborts;
    to.thread_switches += s.thread_switches;
  }

 private:
  PtDecoder* owner_;
  std::string_view bytes_;
  uint32_t stream_;  // the manifest's id, for stats_.skipped
  uint64_t missing_ = 0;
  const trace::StreamBytes* source_ = nullptr;
  uint64_t dropped_ = 0;  // DropDecoded's last offset
  // The engine: ptsnap's flow decoder, or libipt's (one of them).
  std::unique_ptr<flow::FlowDecoder> flow_;
  std::unique_ptr<LibiptEngine> libipt_;
  ViewReader code_;
  std::array<flow::Item, 256> items_{};
  size_t item_i_ = 0, item_n_ = 0;
  bool flow_has_now_ = false;
  bool timed_ = false;  // a timing packet was seen (its time may be 0)
  uint64_t flow_now_ = 0;
  bool needs_libipt_ = false;
  uint64_t delivered_ = 0;
  int32_t cpu_;
  PtDecoder::ThreadId thread_;
  bool have_thread_ = false;
  int32_t space_ = 0;
  bool have_image_ = false;
  size_t applied_pokes_ = 0;
  uint64_t next_change_ = 0;  // next poke or space change; UINT64_MAX: none
  EventSink* sink_;
  // Delivered events not yet handed to sink_ (FlushOut).
  static constexpr size_t kOutBatch = 256;
  std::vector<BranchEvent> out_;
  // Counted here and added to the owner's at the end (not at all when the
  // stream is decoded again); events delivered are counted as they go.
  DecodeStats own_stats_;
  DecodeStats& stats_;
  uint64_t skip_;
  State state_ = State::kSync;
  // Undecoded since skip_from_ (a stream offset) until the next sync point.
  bool skipping_ = true;
  uint64_t skip_from_ = 0;
  int skip_error_ = 0;  // the error the skip began at; 0: before the first sync point
  // Held since the last PSB (HoldFrom): the events, where that PSB was
  // (about: the decoder's offset when it learned of it), and the time.
  static constexpr size_t kMaxHeld = 1 << 17;
  bool holding_ = false;
  std::vector<BranchEvent> held_;
  uint64_t held_from_ = 0;
  struct HeldTime {
    uint64_t last_time = 0;
    EventTimes::Saved times;  // its anchor's position: where it is dropped
  } held_time_;
  uint64_t flow_offset_ = 0;  // the offset of the last flow item that has one (ours)
  bool have_prev_ = false;
  bool join_ = false;  // the next block continues the previous one (HandleBlock)
  // Inside an emulated PTWRITE whose frame is hidden (HiddenBoundary).
  enum class EptwHide : uint8_t { kNone, kCalled, kJumpedTo } eptw_hide_ = EptwHide::kNone;
  uint64_t prev_end_ = 0;
  enum pt_insn_class prev_iclass_ = ptic_error;
  uint8_t prev_size_ = 0;  // of a conditional branch ending the previous block; 0: unknown
  // No block boundary was an event since tracing (re)started (a sync, a
  // TIP.PGE, an overflow, ...: wherever have_prev_ went false).
  bool restarted_ = true;
  uint64_t last_time_ = 0;
  uint64_t insns_ = 0;
  const bool cycle_accurate_;
  const uint64_t mtc_period_ns_;  // 0: no MTC
  // Instructions decoded so far, and the events waiting for their times.
  uint64_t pos_ = 0;
  EventTimes times_;
  bool in_tx_ = false;
  std::vector<BranchEvent> tx_;
  std::deque<BranchEvent> queue_;
};

}  // namespace

Result<UniqueBlockDecoder> PtDecoder::AllocDecoder(std::string_view bytes) {
  struct pt_config cfg = MakePtConfig(manifest_);
  // libipt takes a non-const pointer but only reads the buffer.
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  PTSNAP_ASSIGN_OR_RETURN(UniqueBlockDecoder dec, NewBlockDecoder(cfg));
  int r = pt_blk_set_image(dec.get(), kernel_.image());
  if (r < 0) return Error("libipt: setting the image: " + LibiptError(r));
  return dec;
}

flow::Config PtDecoder::FlowConfig(std::string_view bytes) const {
  struct pt_config cfg = MakePtConfig(manifest_);
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  return flow::FlowConfig(cfg);
}

Result<void> PtDecoder::DecodeStream(int32_t pid, int32_t tid, std::string_view bytes,
                                     EventSink& sink, uint32_t stream, uint64_t missing,
                                     const trace::StreamBytes* source) {
  stats_.pt_bytes += bytes.size();
  if (bytes.empty()) return Ok();
  const ThreadId thread{pid, tid};
  uint64_t skip = 0;
  if (use_flow_) {
    StreamDecoder ours(this, nullptr, bytes, thread, -1, &sink, stream);
    ours.set_missing(missing);
    ours.set_source(source);
    ours.Run();
    if (!ours.needs_libipt()) return Ok();
    stats_.flow_fallbacks++;
    skip = ours.delivered();
  }
  PTSNAP_ASSIGN_OR_RETURN(UniqueBlockDecoder dec, AllocDecoder(bytes));
  StreamDecoder libipt(this, std::move(dec), bytes, thread, -1, &sink, stream, skip);
  libipt.set_missing(missing);
  libipt.set_source(source);
  libipt.Run();
  return Ok();
}

Result<void> PtDecoder::DecodeCpuStreams(const std::vector<CpuStream>& streams, EventSink& sink) {
  std::vector<std::unique_ptr<StreamDecoder>> decoders;
  std::vector<const CpuStream*> decoded;  // decoders[i] decodes *decoded[i]
  for (const CpuStream& s : streams) {
    stats_.pt_bytes += s.bytes.size();
    if (s.bytes.empty()) continue;
    decoded.push_back(&s);
    UniqueBlockDecoder dec;
    if (!use_flow_) {
      PTSNAP_ASSIGN_OR_RETURN(dec, AllocDecoder(s.bytes));
    }
    decoders.push_back(std::make_unique<StreamDecoder>(
        this, std::move(dec), s.bytes, ThreadId{0, -1 - s.cpu}, s.cpu, nullptr, s.stream));
    decoders.back()->set_missing(s.missing);
    decoders.back()->set_source(s.source);
  }
  // Fills stream i's queue; a flow decoder that stops at what it does not
  // decode hands its stream to libipt, which decodes it again from the
  // start and goes on after the events already queued.
  auto fill = [&](size_t i) -> Result<bool> {
    bool more = decoders[i]->Fill();
    if (!decoders[i]->needs_libipt()) return more;
    StreamDecoder& ours = *decoders[i];
    stats_.flow_fallbacks++;
    const CpuStream& s = *decoded[i];
    PTSNAP_ASSIGN_OR_RETURN(UniqueBlockDecoder dec, AllocDecoder(s.bytes));
    auto libipt =
        std::make_unique<StreamDecoder>(this, std::move(dec), s.bytes, ThreadId{0, -1 - s.cpu},
                                        s.cpu, nullptr, s.stream, ours.delivered());
    libipt->set_missing(s.missing);
    libipt->set_source(s.source);
    libipt->queue() = std::move(ours.queue());
    decoders[i] = std::move(libipt);
    return decoders[i]->Fill();
  };
  // Merge by time: always deliver the earliest queued event (ties: the
  // first stream), so each thread's events arrive in time order. A heap of
  // (time of the stream's next event, stream).
  using Head = std::pair<uint64_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t i = 0; i < decoders.size(); ++i) {
    PTSNAP_ASSIGN_OR_RETURN(bool more, fill(i));
    if (more) heads.emplace(decoders[i]->queue().front().time, i);
  }
  std::vector<BranchEvent> out;  // merged events not yet handed to the sink
  out.reserve(256);
  while (!heads.empty()) {
    size_t i = heads.top().second;
    heads.pop();
    StreamDecoder& d = *decoders[i];
    out.push_back(d.queue().front());
    d.queue().pop_front();
    if (out.size() == out.capacity()) {
      sink.OnEvents(out);
      out.clear();
    }
    PTSNAP_ASSIGN_OR_RETURN(bool more, fill(i));
    if (more) heads.emplace(decoders[i]->queue().front().time, i);
  }
  if (!out.empty()) sink.OnEvents(out);
  return Ok();
}

}  // namespace ptsnap::decode
