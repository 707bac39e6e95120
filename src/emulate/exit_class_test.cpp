#include "emulate/exit_class.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptsnap::emulate {
namespace {

std::optional<InsnExit> Classify(std::vector<uint8_t> bytes, uint64_t ip = 0x401000) {
  return ClassifyInstruction(bytes, ip);
}

TEST(ExitClass, ConditionalBranchHasTargetAndFallthrough) {
  auto e = Classify({0x74, 0x10});  // je +0x10
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, ExitKind::kCond);
  EXPECT_EQ(e->target, 0x401012u);
  EXPECT_EQ(e->fallthrough, 0x401002u);
  EXPECT_EQ(Classify({0x0f, 0x85, 0x00, 0x01, 0x00, 0x00})->kind, ExitKind::kCond);  // jne rel32
  EXPECT_EQ(Classify({0xe2, 0xfe})->kind, ExitKind::kCond);                          // loop
  EXPECT_EQ(Classify({0xe3, 0x00})->kind, ExitKind::kCond);                          // jrcxz
}

TEST(ExitClass, DirectAndIndirectJumpsAndCalls) {
  auto jmp = Classify({0xe9, 0x00, 0x01, 0x00, 0x00});
  EXPECT_EQ(jmp->kind, ExitKind::kDirect);
  EXPECT_EQ(jmp->target, 0x401105u);
  auto call = Classify({0xe8, 0x10, 0x00, 0x00, 0x00});
  EXPECT_EQ(call->kind, ExitKind::kDirectCall);
  EXPECT_EQ(call->target, 0x401015u);
  EXPECT_TRUE(call->pushes);
  EXPECT_EQ(Classify({0xff, 0xe0})->kind, ExitKind::kIndirect);                    // jmp rax
  EXPECT_EQ(Classify({0xff, 0x24, 0xc5, 0, 0, 0, 0})->kind, ExitKind::kIndirect);  // jmp [rax*8]
  auto icall = Classify({0xff, 0xd0});                                             // call rax
  EXPECT_EQ(icall->kind, ExitKind::kIndirectCall);
  EXPECT_TRUE(icall->pushes);
}

TEST(ExitClass, CallToNextInstructionIsNotPushed) {
  auto e = Classify({0xe8, 0x00, 0x00, 0x00, 0x00});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, ExitKind::kDirectCall);
  EXPECT_FALSE(e->pushes);
}

TEST(ExitClass, ReturnsSyscallsAndRep) {
  EXPECT_EQ(Classify({0xc3})->kind, ExitKind::kRet);
  EXPECT_EQ(Classify({0xc2, 0x08, 0x00})->kind, ExitKind::kRet);   // ret 8
  EXPECT_EQ(Classify({0xcb})->kind, ExitKind::kIndirect);          // far ret
  EXPECT_EQ(Classify({0x0f, 0x05})->kind, ExitKind::kFar);         // syscall
  EXPECT_EQ(Classify({0xcd, 0x80})->kind, ExitKind::kFar);         // int 0x80
  EXPECT_EQ(Classify({0xf3, 0xa4})->kind, ExitKind::kRep);         // rep movsb
  EXPECT_EQ(Classify({0xa4})->kind, ExitKind::kNone);              // movsb
  EXPECT_EQ(Classify({0x48, 0x89, 0xc3})->kind, ExitKind::kNone);  // mov rbx, rax
}

TEST(ExitClass, TruncatedPageCrossingInstructionIsRejected) {
  EXPECT_FALSE(Classify({0x0f, 0x84}));  // the first two bytes of a je rel32
  EXPECT_FALSE(Classify({0xc3, 0x90}));  // decodes to one byte, not two
}

}  // namespace
}  // namespace ptsnap::emulate
