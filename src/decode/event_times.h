// The event queue and its time placement (docs/decoding.md, "Timestamps"):
// a stream decoder's events wait here until the next time anchor (a timing
// packet's time after a known number of instructions) places each between
// the anchors by the instructions retired before it. Where tracing stops
// (a disable, an error, an overflow) the time to the next anchor may be
// time away from the trace, so such an event is placed by the PSB
// segment's own rate instead (#40: a segment's times are its own).
//
// No I/O and no decoder: positions and times in, placed events out, so the
// rules are tested here (event_times_test.cpp) and a PSB segment can have
// one of its own. The caller delivers the placed events (events()) and
// empties the queue (Clear).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/pt_decoder.h"

namespace ptsnap::decode {

class EventTimes {
 public:
  // Bounded memory without timing packets: the caller places the queue
  // (Place without a next anchor) once it holds this many.
  static constexpr size_t kMaxPending = 1 << 16;

  // `hardware_clock`: the time is the TSC's, so the rate before any is
  // measured is the CBR's frequency (else one ns per instruction: the
  // emulator's clock). `cycle_accurate`, `mtc_period_ns` (0: no MTC): how
  // close a tick's time is to its branch (TickTime).
  EventTimes(bool hardware_clock, bool cycle_accurate, uint64_t mtc_period_ns)
      : hardware_clock_(hardware_clock),
        cycle_accurate_(cycle_accurate),
        mtc_period_ns_(mtc_period_ns) {}

  // A new event, `pos` instructions into the stream, for the caller to fill
  // in place. `gap`: tracing stops at it and `lower` is the time the decoder
  // knew there. `tx`: speculative (TSX), dropped if its transaction aborts.
  BranchEvent& Pend(uint64_t pos, bool gap, uint64_t lower, bool tx) {
    meta_.push_back(Meta{pos, lower, gap, tx});
    if (gap) gap_since_anchor_ = true;  // the time to the next anchor is no rate
    return events_.emplace_back();
  }
  [[nodiscard]] bool empty() const { return events_.empty(); }
  [[nodiscard]] bool full() const { return events_.size() >= kMaxPending; }

  // A time anchor: `time` is the time after the first `pos` instructions.
  // Places the queued events (Place) and measures the segment's rate over
  // the interval when tracing did not stop in it. True when a queued event
  // is speculative.
  bool Anchor(uint64_t pos, uint64_t time);
  // Places every queued event: with `have_next`, between the last anchor and
  // the next (next_pos, next_time); without (the end of the stream, a full
  // queue), extrapolated at Rate(). Where the placed events leave off is the
  // anchor for what follows. True when a queued event is speculative.
  bool Place(uint64_t next_time, bool have_next, uint64_t next_pos = 0);

  // The time of the branch a tick names, `pos` instructions into the stream.
  // With CYC it is the tick's. Without, the tick's time is an MTC's that came
  // before the branch's packet and the next MTC came after it: the branch
  // retired in [time, time + MTC period), where the rate leads, within it.
  [[nodiscard]] uint64_t TickTime(uint64_t time, uint64_t pos) const;

  // Perf-clock ns per instruction where no timing packet says: the rate
  // measured since the segment began (NewSegment) between anchors with no
  // stop between them; before any, one instruction per cycle at the CBR's
  // frequency (100 MHz per ratio unit), which under the emulator is its
  // clock, one ns per instruction; 0 (unknown) without a CBR.
  [[nodiscard]] double Rate() const;
  // t0 plus (p - p0) instructions at Rate(), saturating.
  [[nodiscard]] uint64_t Extrapolate(uint64_t p0, uint64_t t0, uint64_t p) const;
  void set_cbr(uint32_t ratio) { cbr_ = ratio; }

  [[nodiscard]] bool have_anchor() const { return have_anchor_; }
  [[nodiscard]] uint64_t anchor_time() const { return anchor_time_; }

  // A new PSB segment measures its own rate.
  void NewSegment() { rate_ns_ = rate_insns_ = 0; }
  // The anchor and rate at a segment's start, to go back to when the
  // segment turns out damaged (Restore).
  struct Saved {
    uint64_t anchor_time = 0;
    bool have_anchor = false, gap_since_anchor = false;
    uint64_t rate_ns = 0, rate_insns = 0;
  };
  [[nodiscard]] Saved Save() const {
    return {anchor_time_, have_anchor_, gap_since_anchor_, rate_ns_, rate_insns_};
  }
  // Back to `s`, the anchor moved to `pos` (the instructions decoded since
  // are no measure of the time); the queue keeps its error events only.
  void Restore(const Saved& s, uint64_t pos);

  // The queued events and what each needs to be placed, in order.
  struct Meta {
    uint64_t pos = 0;    // instructions retired before the event
    uint64_t lower = 0;  // gap events: the decoder's time there
    bool gap = false;
    bool tx = false;
  };
  [[nodiscard]] std::vector<BranchEvent>& events() { return events_; }
  [[nodiscard]] const std::vector<Meta>& meta() const { return meta_; }
  void Clear() {
    events_.clear();
    meta_.clear();
  }
  // The transaction committed: its queued events are ordinary ones.
  void CommitTransaction() {
    for (Meta& m : meta_) m.tx = false;
  }
  // The transaction aborted: its queued events go.
  void DropTransaction();

 private:
  // Keeps the queued events `keep` says to, in order.
  template <class Keep>
  void Filter(Keep keep) {
    size_t kept = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      if (!keep(i)) continue;
      events_[kept] = events_[i];
      meta_[kept++] = meta_[i];
    }
    events_.resize(kept);
    meta_.resize(kept);
  }

  const bool hardware_clock_;
  const bool cycle_accurate_;
  const uint64_t mtc_period_ns_;
  uint32_t cbr_ = 0;  // the last CBR's ratio
  bool have_anchor_ = false;
  bool gap_since_anchor_ = false;
  uint64_t anchor_pos_ = 0, anchor_time_ = 0;
  uint64_t rate_ns_ = 0, rate_insns_ = 0;  // measured in this segment
  // Apart (meta_ beside events_) so that the events, once placed, go to
  // the sink as they lie: one copy fewer per block (12% of a decode was
  // the copies).
  std::vector<BranchEvent> events_;
  std::vector<Meta> meta_;
};

}  // namespace ptsnap::decode
