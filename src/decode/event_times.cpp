#include "decode/event_times.h"

#include <algorithm>

#include "decode/interpolate.h"

namespace ptsnap::decode {

bool EventTimes::Anchor(uint64_t pos, uint64_t time) {
  if (have_anchor_ && time < anchor_time_) time = anchor_time_;
  if (have_anchor_ && !gap_since_anchor_ && pos > anchor_pos_) {
    rate_ns_ += time - anchor_time_;
    rate_insns_ += pos - anchor_pos_;
  }
  const bool any_tx = Place(time, /*have_next=*/true, pos);
  have_anchor_ = true;
  anchor_pos_ = pos;
  anchor_time_ = time;
  gap_since_anchor_ = false;
  return any_tx;
}

bool EventTimes::Place(uint64_t next_time, bool have_next, uint64_t next_pos) {
  if (events_.empty()) return false;
  uint64_t p0 = anchor_pos_, t0 = anchor_time_;
  if (!have_anchor_) {
    // Nothing before the first anchor says when these ran.
    p0 = meta_.front().pos;
    const uint64_t lower = meta_.front().lower;
    t0 = !have_next ? lower : lower != 0 ? std::min(lower, next_time) : next_time;
  }
  uint64_t last_pos = 0, last_time = 0;
  bool any_tx = false;
  size_t i = 0;
  while (i < events_.size()) {
    // Up to and including the next event where tracing stopped.
    size_t g = i;
    while (g < events_.size() && !meta_[g].gap) ++g;
    uint64_t p1 = next_pos, t1 = next_time;
    bool bounded = have_next;
    if (g < events_.size()) {
      // Tracing stopped at events_[g]: the time up to the next anchor may
      // be time away from the trace, so its time is the lower bound the
      // decoder had, or where the instructions since the last anchor lead
      // at the measured rate, whichever is later, but never after the next
      // anchor.
      p1 = meta_[g].pos;
      t1 = std::max(Extrapolate(p0, t0, p1), meta_[g].lower);
      if (have_next) t1 = std::min(t1, next_time);
      t1 = std::max(t1, t0);
      bounded = true;
    }
    const size_t end = g < events_.size() ? g + 1 : events_.size();
    Interpolator place(t1 - t0, p1 > p0 ? p1 - p0 : 1);
    for (; i < end; ++i) {
      const uint64_t pos = meta_[i].pos;
      any_tx |= meta_[i].tx;
      uint64_t t;
      if (!bounded) {
        t = Extrapolate(p0, t0, pos);
      } else if (p1 <= p0 || pos <= p0) {
        t = t0;
      } else {
        t = t0 + place.At(pos - p0);
      }
      events_[i].time = t;
      if (!bounded) {
        // Extrapolated: what follows continues from here.
        last_pos = pos;
        last_time = t;
      }
    }
    if (g < events_.size()) {
      p0 = p1;
      t0 = t1;
    }
  }
  if (last_pos > p0) {
    p0 = last_pos;
    t0 = std::max(t0, last_time);
  }
  // Where the placed events leave off: the next events continue from here.
  if (have_anchor_ || have_next) {
    anchor_pos_ = p0;
    anchor_time_ = t0;
    have_anchor_ = true;
  }
  return any_tx;
}

uint64_t EventTimes::TickTime(uint64_t time, uint64_t pos) const {
  if (cycle_accurate_ || mtc_period_ns_ == 0 || !have_anchor_) return time;
  return std::clamp(Extrapolate(anchor_pos_, anchor_time_, pos), time, time + mtc_period_ns_ - 1);
}

double EventTimes::Rate() const {
  if (rate_insns_ != 0) return static_cast<double>(rate_ns_) / static_cast<double>(rate_insns_);
  if (!hardware_clock_) return 1.0;
  return cbr_ != 0 ? 10.0 / cbr_ : 0.0;
}

uint64_t EventTimes::Extrapolate(uint64_t p0, uint64_t t0, uint64_t p) const {
  const double rate = Rate();
  if (!(rate > 0) || p <= p0) return t0;  // NaN too
  // A corrupt trace can measure any rate: saturate, never overflow.
  const double dt = static_cast<double>(p - p0) * rate;
  if (!(dt < 1.8e19)) return UINT64_MAX;
  const auto d = static_cast<uint64_t>(dt);
  return d > UINT64_MAX - t0 ? UINT64_MAX : t0 + d;
}

void EventTimes::Restore(const Saved& s, uint64_t pos) {
  // Errors stay (an earlier stretch's, placed by this one's time).
  Filter([this](size_t i) { return events_[i].kind == BranchKind::kError; });
  anchor_pos_ = pos;
  anchor_time_ = s.anchor_time;
  have_anchor_ = s.have_anchor;
  gap_since_anchor_ = s.gap_since_anchor || !events_.empty();
  rate_ns_ = s.rate_ns;
  rate_insns_ = s.rate_insns;
}

void EventTimes::DropTransaction() {
  Filter([this](size_t i) { return !meta_[i].tx; });
}

}  // namespace ptsnap::decode
