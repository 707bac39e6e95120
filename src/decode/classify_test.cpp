#include "decode/classify.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

namespace ptsnap::decode {
namespace {

// Blocks from libipt's block cache that end in a far transfer carry no
// instruction class; the decoder classifies the bytes itself.
TEST(ClassifyTest, ClassifiesFarTransfersFromTheirBytes) {
  auto cls = [](std::initializer_list<uint8_t> b, enum pt_exec_mode m = ptem_64bit) {
    std::vector<uint8_t> v(b);
    return ClassifyInstruction(v.data(), v.size(), m);
  };
  EXPECT_EQ(cls({0x0f, 0x05}), ptic_far_call);              // syscall
  EXPECT_EQ(cls({0xcd, 0x80}, ptem_32bit), ptic_far_call);  // int 0x80
  EXPECT_EQ(cls({0x48, 0x0f, 0x07}), ptic_far_return);      // sysretq
  EXPECT_EQ(cls({0x48, 0xcf}), ptic_far_return);            // iretq
  EXPECT_EQ(cls({0xcb}), ptic_far_return);                  // far ret
  EXPECT_EQ(cls({0xff, 0x1c, 0x24}), ptic_far_call);        // call far [rsp]
  EXPECT_EQ(cls({0xe8, 0, 0, 0, 0}), ptic_call);
  EXPECT_EQ(cls({0xff, 0xd0}), ptic_call);  // call rax
  EXPECT_EQ(cls({0xc3}), ptic_return);
  EXPECT_EQ(cls({0xff, 0xe0}), ptic_jump);  // jmp rax
  EXPECT_EQ(cls({0x74, 0x02}), ptic_cond_jump);
  EXPECT_EQ(cls({0x90}), ptic_other);
  EXPECT_EQ(cls({0x0f}), ptic_error);  // truncated
}

}  // namespace
}  // namespace ptsnap::decode
