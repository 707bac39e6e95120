// The flow decoder against libipt on synthetic streams of the decoder test
// program (tests/programs/decode/calls.S): the streams src/decode's tests
// use, back to back, cut off, corrupted, and with timing packets (TMA, MTC,
// CYC, CBR, TSC) and event packets (OVF, MODE.TSX, FUP, TIP.PGD/PGE,
// TraceStop, PAD) inserted between packets. Both must yield the same items
// up to the first error and resync at the same PSB (flow_decoder.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <variant>

#include "decode/libipt.h"
#include "decode/test_stream.h"
#include "elf/symbol_file.h"
#include "emulate/pt_packets.h"
#include "flow/libipt_oracle.h"
#include "flow/packets.h"

namespace ptsnap::flow {
namespace {

struct Fixture {
  decode::testing::CallsProgram prog = decode::testing::LoadCallsProgram();
  CodeImage code;
  // The program's executable segments as they are in the file (not the
  // page-rounded mappings: bytes past .text are string tables, where
  // Zydis and libipt's length decoder disagree on what is an instruction).
  Fixture() {
    auto elf = elf::SymbolFile::Open(prog.path);
    EXPECT_TRUE(elf.has_value());
    for (const auto& seg : elf->segments()) {
      if (seg.exec) {
        EXPECT_TRUE(code.AddFile(prog.path, seg.offset, seg.filesz, seg.vaddr).has_value());
      }
    }
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

struct pt_config Config(const std::string& bytes, bool timing) {
  struct pt_config cfg = decode::MakePtConfig(decode::testing::CallsManifest(1));
  if (timing) {
    cfg.cpuid_0x15_eax = 2;
    cfg.cpuid_0x15_ebx = 200;
    cfg.mtc_freq = 3;
    cfg.nom_freq = 8;
  }
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  return cfg;
}

Comparison Diff(const std::string& bytes, bool timing = false) {
  const struct pt_config cfg = Config(bytes, timing);
  auto lib = DecodeWithLibipt(cfg, F().code.NewLibiptImage());
  CodeImage& code = F().code;
  auto ours = DecodeWithFlow(cfg, &code);
  return Compare(lib, ours);
}

// The packets of `s`, as byte strings (a packet that cannot be parsed ends it).
std::vector<std::string> Packets(const std::string& s) {
  std::vector<std::string> out;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  while (p < end) {
    Packet pk;
    const int n = ParsePacket(p, end, &pk);
    if (n <= 0) break;
    out.emplace_back(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    p += n;
  }
  return out;
}

std::string Bytes(const emulate::PacketWriter& w) {
  auto b = w.bytes();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// `base` with packets inserted between its packets: timing packets when
// `timing`, other packets (events, noise) when `events`.
std::string Mutate(const std::string& base, uint32_t seed, bool timing, bool events) {
  std::mt19937 rng(seed);
  std::string out;
  uint64_t tsc = 100000;
  uint8_t ctc = 0;
  for (const std::string& pk : Packets(base)) {
    out += pk;
    emulate::PacketWriter w;
    const unsigned r = rng() % 100;
    if (timing) {
      if (r < 30) w.Cyc(1 + rng() % 300);
      if (r >= 30 && r < 40) w.Mtc(ctc += static_cast<uint8_t>(1 + rng() % 3));
      if (r == 40) w.Tsc(tsc += 1000 + rng() % 5000);
      if (r == 41) w.Cbr(static_cast<uint8_t>(1 + rng() % 40));
      if (r == 42 && pk.size() == 8 && static_cast<uint8_t>(pk[0]) == 0x19)
        w.Tma(static_cast<uint16_t>(ctc), static_cast<uint16_t>(rng() % 0x200));
    }
    if (events) {
      const unsigned e = rng() % 200;
      if (e == 0) w.Ovf();
      if (e == 1) w.ModeTsx(true, false);
      if (e == 2) w.ModeTsx(false, rng() % 2 == 0);
      if (e == 3)
        w.Ip(emulate::IpPacket::kFup, F().prog.Sym("fib"), emulate::IpCompression::kSext48);
      if (e == 4) w.Ip(emulate::IpPacket::kTipPgd, 0, emulate::IpCompression::kSuppressed);
      if (e == 5)
        w.Ip(emulate::IpPacket::kTipPge, F().prog.Sym("leaf"), emulate::IpCompression::kSext48);
      if (e == 6) w.TraceStop();
      if (e == 7) w.Psb();
      if (e == 8) w.PsbEnd();
      if (e == 9) {
        const uint8_t pad = 0;
        w.Raw(&pad, 1);
      }
      if (e == 10)
        w.Ip(emulate::IpPacket::kTip, F().prog.Sym("main"), emulate::IpCompression::kUpdate16);
      if (e == 11) w.Tnt(1, 1);
    }
    out += Bytes(w);
  }
  return out;
}

void ExpectEqual(const Comparison& c, const std::string& what) {
  EXPECT_TRUE(c.equal) << what << ": " << c.message;
  EXPECT_FALSE(c.unsupported) << what << ": " << c.message;
}

TEST(FlowDiffTest, TheCallsProgram) {
  const std::string s = decode::testing::CallsProgramStream(F().prog);
  const Comparison c = Diff(s);
  ExpectEqual(c, "calls");
  EXPECT_TRUE(c.all_equal);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_GT(c.items, 100u);
}

TEST(FlowDiffTest, BackToBackCopies) {
  std::string s;
  for (int i = 0; i < 5; ++i) s += decode::testing::CallsProgramStream(F().prog, 1000 + 1000 * i);
  const Comparison c = Diff(s);
  ExpectEqual(c, "copies");
  EXPECT_TRUE(c.all_equal);
}

TEST(FlowDiffTest, EveryPrefix) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000);
  for (size_t n = 0; n <= s.size(); ++n) {
    const std::string t = s.substr(0, n);
    ExpectEqual(Diff(t), "prefix " + std::to_string(n));
  }
}

TEST(FlowDiffTest, CorruptedBytes) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000) +
                        decode::testing::CallsProgramStream(F().prog, 9000);
  std::mt19937 rng(7);
  size_t errors = 0;
  for (int i = 0; i < 600; ++i) {
    std::string t = s;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) t[rng() % t.size()] = static_cast<char>(rng());
    const Comparison c = Diff(t);
    errors += c.errors;
    ExpectEqual(c, "corruption " + std::to_string(i));
  }
  EXPECT_GT(errors, 100u);  // the corruptions do reach the error paths
}

TEST(FlowDiffTest, TimingPackets) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000);
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    ExpectEqual(Diff(Mutate(s, seed, true, false), true), "timing seed " + std::to_string(seed));
  }
}

TEST(FlowDiffTest, EventPackets) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000);
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    ExpectEqual(Diff(Mutate(s, seed, seed % 2 == 0, true), seed % 2 == 0),
                "events seed " + std::to_string(seed));
  }
}

}  // namespace
}  // namespace ptsnap::flow
