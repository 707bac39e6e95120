#include "decode/fp_mend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "base/root_path.h"
#include "sys/proc_maps.h"

// A leaf in this test binary: at its first instruction the CFA is %rsp + 8
// whatever the build's flags.
extern "C" __attribute__((noinline)) uint64_t FpMendTestLeaf(uint64_t x) {
  __asm__ __volatile__("" : "+r"(x));
  return x * 3 + 1;
}

namespace ptsnap::decode {
namespace {

using ::testing::ElementsAre;

constexpr uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);
constexpr uint64_t kKernel = static_cast<uint64_t>(PERF_CONTEXT_KERNEL);
constexpr uint64_t kSp = 0x7ffd0000;

// main calls driver (return address 0x1010 into main), driver calls the
// leaf (return address 0x2010 into driver); the leaf runs at 0x3001.
// main's caller is libc at 0x5010.
constexpr uint64_t kLeafIp = 0x3001, kIntoDriver = 0x2010, kIntoMain = 0x1010;
constexpr uint64_t kIntoLibc = 0x5010;

// A sample as the kernel records it with REGS_USER (BP, SP, IP) and a
// STACK_USER copy of `words` from %rsp up.
struct FpSample {
  std::vector<std::byte> stack;
  Sample s;
  FpSample(std::vector<uint64_t> chain, const std::vector<uint64_t>& words, uint64_t ip = kLeafIp,
           size_t copy_bytes = 512) {
    s.ip = ip;
    s.callchain = std::move(chain);
    s.regs_abi = PERF_SAMPLE_REGS_ABI_64;
    s.regs_mask = (1u << kPerfRegBp) | (1u << kPerfRegSp) | (1u << kPerfRegIp);
    s.regs[kPerfRegBp] = kSp + 0x40;  // driver's frame
    s.regs[kPerfRegSp] = kSp;
    s.regs[kPerfRegIp] = ip;
    stack.resize(copy_bytes);
    if (!words.empty())
      std::memcpy(stack.data(), words.data(), std::min(copy_bytes, words.size() * 8));
    s.stack = stack;
    s.stack_dyn_size = std::min(copy_bytes, words.size() * 8);
  }
  std::vector<StackFrame> Frames() const { return CallchainFrames(s, false, 256); }
};

elf::FrameRule Rsp(int64_t offset) {
  return {.cfa_known = true,
          .cfa_reg = elf::kDwarfRsp,
          .cfa_offset = offset,
          .ra = elf::FrameRule::Ra::kSaved,
          .ra_offset = -8};
}
elf::FrameRule Rbp(int64_t offset) {
  elf::FrameRule r = Rsp(offset);
  r.cfa_reg = elf::kDwarfRbp;
  return r;
}

// What the kernel's walk records from a frameless leaf: the IP, then
// [%rbp + 8] with %rbp still driver's frame: main's return address, driver
// missing.
const std::vector<uint64_t> kLeafChain = {kUser, kLeafIp, kIntoMain, kIntoLibc};

TEST(MendFpChain, InsertsTheCallerOfAFramelessLeaf) {
  // CFA = %rsp + 8: the return address into driver is at %rsp.
  FpSample f(kLeafChain, {kIntoDriver, 0x1111});
  auto frames = f.Frames();
  uint64_t inserted = 0;
  EXPECT_EQ(MendFpChain(f.s, Rsp(8), &frames, 256, &inserted), FpMend::kMended);
  EXPECT_THAT(frames, ElementsAre(StackFrame{kLeafIp, false}, StackFrame{kIntoDriver, true},
                                  StackFrame{kIntoMain, true}, StackFrame{kIntoLibc, true}));
  EXPECT_EQ(inserted, kIntoDriver);
}

TEST(MendFpChain, ReadsTheReturnAddressAtTheCfaOfAPrologue) {
  // After `push %rbp`, before `mov %rsp,%rbp`: CFA = %rsp + 16, the return
  // address at %rsp + 8 (the caller's %rbp at %rsp).
  FpSample f(kLeafChain, {kSp + 0x40, kIntoDriver});
  auto frames = f.Frames();
  EXPECT_EQ(MendFpChain(f.s, Rsp(16), &frames, 256), FpMend::kMended);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_EQ(frames[1], (StackFrame{kIntoDriver, true}));
  // A frameless function with pushes and locals: CFA = %rsp + 0x48.
  std::vector<uint64_t> words(9, 0x9999);
  words[8] = kIntoDriver;
  FpSample deep(kLeafChain, words);
  frames = deep.Frames();
  EXPECT_EQ(MendFpChain(deep.s, Rsp(0x48), &frames, 256), FpMend::kMended);
  EXPECT_EQ(frames[1], (StackFrame{kIntoDriver, true}));
}

TEST(MendFpChain, LeavesAChainWhoseFramePointerHeldTheFrame) {
  // Inside a frame: CFA = %rbp + 16, the kernel's walk began right.
  const std::vector<uint64_t> chain = {kUser, kLeafIp, kIntoDriver, kIntoMain, kIntoLibc};
  FpSample f(chain, {0x1234});
  auto frames = f.Frames();
  const auto before = frames;
  EXPECT_EQ(MendFpChain(f.s, Rbp(16), &frames, 256), FpMend::kRight);
  EXPECT_EQ(frames, before);
  // The outermost frame (_start: the return address undefined) misses no caller.
  elf::FrameRule start = Rsp(8);
  start.ra = elf::FrameRule::Ra::kUndefined;
  EXPECT_EQ(MendFpChain(f.s, start, &frames, 256), FpMend::kRight);
  EXPECT_EQ(frames, before);
}

TEST(MendFpChain, CountsWhatItCannotCheckAndChangesNothing) {
  FpSample f(kLeafChain, {kIntoDriver});
  const auto before = f.Frames();
  auto frames = before;
  // No CFI at the IP (JIT code, no FDE).
  EXPECT_EQ(MendFpChain(f.s, std::nullopt, &frames, 256), FpMend::kNoRule);
  // A CFA expression (a PLT stub) or on another register (stack realignment).
  elf::FrameRule expr = Rsp(8);
  expr.cfa_known = false;
  EXPECT_EQ(MendFpChain(f.s, expr, &frames, 256), FpMend::kNoRule);
  elf::FrameRule r10 = Rsp(0);
  r10.cfa_reg = 10;
  EXPECT_EQ(MendFpChain(f.s, r10, &frames, 256), FpMend::kNoRule);
  // The return address past the copy: 512 bytes copied, CFA at %rsp + 600;
  // and past dyn_size (the stack's top was nearer than the copy's size).
  EXPECT_EQ(MendFpChain(f.s, Rsp(600), &frames, 256), FpMend::kNoStack);
  EXPECT_EQ(MendFpChain(f.s, Rsp(16), &frames, 256), FpMend::kNoStack);  // dyn_size 8
  // Zero where the return address should be: not a caller.
  FpSample zero(kLeafChain, {0});
  EXPECT_EQ(MendFpChain(zero.s, Rsp(8), &frames, 256), FpMend::kNoStack);
  // A recording without user registers.
  FpSample no_regs(kLeafChain, {kIntoDriver});
  no_regs.s.regs_abi = PERF_SAMPLE_REGS_ABI_NONE;
  EXPECT_EQ(MendFpChain(no_regs.s, Rsp(8), &frames, 256), FpMend::kNoStack);
  EXPECT_EQ(frames, before);
  // A kernel thread: no user IP, nothing to check.
  FpSample kthread({kKernel, 0xffffffff81000010, 0xffffffff81000020}, {});
  kthread.s.ip = 0xffffffff81000010;
  kthread.s.regs_abi = PERF_SAMPLE_REGS_ABI_NONE;
  auto kframes = kthread.Frames();
  EXPECT_EQ(MendFpChain(kthread.s, std::nullopt, &kframes, 256), FpMend::kNoUser);
}

TEST(MendFpChain, MendsTheUserPartOfASampleTakenInTheKernel) {
  // In a system call: kernel frames, then the user IP where it entered.
  const uint64_t k1 = 0xffffffff81000010, k2 = 0xffffffff81000020;
  FpSample f({kKernel, k1, k2, kUser, kLeafIp, kIntoMain}, {kIntoDriver});
  f.s.ip = k1;
  auto frames = f.Frames();
  EXPECT_EQ(MendFpChain(f.s, Rsp(8), &frames, 256), FpMend::kMended);
  EXPECT_THAT(frames,
              ElementsAre(StackFrame{k1, false}, StackFrame{k2, true}, StackFrame{kLeafIp, false},
                          StackFrame{kIntoDriver, true}, StackFrame{kIntoMain, true}));
}

TEST(MendFpChain, KeepsTheDepthCap) {
  FpSample f(kLeafChain, {kIntoDriver});
  auto frames = f.Frames();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(MendFpChain(f.s, Rsp(8), &frames, 3), FpMend::kMended);
  EXPECT_THAT(frames, ElementsAre(StackFrame{kLeafIp, false}, StackFrame{kIntoDriver, true},
                                  StackFrame{kIntoMain, true}));
}

// The mender looks the rule up in the .eh_frame of the file mapped at the
// IP: this test binary, at its leaf's entry, as /proc/self/maps maps it.
TEST(FpChainMender, FindsTheRuleInTheMappedFile) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  auto maps = sys::ReadProcMaps(base::RootPath("/"), 0);
  ASSERT_TRUE(maps.has_value());
  std::vector<CodeMapping> code;
  for (const sys::MapEntry& m : *maps)
    if (m.exec && m.path == self.string()) code.push_back({m.start, m.end, m.offset, self});
  ASSERT_FALSE(code.empty());
  Symbolizer symbolizer;
  FpChainMender mender([&](int32_t) { return code; }, &symbolizer);
  const auto leaf = reinterpret_cast<uint64_t>(&FpMendTestLeaf);
  const std::optional<elf::FrameRule> rule = mender.RuleAt(1, leaf);
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(*rule, Rsp(8));
  EXPECT_FALSE(mender.RuleAt(1, 0x1000).has_value());  // nothing mapped there

  // A sample at the leaf's entry: its caller read at %rsp.
  FpSample f({kUser, leaf, kIntoMain}, {kIntoDriver}, leaf);
  auto frames = f.Frames();
  EXPECT_EQ(mender.Mend(1, f.s, &frames, 256), FpMend::kMended);
  EXPECT_THAT(frames, ElementsAre(StackFrame{leaf, false}, StackFrame{kIntoDriver, true},
                                  StackFrame{kIntoMain, true}));

  // A caller that keeps no frame pointer either (its call is in code whose
  // CFA is %rsp-based: here, as if the leaf had called from its entry):
  // mended, but the walk above it is not to be trusted.
  FpSample g({kUser, leaf, kIntoMain}, {leaf + 1}, leaf);
  frames = g.Frames();
  EXPECT_EQ(mender.Mend(1, g.s, &frames, 256), FpMend::kMendedCallerHasNoFrame);
  EXPECT_THAT(frames, ElementsAre(StackFrame{leaf, false}, StackFrame{leaf + 1, true},
                                  StackFrame{kIntoMain, true}));
  EXPECT_EQ(FpMendTestLeaf(1), 4u);
}

}  // namespace
}  // namespace ptsnap::decode
