// A CpuidSource with values set by hand, for tests of code that reads CPUID
// (the probe, the recorder's PT configuration, the kernel world).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "sys/cpuid.h"

namespace ptsnap::testing {

// Unset leaves are unavailable.
class FakeCpuid final : public sys::CpuidSource {
 public:
  FakeCpuid& Set(uint32_t leaf, uint32_t subleaf, sys::CpuidRegs regs) {
    regs_[{leaf, subleaf}] = regs;
    return *this;
  }
  [[nodiscard]] std::optional<sys::CpuidRegs> Query(uint32_t leaf,
                                                    uint32_t subleaf) const override {
    auto it = regs_.find({leaf, subleaf});
    if (it == regs_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::pair<uint32_t, uint32_t>, sys::CpuidRegs> regs_;
};

}  // namespace ptsnap::testing
