#include "decode/libipt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode/libipt_marks.h"
#include "decode/test_stream.h"
#include "tests/support/result_matchers.h"

namespace ptsnap::decode {
namespace {

TEST(LibiptTest, ConfigFromManifest) {
  trace::Manifest m = testing::CallsManifest(1);
  m.cpu.cpuid_15_eax = 2;
  m.cpu.cpuid_15_ebx = 100;
  m.pt.mtc_freq = 3;
  m.pt.nom_freq = 24;
  m.pt.addr0_a = 0x1000;
  m.pt.addr0_b = 0x2000;
  struct pt_config c = MakePtConfig(m);
  EXPECT_EQ(c.cpu.vendor, pcv_intel);
  EXPECT_EQ(c.cpu.model, 85);
  EXPECT_EQ(c.cpuid_0x15_eax, 2u);
  EXPECT_EQ(c.cpuid_0x15_ebx, 100u);
  EXPECT_EQ(c.mtc_freq, 3);
  EXPECT_EQ(c.nom_freq, 24);
  EXPECT_EQ(c.addr_filter.config.ctl.addr0_cfg, 1u);
  EXPECT_EQ(c.addr_filter.addr0_b, 0x2000u);
  EXPECT_TRUE(c.flags.variant.block.end_on_call);
  EXPECT_TRUE(c.flags.variant.block.end_on_jump);
  // Skylake server (6/85) has known errata libipt works around.
  EXPECT_TRUE(c.errata.skd022 || c.errata.skl014 || c.errata.skd010);
}

// A configuration libipt refuses (no buffer to decode) is an error, not a
// null owner.
TEST(LibiptTest, RefusedDecoderConfigIsAnError) {
  struct pt_config c = MakePtConfig(testing::CallsManifest(1));
  EXPECT_THAT(NewBlockDecoder(c), ::ptsnap::testing::HasErrorContaining("libipt refused"));
  uint8_t buf[16] = {};
  c.begin = buf;
  c.end = buf + sizeof buf;
  auto dec = NewBlockDecoder(c);
  ASSERT_THAT(dec, ::ptsnap::testing::HasValue());
  EXPECT_NE(dec->get(), nullptr);
}

// perf's signature jump, byte for byte (perf-intel-pt.txt, "Emulated
// PTWRITE"): `jmp .+16`, ud2, "perf,ptwrite  "; nothing shorter or else.
TEST(LibiptMarksTest, TheSignatureJumpIsPerfsBytes) {
  std::string code("\xeb\x10\x0f\x0bperf,ptwrite  \x48\x89\xf8", 21);
  auto is = [](const std::string& b) {
    return LibiptMarks::IsSignatureJump(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  EXPECT_TRUE(is(code));
  EXPECT_TRUE(is(code.substr(0, 18)));
  EXPECT_FALSE(is(code.substr(0, 17)));  // the section ends inside it
  std::string other = code;
  other[1] = 0x11;  // a jump that does not land after the text
  EXPECT_FALSE(is(other));
  other = code;
  other[17] = 'x';
  EXPECT_FALSE(is(other));
}

}  // namespace
}  // namespace ptsnap::decode
