// CPUID behind a narrow interface, so tests (and `probe --root`, which must
// not describe this machine's CPU as another's) can inject values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ptsnap::sys {

struct CpuidRegs {
  uint32_t eax = 0;
  uint32_t ebx = 0;
  uint32_t ecx = 0;
  uint32_t edx = 0;
};

class CpuidSource {
 public:
  virtual ~CpuidSource() = default;
  // nullopt when the leaf is not available (above the maximum leaf, or no
  // CPUID at all, e.g. a non-x86 build).
  [[nodiscard]] virtual std::optional<CpuidRegs> Query(uint32_t leaf, uint32_t subleaf) const = 0;
};

// The CPU this process runs on (the `cpuid` instruction).
class HostCpuid final : public CpuidSource {
 public:
  [[nodiscard]] std::optional<CpuidRegs> Query(uint32_t leaf, uint32_t subleaf) const override;
};

// Decoded identity and the PT-related leaves.
struct CpuInfo {
  bool available = false;  // leaf 0 answered
  std::string vendor;      // "GenuineIntel", "AuthenticAMD", ...
  uint32_t max_leaf = 0;
  uint32_t family = 0;  // display family (base + extended)
  uint32_t model = 0;   // display model (with extended model for 6/0xf)
  uint32_t stepping = 0;
  bool hypervisor = false;            // CPUID.1:ECX[31], set by hypervisors for guests
  std::string hypervisor_vendor;      // leaf 0x40000000 signature ("KVMKVMKVM", ...)
  bool pt_supported = false;          // CPUID.(7,0):EBX[25] Intel Processor Trace
  std::optional<CpuidRegs> leaf14_0;  // PT capabilities (sub-leaf 0)
  std::optional<CpuidRegs> leaf14_1;  // PT capabilities (sub-leaf 1)
  std::optional<CpuidRegs> leaf15;    // TSC/crystal clock ratio (EBX/EAX)
};

// Pure given the source.
CpuInfo DecodeCpu(const CpuidSource& cpuid);

}  // namespace ptsnap::sys
