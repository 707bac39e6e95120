#include "decode/samples.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ptsnap::decode {
namespace {

using ::testing::ElementsAre;

constexpr uint64_t kBase = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                           PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
constexpr uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);
constexpr uint64_t kKernel = static_cast<uint64_t>(PERF_CONTEXT_KERNEL);

// Builds one record as the kernel lays it out.
class RecordBuilder {
 public:
  RecordBuilder& U64(uint64_t v) {
    Append(&v, 8);
    return *this;
  }
  RecordBuilder& Pair(uint32_t a, uint32_t b) {
    Append(&a, 4);
    Append(&b, 4);
    return *this;
  }
  RecordBuilder& Raw(const std::string& bytes) {
    body_ += bytes;
    return *this;
  }
  // The common fields: IDENTIFIER IP TID TIME CPU PERIOD.
  RecordBuilder& Base(uint64_t ip, uint32_t pid, uint32_t tid, uint64_t time) {
    return U64(7).U64(ip).Pair(pid, tid).U64(time).Pair(3, 0).U64(250000);
  }
  [[nodiscard]] std::string Build(uint32_t type = PERF_RECORD_SAMPLE, uint16_t misc = 2) const {
    perf_event_header h{type, misc, static_cast<uint16_t>(sizeof(h) + body_.size())};
    std::string out(reinterpret_cast<const char*>(&h), sizeof h);
    return out + body_;
  }

 private:
  void Append(const void* p, size_t n) { body_.append(static_cast<const char*>(p), n); }
  std::string body_;
};

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::vector<Sample> ReadAll(const std::string& bytes, const SampleLayout& layout,
                            SampleStreamStats* stats = nullptr) {
  SampleReader reader(Bytes(bytes), layout);
  std::vector<Sample> out;
  Sample s;
  while (reader.Next(&s)) out.push_back(s);
  if (stats != nullptr) *stats = reader.stats();
  return out;
}

TEST(Samples, ParsesTheBaseFields) {
  SampleLayout layout{kBase, 0};
  std::string rec = RecordBuilder().Base(0x401000, 10, 11, 5000).Build();
  auto samples = ReadAll(rec, layout);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].id, 7u);
  EXPECT_EQ(samples[0].ip, 0x401000u);
  EXPECT_EQ(samples[0].pid, 10u);
  EXPECT_EQ(samples[0].tid, 11u);
  EXPECT_EQ(samples[0].time, 5000u);
  EXPECT_EQ(samples[0].cpu, 3u);
  EXPECT_EQ(samples[0].period, 250000u);
  EXPECT_EQ(samples[0].misc, 2u);
  EXPECT_TRUE(samples[0].callchain.empty());
}

TEST(Samples, ParsesFieldsInKernelOrder) {
  // ADDR, ID, STREAM_ID between TIME and CPU; READ (one value with
  // enabled/running) after PERIOD; RAW after CALLCHAIN.
  SampleLayout layout{kBase | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                          PERF_SAMPLE_READ | PERF_SAMPLE_RAW | PERF_SAMPLE_CALLCHAIN,
                      0, PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING};
  uint32_t raw_size = 12;  // u32 size + 12 bytes: 8-byte aligned
  std::string raw(reinterpret_cast<const char*>(&raw_size), 4);
  raw += std::string(12, 'r');
  std::string rec = RecordBuilder()
                        .U64(7)
                        .U64(0x401000)
                        .Pair(10, 11)
                        .U64(5000)
                        .U64(0xdead)  // ADDR
                        .U64(99)      // ID (IDENTIFIER wins, same value normally)
                        .U64(98)      // STREAM_ID
                        .Pair(1, 0)   // CPU
                        .U64(42)      // PERIOD
                        .U64(1)       // READ: value
                        .U64(2)       // enabled
                        .U64(3)       // running
                        .U64(3)       // CALLCHAIN nr
                        .U64(kUser)
                        .U64(0x401000)
                        .U64(0x402000)
                        .Raw(raw)  // RAW
                        .Build();
  auto samples = ReadAll(rec, layout);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].addr, 0xdeadu);
  EXPECT_EQ(samples[0].id, 99u);
  EXPECT_EQ(samples[0].stream_id, 98u);
  EXPECT_EQ(samples[0].cpu, 1u);
  EXPECT_EQ(samples[0].period, 42u);
  EXPECT_THAT(samples[0].callchain, ElementsAre(kUser, 0x401000u, 0x402000u));
}

TEST(Samples, ParsesBranchStackRegsAndStack) {
  const uint64_t mask = (1u << kPerfRegBp) | (1u << kPerfRegSp) | (1u << kPerfRegIp);
  SampleLayout layout{kBase | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_BRANCH_STACK |
                          PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
                      mask};
  std::string stack(16, '\0');
  uint64_t word = 0x1234;
  std::memcpy(stack.data(), &word, 8);
  std::string rec = RecordBuilder()
                        .Base(0x401000, 10, 10, 1)
                        .U64(0)  // no callchain
                        .U64(2)  // two branch entries
                        .U64(0x401100)
                        .U64(0x401000)
                        .U64(0)
                        .U64(0x400100)
                        .U64(0x401080)
                        .U64(0)
                        .U64(PERF_SAMPLE_REGS_ABI_64)
                        .U64(0x7ff0)    // BP (bit 6)
                        .U64(0x7fe0)    // SP (bit 7)
                        .U64(0x401000)  // IP (bit 8)
                        .U64(16)        // stack size
                        .Raw(stack)
                        .U64(8)  // dyn_size
                        .Build();
  auto samples = ReadAll(rec, layout);
  ASSERT_EQ(samples.size(), 1u);
  const Sample& s = samples[0];
  EXPECT_THAT(s.branches,
              ElementsAre(BranchEntry{0x401100, 0x401000, 0}, BranchEntry{0x400100, 0x401080, 0}));
  EXPECT_EQ(s.regs_abi, static_cast<uint64_t>(PERF_SAMPLE_REGS_ABI_64));
  EXPECT_EQ(s.regs_mask, mask);
  EXPECT_EQ(s.regs[kPerfRegBp], 0x7ff0u);
  EXPECT_EQ(s.regs[kPerfRegSp], 0x7fe0u);
  EXPECT_EQ(s.regs[kPerfRegIp], 0x401000u);
  EXPECT_EQ(s.stack.size(), 16u);
  EXPECT_EQ(s.stack_dyn_size, 8u);
  uint64_t got = 0;
  std::memcpy(&got, s.stack.data(), 8);
  EXPECT_EQ(got, 0x1234u);
}

TEST(Samples, KernelThreadHasNoRegsAndAnEmptyStack) {
  SampleLayout layout{kBase | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER, kPerfRegsUser};
  // ABI none: no register values follow; stack size 0: no bytes, no dyn_size.
  std::string rec = RecordBuilder().Base(0xffffffff81000000, 0, 0, 1).U64(0).U64(0).Build();
  auto samples = ReadAll(rec, layout);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].regs_abi, 0u);
  EXPECT_EQ(samples[0].regs_mask, 0u);
  EXPECT_TRUE(samples[0].stack.empty());
}

TEST(Samples, CountsBadRecordsAndOtherTypesAndKeepsGoing) {
  SampleLayout layout{kBase | PERF_SAMPLE_CALLCHAIN, 0};
  std::string good = RecordBuilder().Base(1, 2, 2, 10).U64(1).U64(1).Build();
  // A callchain claiming 1000 entries in a small record.
  std::string bad = RecordBuilder().Base(1, 2, 2, 11).U64(1000).U64(1).Build();
  std::string other = RecordBuilder().Pair(2, 2).Build(PERF_RECORD_COMM);
  SampleStreamStats stats;
  auto samples = ReadAll(good + bad + other + good, layout, &stats);
  EXPECT_EQ(samples.size(), 2u);
  EXPECT_EQ(stats.samples, 2u);
  EXPECT_EQ(stats.bad_records, 1u);
  EXPECT_EQ(stats.other_records, 1u);
  EXPECT_EQ(stats.torn_bytes, 0u);
  EXPECT_THAT(stats.first_error, ::testing::HasSubstr("CALLCHAIN"));
  EXPECT_THAT(stats.first_error, ::testing::HasSubstr("offset " + std::to_string(good.size())));
}

TEST(Samples, ATornTailIsCountedNotParsed) {
  SampleLayout layout{kBase, 0};
  std::string good = RecordBuilder().Base(1, 2, 2, 10).Build();
  SampleStreamStats stats;
  auto samples = ReadAll(good + good.substr(0, 20), layout, &stats);
  EXPECT_EQ(samples.size(), 1u);
  EXPECT_EQ(stats.torn_bytes, 20u);
  // A header whose size is not a multiple of 8 (garbage) stops the reader.
  std::string garbage = good;
  garbage[6] = 13;
  samples = ReadAll(good + garbage + good, layout, &stats);
  EXPECT_EQ(samples.size(), 1u);
  EXPECT_EQ(stats.torn_bytes, 2 * good.size());
  // Fewer bytes than a header.
  samples = ReadAll(good.substr(0, 5), layout, &stats);
  EXPECT_TRUE(samples.empty());
  EXPECT_EQ(stats.torn_bytes, 5u);
}

TEST(Samples, EveryPrefixOfEveryFieldIsRejectedNotOverread) {
  const uint64_t mask = kPerfRegsUser;
  SampleLayout layout{kBase | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_BRANCH_STACK |
                          PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
                      mask};
  RecordBuilder b;
  b.Base(1, 2, 2, 3).U64(2).U64(kUser).U64(1).U64(1).U64(1).U64(2).U64(3);
  b.U64(PERF_SAMPLE_REGS_ABI_64);
  for (uint64_t m = mask; m != 0; m &= m - 1) b.U64(m);
  b.U64(8).U64(0xabc).U64(8);
  std::string full = b.Build();
  std::string body = full.substr(sizeof(perf_event_header));
  Sample s;
  ASSERT_TRUE(ParseSampleBody(Bytes(body), layout, &s));
  for (size_t n = 0; n < body.size(); n += 8) {
    EXPECT_FALSE(ParseSampleBody(Bytes(body.substr(0, n)), layout, &s)) << n;
  }
}

TEST(Samples, FpFramesDropMarkersAndTheRepeatedIp) {
  Sample s;
  s.ip = 0x401010;
  s.callchain = {kUser, 0x401010, 0x402020, 0x403030};
  EXPECT_THAT(CallchainFrames(s, false, 256),
              ElementsAre(StackFrame{0x401010, false}, StackFrame{0x402020, true},
                          StackFrame{0x403030, true}));
  // The chain without the IP first: the IP is the leaf.
  s.callchain = {kUser, 0x402020};
  EXPECT_THAT(CallchainFrames(s, false, 256),
              ElementsAre(StackFrame{0x401010, false}, StackFrame{0x402020, true}));
  // Empty chain: the IP alone.
  s.callchain.clear();
  EXPECT_THAT(CallchainFrames(s, false, 256), ElementsAre(StackFrame{0x401010, false}));
  // A walk through code without frame pointers ending in 0: no frame.
  s.callchain = {kUser, 0x401010, 0x402020, 0};
  EXPECT_THAT(CallchainFrames(s, false, 256),
              ElementsAre(StackFrame{0x401010, false}, StackFrame{0x402020, true}));
}

TEST(Samples, FpFramesKeepKernelAboveUser) {
  Sample s;
  s.ip = 0xffffffff81001000;
  s.callchain = {kKernel, 0xffffffff81001000, 0xffffffff81002000, kUser, 0x401010, 0x402020};
  // Innermost first: kernel frames, then the user IP where the kernel was
  // entered (not a return address), then user return addresses.
  EXPECT_THAT(
      CallchainFrames(s, false, 256),
      ElementsAre(StackFrame{0xffffffff81001000, false}, StackFrame{0xffffffff81002000, true},
                  StackFrame{0x401010, false}, StackFrame{0x402020, true}));
  EXPECT_THAT(CallchainFrames(s, true, 256), ElementsAre(StackFrame{0xffffffff81001000, false},
                                                         StackFrame{0xffffffff81002000, true}));
  EXPECT_EQ(CallchainFrames(s, false, 3).size(), 3u);
  // Guest frames are no process's.
  s.callchain = {static_cast<uint64_t>(PERF_CONTEXT_GUEST_KERNEL), 0xffffffff81001000};
  s.ip = 0x401010;
  EXPECT_THAT(CallchainFrames(s, false, 256), ElementsAre(StackFrame{0x401010, false}));
}

TEST(Samples, LbrFramesAreTheCallSitesOfTheBranchStack) {
  Sample s;
  s.ip = 0x401010;
  s.callchain = {kUser, 0x401010};
  s.branches = {{0x402005, 0x401000, 0}, {0x403005, 0x402000, 0}};
  EXPECT_THAT(LbrFrames(s, 256),
              ElementsAre(StackFrame{0x401010, false}, StackFrame{0x402005, false},
                          StackFrame{0x403005, false}));
  // Interrupted in the kernel: kernel frames first, the user IP from the chain.
  s.ip = 0xffffffff81001000;
  s.callchain = {kKernel, 0xffffffff81001000, kUser, 0x401010};
  EXPECT_THAT(LbrFrames(s, 256),
              ElementsAre(StackFrame{0xffffffff81001000, false}, StackFrame{0x401010, false},
                          StackFrame{0x402005, false}, StackFrame{0x403005, false}));
}

}  // namespace
}  // namespace ptsnap::decode
