#include "flow/packets.h"

#include <gtest/gtest.h>

#include <vector>

#include "emulate/pt_packets.h"

namespace ptsnap::flow {
namespace {

using emulate::IpCompression;
using emulate::IpPacket;
using emulate::PacketWriter;

std::vector<Packet> ParseAll(const PacketWriter& w, int* error = nullptr) {
  std::vector<Packet> out;
  const auto bytes = w.bytes();
  const uint8_t* p = bytes.data();
  const uint8_t* end = p + bytes.size();
  while (p < end) {
    Packet pk;
    const int n = ParsePacket(p, end, &pk);
    if (n < 0) {
      if (error != nullptr) *error = n;
      break;
    }
    PacketType t;
    EXPECT_EQ(FetchType(p, end, &t), 0);
    EXPECT_EQ(t, pk.type);
    out.push_back(pk);
    p += n;
  }
  return out;
}

TEST(PacketsTest, ParsesWhatTheWriterWrites) {
  PacketWriter w;
  w.Psb();
  w.Tsc(0x123456789abcdull);
  w.Tma(0x1234, 0x1ff);
  w.Cbr(42);
  w.ModeExec64();
  w.Ip(IpPacket::kFup, 0x401000, IpCompression::kSext48);
  w.PsbEnd();
  w.Tnt(0b101, 3);
  w.Tnt(0x5555aaaa, 40);  // long TNT
  w.Ip(IpPacket::kTip, 0x1234, IpCompression::kUpdate16);
  w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
  w.Ip(IpPacket::kTipPge, 0x7fff00001000ull, IpCompression::kFull);
  w.Mtc(7);
  w.Cyc(1);
  w.Cyc(0x12345);
  w.Ovf();
  w.ModeTsx(true, false);
  w.TraceStop();
  const auto p = ParseAll(w);
  ASSERT_EQ(p.size(), 18u);
  EXPECT_EQ(p[0].type, PacketType::kPsb);
  EXPECT_EQ(p[1].type, PacketType::kTsc);
  EXPECT_EQ(p[1].payload, 0x123456789abcdull);
  EXPECT_EQ(p[2].type, PacketType::kTma);
  EXPECT_EQ(p[2].payload, 0x1234u);
  EXPECT_EQ(p[2].fc, 0x1ffu);
  EXPECT_EQ(p[3].type, PacketType::kCbr);
  EXPECT_EQ(p[3].payload, 42u);
  EXPECT_EQ(p[4].type, PacketType::kMode);
  EXPECT_EQ(p[4].mode_leaf, 0);
  EXPECT_EQ(p[4].mode_bits & 1, 1);  // CS.L
  EXPECT_EQ(p[5].type, PacketType::kFup);
  EXPECT_EQ(p[5].ipc, 3);
  EXPECT_EQ(p[5].payload, 0x401000u);
  EXPECT_EQ(p[6].type, PacketType::kPsbEnd);
  EXPECT_EQ(p[7].type, PacketType::kTnt8);
  EXPECT_EQ(p[7].tnt_bits, 3);
  EXPECT_EQ(p[7].payload, 0b101u);
  EXPECT_EQ(p[8].type, PacketType::kTnt64);
  EXPECT_EQ(p[8].tnt_bits, 40);
  EXPECT_EQ(p[8].payload, 0x5555aaaau);
  EXPECT_EQ(p[9].type, PacketType::kTip);
  EXPECT_EQ(p[9].ipc, 1);
  EXPECT_EQ(p[9].payload, 0x1234u);
  EXPECT_EQ(p[10].type, PacketType::kTipPgd);
  EXPECT_EQ(p[10].ipc, 0);
  EXPECT_EQ(p[11].type, PacketType::kTipPge);
  EXPECT_EQ(p[11].payload, 0x7fff00001000ull);
  EXPECT_EQ(p[12].type, PacketType::kMtc);
  EXPECT_EQ(p[12].payload, 7u);
  EXPECT_EQ(p[13].type, PacketType::kCyc);
  EXPECT_EQ(p[13].payload, 1u);
  EXPECT_EQ(p[14].payload, 0x12345u);
  EXPECT_EQ(p[15].type, PacketType::kOvf);
  EXPECT_EQ(p[16].type, PacketType::kMode);
  EXPECT_EQ(p[16].mode_leaf, 1);
  EXPECT_EQ(p[16].mode_bits, 1);
  EXPECT_EQ(p[17].type, PacketType::kStop);
}

TEST(PacketsTest, CutOffPacketsAreEndOfStream) {
  PacketWriter w;
  w.Tsc(1);
  const auto bytes = w.bytes();
  Packet pk;
  EXPECT_EQ(ParsePacket(bytes.data(), bytes.data() + 4, &pk), kErrEos);
  PacketType t;
  EXPECT_EQ(FetchType(bytes.data(), bytes.data() + 1, &t), 0);  // the opcode is there
  EXPECT_EQ(t, PacketType::kTsc);
}

TEST(PacketsTest, UnknownOpcodesAndReservedFieldsAreErrors) {
  const uint8_t bad_opc[] = {0xd9};
  Packet pk;
  EXPECT_EQ(ParsePacket(bad_opc, bad_opc + 1, &pk), kErrBadOpc);
  PacketType t;
  EXPECT_EQ(FetchType(bad_opc, bad_opc + 1, &t), 0);
  EXPECT_EQ(t, PacketType::kUnknown);
  const uint8_t reserved_ipc[] = {0xad, 0, 0, 0, 0, 0, 0, 0, 0};  // TIP with IPBytes 5
  EXPECT_EQ(ParsePacket(reserved_ipc, reserved_ipc + sizeof reserved_ipc, &pk), kErrBadPacket);
  const uint8_t bad_psb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                               0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x83};
  EXPECT_EQ(ParsePacket(bad_psb, bad_psb + 16, &pk), kErrBadPacket);
}

TEST(PacketsTest, SizesPagingVmcsMntPtwAndPowerPackets) {
  // PIP, VMCS, MNT, PTW (4 and 8 bytes), PWRE, PWRX, EXSTOP, MWAIT: sizes by the SDM.
  const std::vector<std::pair<std::vector<uint8_t>, PacketType>> cases = {
      {{0x02, 0x43, 1, 2, 3, 4, 5, 6}, PacketType::kPip},
      {{0x02, 0xc8, 1, 2, 3, 4, 5}, PacketType::kVmcs},
      {{0x02, 0xc3, 0x88, 1, 2, 3, 4, 5, 6, 7, 8}, PacketType::kMnt},
      {{0x02, 0x12, 1, 2, 3, 4}, PacketType::kPtw},
      {{0x02, 0x32, 1, 2, 3, 4, 5, 6, 7, 8}, PacketType::kPtw},
      {{0x02, 0x22, 1, 2}, PacketType::kPwre},
      {{0x02, 0xa2, 1, 2, 3, 4, 5}, PacketType::kPwrx},
      {{0x02, 0x62}, PacketType::kExstop},
      {{0x02, 0xc2, 1, 2, 3, 4, 5, 6, 7, 8}, PacketType::kMwait},
  };
  for (const auto& [bytes, type] : cases) {
    Packet pk;
    EXPECT_EQ(ParsePacket(bytes.data(), bytes.data() + bytes.size(), &pk),
              static_cast<int>(bytes.size()));
    EXPECT_EQ(pk.type, type);
  }
}

TEST(PacketsTest, ParsesThePayloadsOfPagingVmcsPtwAndPowerPackets) {
  PacketWriter w;
  w.Pip(0x12345000, true);
  w.Vmcs(0xabcde000);
  w.Ptw(0x1122334455667788, 8, true);
  w.Ptw(0x99aabbcc, 4, false);
  w.Exstop(true);
  w.Exstop(false);
  w.Mwait(0x21, 0x3);
  w.Pwre(5, 3, true);
  w.Pwrx(6, 2, 0xd);
  const auto pk = ParseAll(w);
  ASSERT_EQ(pk.size(), 9u);
  EXPECT_EQ(pk[0].type, PacketType::kPip);
  EXPECT_EQ(pk[0].payload, 0x12345000u);
  EXPECT_EQ(pk[0].mode_bits, 1);  // non-root
  EXPECT_EQ(pk[1].payload, 0xabcde000u);
  EXPECT_EQ(pk[2].payload, 0x1122334455667788u);
  EXPECT_EQ(pk[2].size, 10);
  EXPECT_EQ(pk[2].mode_bits, 1);  // a FUP follows
  EXPECT_EQ(pk[3].payload, 0x99aabbccu);
  EXPECT_EQ(pk[3].size, 6);
  EXPECT_EQ(pk[3].mode_bits, 0);
  EXPECT_EQ(pk[4].mode_bits, 1);
  EXPECT_EQ(pk[5].mode_bits, 0);
  EXPECT_EQ(pk[6].payload, 0x21u | uint64_t{3} << 32);
  // PWRE: state in bits 15:12, sub-state in 11:8, HW in bit 3 (SDM 33.4.2.19).
  EXPECT_EQ(pk[7].payload, 0x5308u);
  // PWRX: last core C-state in bits 7:4, deepest in 3:0, wake reasons above.
  EXPECT_EQ(pk[8].payload, 0xd62u);
}

TEST(PacketsTest, FindsPsbs) {
  PacketWriter w;
  w.Tsc(5);
  w.Psb();
  const auto b = w.bytes();
  EXPECT_EQ(FindPsb(b.data(), b.data() + b.size(), 0), 8);
  EXPECT_EQ(FindPsb(b.data(), b.data() + b.size(), 9), -1);
}

}  // namespace
}  // namespace ptsnap::flow
