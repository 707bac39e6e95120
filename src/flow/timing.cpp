#include "flow/timing.h"

namespace ptsnap::flow {
namespace {

constexpr int kErrInternal = -1;
constexpr int kErrBadPacket = -5;
constexpr int kErrBadContext = -6;
constexpr int kErrBadConfig = -10;
constexpr unsigned kFcrShift = 8;  // fixed-point fraction bits of the ratio

// CTC ticks from `last` to `ctc`, allowing one wrap of the MTC range.
int CtcDelta(uint32_t* delta, uint32_t ctc, uint32_t last, const TimingConfig& c) {
  if (ctc < last) {
    ctc += 1u << (c.mtc_freq + 8);
    if (ctc < last) return kErrBadPacket;
  }
  *delta = ctc - last;
  return 0;
}

// CTC ticks to TSC ticks by CPUID.15H.
int CtcToFc(uint64_t* fc, uint64_t ctc, const TimingConfig& c) {
  if (c.cpuid_15_eax == 0 || c.cpuid_15_ebx == 0) return kErrBadConfig;
  *fc = (ctc * c.cpuid_15_ebx) / c.cpuid_15_eax;
  return 0;
}

}  // namespace

void Timing::SetFcr(uint64_t fcr) {
  cal_fcr_ = fcr;
  if (fcr < cal_min_fcr_) cal_min_fcr_ = fcr;
  if (fcr > cal_max_fcr_) cal_max_fcr_ = fcr;
}

int Timing::Tsc(uint64_t tsc, bool header, const TimingConfig& /*c*/) {
  // Calibration: in a PSB+, the cycles since the previous TSC give a ratio
  // (unless MTC calibrates).
  const uint64_t last_tsc = cal_tsc_, cyc = cal_cyc_tsc_;
  cal_tsc_ = tsc;
  cal_cyc_tsc_ = 0;
  if (header && last_tsc != 0 && cyc != 0 && !cal_have_mtc_) {
    uint64_t t = tsc;
    bool ok = true;
    if (t < last_tsc) {
      t += uint64_t{1} << 56;
      if (t < last_tsc) ok = false;
    }
    if (!ok) return kErrBadPacket;
    const uint64_t delta = t - last_tsc;
    if ((delta & ~(~uint64_t{0} >> kFcrShift)) != 0) return kErrInternal;
    SetFcr((delta << kFcrShift) / cyc);
  }
  have_tsc_ = true;
  have_tma_ = false;
  have_mtc_ = false;
  tsc_ = base_ = tsc;
  ctc_ = 0;
  fc_ = 0;
  lost_mtc_ = 0;
  lost_cyc_ = 0;
  return 0;
}

int Timing::Cbr(uint8_t ratio, bool header, const TimingConfig& c) {
  if (!header) CalReset();
  if (c.nom_freq != 0) {
    if (ratio == 0) return kErrBadPacket;
    SetFcr((uint64_t{c.nom_freq} << kFcrShift) / ratio);
  }
  if (ratio == 0) return kErrBadPacket;
  have_cbr_ = true;
  cbr_ = ratio;
  return 0;
}

int Timing::Tma(uint16_t ctc, uint16_t fc, const TimingConfig& c) {
  if (!have_tsc_) return kErrBadContext;
  if (have_tma_) return kErrBadContext;
  if (have_mtc_) return kErrInternal;
  const uint32_t mtc_hi = c.mtc_freq + 8u;
  const uint32_t mask = mtc_hi >= 32 ? ~0u : (1u << mtc_hi) - 1u;
  have_tma_ = true;
  base_ -= fc;
  fc_ += fc;
  if (mtc_hi <= 16) have_mtc_ = true;
  ctc_ = ctc_cyc_ = ctc & mask;
  return 0;
}

int Timing::Mtc(uint8_t payload, const TimingConfig& c) {
  // Calibration first (pt_tcal_update_mtc).
  {
    const uint32_t last_ctc = cal_ctc_;
    const uint64_t cyc = cal_cyc_mtc_;
    const bool check_skl168 = cal_check_skl168_;
    cal_check_skl168_ = false;
    const uint32_t ctc = uint32_t{payload} << c.mtc_freq;
    if (!cal_have_mtc_) {
      cal_cyc_mtc_ = 0;
      cal_ctc_ = ctc;
      cal_have_mtc_ = true;
    } else if (cyc != 0) {
      cal_cyc_mtc_ = 0;
      cal_ctc_ = ctc;
      cal_lost_mtc_ += 1;
      uint32_t delta = 0;
      uint64_t fc = 0;
      int e = CtcDelta(&delta, ctc, last_ctc, c);
      if (e < 0) return e;
      e = CtcToFc(&fc, delta, c);
      if (e < 0 && e != kErrBadConfig) return e;
      bool use = e == 0;
      if (use && (fc & ~(~uint64_t{0} >> kFcrShift)) != 0) return kErrInternal;
      if (use && check_skl168) {
        // SKL168: the first MTC after a PSB may be late; skip implausible
        // ratios (libipt's pt_tcal_update_mtc).
        if ((1u << c.mtc_freq) < delta) use = false;
        if (use && c.mtc_freq < 10 && HaveFcr()) {
          const uint64_t dfc = (cal_fcr_ * (cyc + 0xf00)) >> kFcrShift;
          if (dfc < fc) use = false;
        }
      }
      if (use) {
        SetFcr((fc << kFcrShift) / cyc);
        cal_lost_mtc_ = 0;
      }
    }
  }
  // Then the time (pt_time_update_mtc).
  const bool have_tsc = have_tsc_, have_tma = have_tma_, have_mtc = have_mtc_;
  if (have_tsc && !have_tma) return 0;
  uint64_t base = base_;
  uint32_t last_ctc = ctc_;
  const uint32_t ctc = uint32_t{payload} << c.mtc_freq;
  if (fc_ != 0 || lost_cyc_ != 0 || !have_mtc) ctc_cyc_ = ctc;
  have_mtc_ = true;
  fc_ = 0;
  ctc_ = ctc;
  lost_cyc_ = 0;
  if (!have_mtc) {
    if (!have_tma) return 0;
    if ((last_ctc & ~0xffffu) != 0) return kErrInternal;
    const uint32_t ctc_lo = ctc & 0xffffu;
    uint32_t ctc_hi = ctc & ~0xffffu;
    if (ctc_lo < last_ctc) {
      ctc_hi -= 1u << 16;
      ctc_hi &= 0xffu << c.mtc_freq;
    }
    last_ctc |= ctc_hi;
  }
  uint32_t delta = 0;
  int e = CtcDelta(&delta, ctc, last_ctc, c);
  if (e < 0) {
    lost_mtc_ += 1;
    return e;
  }
  uint64_t tsc = 0;
  e = CtcToFc(&tsc, delta, c);
  if (e < 0) return e == kErrBadConfig ? 0 : e;
  base += tsc;
  tsc_ = base_ = base;
  return 0;
}

int Timing::Cyc(uint64_t cycles, const TimingConfig& c) {
  cal_cyc_mtc_ += cycles;
  cal_cyc_tsc_ += cycles;
  const uint64_t fcr = HaveFcr() ? cal_fcr_ : 0;
  if (fcr == 0) {
    lost_cyc_ += 1;
    return 0;
  }
  uint64_t cyc = cycles;
  uint64_t fc = fc_;
  if (fc == 0 && ctc_ != ctc_cyc_) {
    // The first CYC after an MTC: part of its cycles belong to the MTC
    // periods before (pt_time_adjust_cyc).
    uint32_t delta = 0;
    uint64_t dfc = 0;
    int e = CtcDelta(&delta, ctc_, ctc_cyc_, c);
    if (e < 0) return e;
    e = CtcToFc(&dfc, delta, c);
    if (e < 0) return e == kErrBadConfig ? 0 : e;
    const uint64_t old_cyc = (dfc << kFcrShift) / fcr;
    uint64_t total = cyc;
    if (total < old_cyc) total = old_cyc;
    cyc = total - old_cyc;
  }
  fc += (cyc * fcr) >> kFcrShift;
  fc_ = fc;
  tsc_ = base_ + fc;
  return 0;
}

}  // namespace ptsnap::flow
