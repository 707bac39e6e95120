// The virtual CPU the emulated PT source presents: what the plugin encodes
// against and what the driver writes into the manifest, so that libipt's and
// perf's time estimates reproduce the virtual clock exactly
// (docs/emulation.md, "Time").
//
// One TSC tick per retired guest instruction, 1 ns of perf clock per tick:
// a 1 GHz TSC. The core runs at the TSC's rate (one cycle per tick: CBR =
// nominal ratio = 10 x 100 MHz), and the crystal clock (CTC/ART) at 10 MHz,
// CPUID.15H = {EAX 1, EBX 100}: 100 TSC ticks per CTC tick, the ratio of
// a 2.4 GHz part with a 24 MHz crystal.
#pragma once

#include <cstdint>

namespace ptsnap::emulate {

// CPUID: a Kaby Lake libipt knows (none of its errata change how these
// streams decode; tested with errata enabled).
inline constexpr uint32_t kCpuFamily = 6, kCpuModel = 0x9e, kCpuStepping = 9;
// CPUID.15H: TSC = CTC * EBX / EAX.
inline constexpr uint32_t kCpuid15Eax = 1, kCpuid15Ebx = 100;
inline constexpr uint32_t kTscPerCtc = kCpuid15Ebx / kCpuid15Eax;
static_assert(kCpuid15Ebx % kCpuid15Eax == 0, "the encoder needs an integer TSC:CTC ratio");
// MSR_PLATFORM_INFO[15:8] (max non-turbo ratio) and the CBR packets' ratio:
// equal, so one core cycle is one TSC tick.
inline constexpr uint8_t kNominalRatio = 10, kCoreBusRatio = kNominalRatio;
// The intel_pt PMU's attr.type in the manifest (perf's export uses the same
// for traces that name none).
inline constexpr uint32_t kVirtualPmuType = 8;

}  // namespace ptsnap::emulate
