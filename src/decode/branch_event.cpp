#include "decode/branch_event.h"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "decode/libipt.h"

namespace ptsnap::decode {

std::string_view ToString(BranchKind k) {
  switch (k) {
    case BranchKind::kCall: return "call";
    case BranchKind::kReturn: return "return";
    case BranchKind::kJump: return "jump";
    case BranchKind::kFarCall: return "far-call";
    case BranchKind::kFarReturn: return "far-return";
    case BranchKind::kInterrupt: return "interrupt";
    case BranchKind::kEnable: return "enable";
    case BranchKind::kDisable: return "disable";
    case BranchKind::kOverflow: return "overflow";
    case BranchKind::kError: return "error";
    case BranchKind::kStop: return "stop";
    case BranchKind::kMark: return "mark";
    case BranchKind::kCbr: return "cbr";
    case BranchKind::kPowerEntry: return "power-entry";
    case BranchKind::kPowerExit: return "power-exit";
  }
  return "?";
}

std::string MarkText(uint64_t payload) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%" PRIx64, payload);
  std::string text;
  size_t i = 0;
  for (; i < 8; ++i) {  // perf's ptw_is_prt
    const auto c = static_cast<unsigned char>(payload >> (8 * i));
    if (c == 0) break;
    if (c < 0x20 || c > 0x7e) return hex;
    text += static_cast<char>(c);
  }
  if (text.empty() || (i < 8 && (payload >> (8 * i)) != 0)) return hex;
  return std::string(hex) + " \"" + text + "\"";
}

namespace {
// The SDM's encoding of a C-state in MWAIT's hint, PWRE and PWRX: the
// state minus one, 0xf for C0.
const std::string& CStateOf(uint64_t n) {
  static const auto* const kNames = [] {
    auto* names = new std::array<std::string, 16>;
    for (size_t i = 0; i < 16; ++i) (*names)[i] = i == 0xf ? "C0" : "C" + std::to_string(i + 1);
    return names;
  }();
  return (*kNames)[n & 0xf];
}
const std::string& Decimal(uint64_t n) {
  static const auto* const kNumbers = [] {
    auto* numbers = new std::array<std::string, 16>;
    for (size_t i = 0; i < 16; ++i) (*numbers)[i] = std::to_string(i);
    return numbers;
  }();
  return (*kNumbers)[n & 0xf];
}
}  // namespace

std::string CStateName(uint64_t to) {
  return CStateOf((to & kPowerPwre) != 0 ? to & 0xf : (to >> 4) & 0xf);
}

std::vector<PowerArg> PowerEntryArgs(uint64_t to) {
  static const std::string kCState = "c_state", kSubState = "sub_state",
                           kHardware = "hardware_initiated", kTrue = "true", kFalse = "false";
  const bool pwre = (to & kPowerPwre) != 0;
  // A PWRE's resolved sub-state, or MWAIT's hint's (EAX[3:0]).
  std::vector<PowerArg> args = {{&kCState, &CStateOf(pwre ? to & 0xf : (to >> 4) & 0xf)},
                                {&kSubState, &Decimal(pwre ? (to >> 8) & 0xf : to & 0xf)}};
  if (pwre) args.push_back({&kHardware, (to >> 16) & 1 ? &kTrue : &kFalse});
  return args;
}

std::vector<PowerArg> PowerExitArgs(uint64_t to) {
  static const std::string kLast = "last_c_state", kDeepest = "deepest_c_state", kWake = "wake";
  static const auto* const kReasons = [] {
    auto* reasons = new std::array<std::string, 8>;
    for (size_t i = 1; i < 8; ++i) {
      std::string& r = (*reasons)[i];
      if (i & 1) r += "interrupt";
      if (i & 2) r += std::string(r.empty() ? "" : ",") + "store";
      if (i & 4) r += std::string(r.empty() ? "" : ",") + "hardware";
    }
    return reasons;
  }();
  std::vector<PowerArg> args = {{&kLast, &CStateOf(to & 0xf)},
                                {&kDeepest, &CStateOf((to >> 8) & 0xf)}};
  if (const uint64_t wake = (to >> 16) & 7; wake != 0) args.push_back({&kWake, &(*kReasons)[wake]});
  return args;
}

std::string StatusMessage(int status) {
  if (status == kErrStreamCut) return "the stream file ends here, before its listed end";
  if (status == kErrTimeAhead)
    return "the timing packets before this PSB ran ahead of its TSC (changed bytes)";
  return LibiptError(status);
}

std::string ErrorMessage(const BranchEvent& e) {
  if (e.kind != BranchKind::kError) return "";
  std::string message = StatusMessage(e.error);
  if (e.error_at_from) {
    char buf[40];
    std::snprintf(buf, sizeof buf, " at 0x%llx", static_cast<unsigned long long>(e.from));
    message += buf;
  }
  return message;
}

}  // namespace ptsnap::decode
