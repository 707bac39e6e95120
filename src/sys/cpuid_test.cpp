#include "sys/cpuid.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/support/fake_cpuid.h"

namespace ptsnap::sys {
namespace {

CpuidRegs Vendor(const char (&v)[13], uint32_t max_leaf) {
  CpuidRegs r;
  r.eax = max_leaf;
  std::memcpy(&r.ebx, v, 4);
  std::memcpy(&r.edx, v + 4, 4);
  std::memcpy(&r.ecx, v + 8, 4);
  return r;
}

TEST(DecodeCpu, SkylakeWithPt) {
  ::ptsnap::testing::FakeCpuid c;
  c.Set(0, 0, Vendor("GenuineIntel", 0x16));
  c.Set(1, 0, {0x000506e3, 0, 0, 0});  // family 6 model 0x5e stepping 3
  c.Set(7, 0, {0, 1u << 25, 0, 0});
  c.Set(0x14, 0, {1, 0xf, 0x7, 0});
  c.Set(0x14, 1, {0x02490002, 0x003f3fff, 0, 0});
  c.Set(0x15, 0, {2, 200, 0, 0});
  CpuInfo i = DecodeCpu(c);
  EXPECT_TRUE(i.available);
  EXPECT_EQ(i.vendor, "GenuineIntel");
  EXPECT_EQ(i.family, 6u);
  EXPECT_EQ(i.model, 0x5eu);
  EXPECT_EQ(i.stepping, 3u);
  EXPECT_FALSE(i.hypervisor);
  EXPECT_TRUE(i.pt_supported);
  ASSERT_TRUE(i.leaf14_1.has_value());
  EXPECT_EQ(i.leaf14_1->eax, 0x02490002u);
  ASSERT_TRUE(i.leaf15.has_value());
  EXPECT_EQ(i.leaf15->ebx, 200u);
}

TEST(DecodeCpu, GuestWithoutPt) {
  ::ptsnap::testing::FakeCpuid c;
  c.Set(0, 0, Vendor("AuthenticAMD", 0x10));
  c.Set(1, 0, {0x00a00f11, 0, 1u << 31, 0});  // family 0x19 model 0x1 stepping 1
  c.Set(7, 0, {0, 0, 0, 0});
  CpuidRegs kvm{0x40000001, 0, 0, 0};  // signature in EBX, ECX, EDX order
  std::memcpy(&kvm.ebx, "KVMK", 4);
  std::memcpy(&kvm.ecx, "VMKV", 4);
  std::memcpy(&kvm.edx, "M\0\0\0", 4);
  c.Set(0x40000000, 0, kvm);
  CpuInfo i = DecodeCpu(c);
  EXPECT_EQ(i.family, 0x19u);
  EXPECT_EQ(i.model, 0x1u);
  EXPECT_TRUE(i.hypervisor);
  EXPECT_EQ(i.hypervisor_vendor, "KVMKVMKVM");
  EXPECT_FALSE(i.pt_supported);
  EXPECT_FALSE(i.leaf14_0.has_value());
  EXPECT_FALSE(i.leaf15.has_value());
}

TEST(DecodeCpu, NoCpuid) {
  ::ptsnap::testing::FakeCpuid c;
  EXPECT_FALSE(DecodeCpu(c).available);
}

TEST(HostCpuid, AnswersLeafZeroOnX86) {
#if defined(__x86_64__)
  HostCpuid h;
  CpuInfo i = DecodeCpu(h);
  EXPECT_TRUE(i.available);
  EXPECT_FALSE(i.vendor.empty());
  EXPECT_GE(i.family, 1u);
#else
  GTEST_SKIP() << "cpuid exists only on x86";
#endif
}

}  // namespace
}  // namespace ptsnap::sys
