// Placing events between two time anchors (docs/decoding.md, "Timestamps"):
// an event `b` instructions after the first anchor, of an interval of `c`
// instructions and `a` ns, is at floor(a * b / c) ns after it. The events
// of one interval come in order, so the quotient is carried from one to the
// next and a division is needed only where an event lies `c / a` or more
// instructions after the one before (a division per event was 5% of a
// decode). Exactly MulDiv's result for every b, by construction and by
// interpolate_test.
#pragma once

#include <cstdint>

namespace ptsnap::decode {

__extension__ using Uint128 = unsigned __int128;

// a * b / c, exactly (128-bit product), in 64 bits when the product fits.
inline uint64_t MulDiv(uint64_t a, uint64_t b, uint64_t c) {
  if ((a | b) >> 32 == 0) return a * b / c;
  return static_cast<uint64_t>(static_cast<Uint128>(a) * b / c);
}

// floor(a * b / c) for non-decreasing b, c > 0.
class Interpolator {
 public:
  Interpolator(uint64_t a, uint64_t c) : a_(a), c_(c) {}
  uint64_t At(uint64_t b) {
    // One ns per instruction (emulated traces: one tick per instruction).
    if (a_ == c_) return b;
    const uint64_t d = b - b_;
    // Invariant: a * b_ == q_ * c + r_, r_ < c. Small steps keep to 64
    // bits; anything else (a step backwards, large numbers) starts over.
    if (b >= b_ && (a_ | d) >> 32 == 0 && c_ >> 32 == 0) {
      r_ += a_ * d;  // at most (2^32 - 1)^2 + 2^32 - 1 < 2^64
      if (r_ >= c_) {
        r_ -= c_;
        ++q_;
        if (r_ >= c_) {
          q_ += r_ / c_;
          r_ %= c_;
        }
      }
    } else {
      const Uint128 ab = static_cast<Uint128>(a_) * b;
      q_ = static_cast<uint64_t>(ab / c_);
      r_ = static_cast<uint64_t>(ab % c_);
    }
    b_ = b;
    return q_;
  }

 private:
  uint64_t a_, c_;
  uint64_t b_ = 0, q_ = 0, r_ = 0;
};

}  // namespace ptsnap::decode
