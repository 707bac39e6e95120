// The time estimate of the flow decoder: the same arithmetic as libipt 2.0's
// pt_time / pt_time_cal (libipt/src/pt_time.c), so both decoders put the same
// timestamp on every event. TSC gives wall-clock time; TMA and MTC advance
// it by CTC ticks (CPUID.15H's TSC/CTC ratio); CYC adds core cycles times a
// fast-counter/cycle ratio calibrated from MTC, TSC or CBR (nom_freq).
// Pure value types, no I/O.
#pragma once

#include <cstdint>

namespace ptsnap::flow {

struct TimingConfig {
  uint32_t cpuid_15_eax = 0, cpuid_15_ebx = 0;  // TSC/CTC ratio (0: unknown)
  uint8_t mtc_freq = 0;                         // IA32_RTIT_CTL.MTCFreq
  uint8_t nom_freq = 0;                         // MSR_PLATFORM_INFO[15:8] (0: unknown)
  bool skl168 = false;  // erratum SKL168: distrust MTC calibration right after a PSB
};

class Timing {
 public:
  void Reset() { *this = Timing(); }
  // Forgets the calibration only (libipt keeps the time but not its
  // calibration across an OVF).
  void ResetCalibration() { CalReset(); }
  // `header`: the packet is inside a PSB+ (calibration differs there).
  // Each returns 0 or a negative libipt-style error (-5 bad packet,
  // -6 bad context); configuration gaps are ignored as libipt does.
  int Tsc(uint64_t tsc, bool header, const TimingConfig& c);
  int Cbr(uint8_t ratio, bool header, const TimingConfig& c);
  int Tma(uint16_t ctc, uint16_t fc, const TimingConfig& c);
  int Mtc(uint8_t ctc, const TimingConfig& c);
  int Cyc(uint64_t cycles, const TimingConfig& c);
  void Psb(const TimingConfig& c) { cal_check_skl168_ = c.skl168; }  // calibration's PSB hook

  // The estimate: false when no TSC was seen since the last reset (then
  // `tsc` is relative time, as libipt's -pte_no_time).
  [[nodiscard]] bool have_tsc() const { return have_tsc_; }
  [[nodiscard]] uint64_t tsc() const { return tsc_; }

 private:
  // pt_time
  uint64_t tsc_ = 0, base_ = 0, fc_ = 0;
  uint32_t ctc_ = 0, ctc_cyc_ = 0, lost_mtc_ = 0, lost_cyc_ = 0;
  uint8_t cbr_ = 0;
  bool have_tsc_ = false, have_cbr_ = false, have_tma_ = false, have_mtc_ = false;
  // pt_time_cal
  uint64_t cal_fcr_ = 0, cal_min_fcr_ = UINT64_MAX, cal_max_fcr_ = 0;
  uint64_t cal_tsc_ = 0, cal_cyc_tsc_ = 0, cal_cyc_mtc_ = 0;
  uint32_t cal_ctc_ = 0, cal_lost_mtc_ = 0;
  bool cal_have_mtc_ = false, cal_check_skl168_ = false;

  void CalReset() {
    cal_fcr_ = 0;
    cal_min_fcr_ = UINT64_MAX;
    cal_max_fcr_ = 0;
    cal_tsc_ = cal_cyc_tsc_ = cal_cyc_mtc_ = 0;
    cal_ctc_ = cal_lost_mtc_ = 0;
    cal_have_mtc_ = false;
    cal_check_skl168_ = false;
  }
  void SetFcr(uint64_t fcr);
  [[nodiscard]] bool HaveFcr() const { return cal_min_fcr_ <= cal_max_fcr_; }
};

}  // namespace ptsnap::flow
