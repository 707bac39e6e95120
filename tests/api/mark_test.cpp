// ptsnap/mark.h as a program sees it: the emulated PTWRITE's code is
// exactly the bytes its decoders look for (perf's jmp and magic, then 64
// shl/jc/nop with jc jumping over the nop), a string packs as perf prints
// it, and PTSNAP_PTWRITE is read once. Never sets PTSNAP_PTWRITE=1 before a
// mark: this host may have no PTWRITE (the instruction would fault).
#include "ptsnap/mark.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

#if defined(__x86_64__)

const uint8_t* EmulatedPtwriteCode() {
  return reinterpret_cast<const uint8_t*>(&ptsnap_emulate_ptwrite);
}

TEST(Mark, EmulatedPtwriteIsPerfsJmpAndMagicThen64ShlJcNop) {
  const uint8_t* p = EmulatedPtwriteCode();
  // endbr64 under -fcf-protection (Debian's default) comes first.
  const uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  if (std::memcmp(p, kEndbr64, sizeof(kEndbr64)) == 0) p += sizeof(kEndbr64);
  const uint8_t kHead[] = {0xeb, 0x10, 0x0f, 0x0b, 'p', 'e', 'r', 'f', ',',
                           'p',  't',  'w',  'r',  'i', 't', 'e', ' ', ' '};
  ASSERT_EQ(std::memcmp(p, kHead, sizeof(kHead)), 0) << "jmp .+16, ud2, \"perf,ptwrite  \"";
  p += sizeof(kHead);
  const uint8_t kMovRdiRax[] = {0x48, 0x89, 0xf8};
  ASSERT_EQ(std::memcmp(p, kMovRdiRax, sizeof(kMovRdiRax)), 0) << "mov %rdi,%rax";
  p += sizeof(kMovRdiRax);
  // shl $1,%rax; jc over the nop (rel8 1); nop.
  const uint8_t kBit[] = {0x48, 0xd1, 0xe0, 0x72, 0x01, 0x90};
  for (int bit = 0; bit < 64; ++bit, p += sizeof(kBit))
    ASSERT_EQ(std::memcmp(p, kBit, sizeof(kBit)), 0) << "bit " << bit;
  EXPECT_EQ(*p, 0xc3) << "ret after the 64th branch";
}

TEST(Mark, EmulatedPtwriteReturnsAndLeavesCallerStateAlone) {
  // The function clobbers only %rax and the flags, both caller-saved.
  volatile uint64_t sum = 0;
  for (uint64_t v : {uint64_t{0}, ~uint64_t{0}, uint64_t{0x8000000000000001}, uint64_t{42}}) {
    ptsnap_mark(v);
    sum = sum + v;
  }
  EXPECT_EQ(sum, uint64_t{0x8000000000000001} + 42 - 1);
}

TEST(Mark, PtwriteModeIsReadOnceFromTheEnvironment) {
  ::unsetenv("PTSNAP_PTWRITE");
  EXPECT_EQ(ptsnap_use_ptwrite_(), 0);
  ::setenv("PTSNAP_PTWRITE", "1", 1);
  EXPECT_EQ(ptsnap_use_ptwrite_(), 0) << "cached at the first mark";
  ptsnap_mark(7);  // still the emulated encoding: no PTWRITE executed
  ::unsetenv("PTSNAP_PTWRITE");
}

#endif

TEST(Mark, StringPacksLittleEndianAsPerfPrintsIt) {
  EXPECT_EQ(ptsnap_mark_value_of_str("Hello"), uint64_t{0x6f6c6c6548});
  EXPECT_EQ(ptsnap_mark_value_of_str("abcdefgh"), uint64_t{0x6867666564636261});
  EXPECT_EQ(ptsnap_mark_value_of_str("abcdefghij"), uint64_t{0x6867666564636261})
      << "only the first 8 bytes";
  EXPECT_EQ(ptsnap_mark_value_of_str(""), uint64_t{0});
  EXPECT_EQ(ptsnap_mark_value_of_str(nullptr), uint64_t{0});
  EXPECT_EQ(ptsnap_mark_value_of_str("\xff"), uint64_t{0xff}) << "bytes are unsigned";
  ptsnap_mark_str("Hello");
}

}  // namespace
