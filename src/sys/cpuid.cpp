#include "sys/cpuid.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ptsnap::sys {

std::optional<CpuidRegs> HostCpuid::Query(uint32_t leaf, uint32_t subleaf) const {
#if defined(__x86_64__) || defined(__i386__)
  CpuidRegs r;
  // __get_cpuid_count checks the leaf against the maximum of its range
  // (basic or extended); hypervisor leaves (0x4000xxxx) are not in either
  // range, so those go through the raw instruction.
  if ((leaf & 0xf0000000u) == 0x40000000u) {
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
  }
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return std::nullopt;
  return r;
#else
  (void)leaf;
  (void)subleaf;
  return std::nullopt;
#endif
}

CpuInfo DecodeCpu(const CpuidSource& cpuid) {
  CpuInfo info;
  auto l0 = cpuid.Query(0, 0);
  if (!l0) return info;
  info.available = true;
  info.max_leaf = l0->eax;
  char vendor[13] = {};
  std::memcpy(vendor, &l0->ebx, 4);
  std::memcpy(vendor + 4, &l0->edx, 4);
  std::memcpy(vendor + 8, &l0->ecx, 4);
  info.vendor = vendor;
  if (auto l1 = info.max_leaf >= 1 ? cpuid.Query(1, 0) : std::nullopt) {
    // SDM Vol. 2A, CPUID leaf 01H: display family/model.
    uint32_t base_family = (l1->eax >> 8) & 0xf;
    uint32_t base_model = (l1->eax >> 4) & 0xf;
    info.family = base_family == 0xf ? base_family + ((l1->eax >> 20) & 0xff) : base_family;
    info.model = (base_family == 0x6 || base_family == 0xf)
                     ? base_model + (((l1->eax >> 16) & 0xf) << 4)
                     : base_model;
    info.stepping = l1->eax & 0xf;
    info.hypervisor = (l1->ecx >> 31) & 1;
  }
  if (info.hypervisor) {
    if (auto h = cpuid.Query(0x40000000u, 0)) {
      char sig[13] = {};
      std::memcpy(sig, &h->ebx, 4);
      std::memcpy(sig + 4, &h->ecx, 4);
      std::memcpy(sig + 8, &h->edx, 4);
      for (char& c : sig) {
        if (c != 0 && (c < 0x20 || c > 0x7e)) c = '?';
      }
      info.hypervisor_vendor = sig;
    }
  }
  if (info.max_leaf >= 7) {
    if (auto l7 = cpuid.Query(7, 0)) info.pt_supported = (l7->ebx >> 25) & 1;
  }
  if (info.max_leaf >= 0x14 && info.pt_supported) {
    info.leaf14_0 = cpuid.Query(0x14, 0);
    if (info.leaf14_0 && info.leaf14_0->eax >= 1) info.leaf14_1 = cpuid.Query(0x14, 1);
  }
  if (info.max_leaf >= 0x15) info.leaf15 = cpuid.Query(0x15, 0);
  return info;
}

}  // namespace ptsnap::sys
