#include "emulate/pt_stream.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <vector>

namespace ptsnap::emulate {
namespace {

// Decodes the stream's bytes back into packets with libipt's packet decoder.
std::vector<pt_packet> Packets(const PtStream& s) {
  auto bytes = s.bytes();
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = copy.data();
  cfg.end = copy.data() + copy.size();
  pt_packet_decoder* dec = pt_pkt_alloc_decoder(&cfg);
  std::vector<pt_packet> out;
  EXPECT_EQ(pt_pkt_sync_set(dec, 0), 0);
  for (;;) {
    pt_packet p;
    int r = pt_pkt_next(dec, &p, sizeof(p));
    if (r == -pte_eos) break;
    EXPECT_GE(r, 0) << pt_errstr(pt_errcode(r));
    if (r < 0) break;
    out.push_back(p);
  }
  pt_pkt_free_decoder(dec);
  return out;
}

TEST(PtStream, PsbCarriesTscModeAndFupWhenEnabled) {
  PtStream s;
  s.Psb(1234, true, 0x401000);
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].type, ppt_psb);
  EXPECT_EQ(p[1].type, ppt_tsc);
  EXPECT_EQ(p[1].payload.tsc.tsc, 1234u);
  EXPECT_EQ(p[2].type, ppt_mode);
  EXPECT_EQ(p[2].payload.mode.bits.exec.csl, 1u);
  EXPECT_EQ(p[3].type, ppt_fup);
  EXPECT_EQ(p[3].payload.ip.ipc, pt_ipc_sext_48);  // no last IP after PSB
  EXPECT_EQ(p[3].payload.ip.ip, 0x401000u);
  EXPECT_EQ(p[4].type, ppt_psbend);
}

TEST(PtStream, TntBatchesOldestBitFirstAndFlushesBeforeTip) {
  PtStream s;
  s.Psb(0, true, 0x401000);
  s.Take();
  for (bool b : {true, false, true, true}) s.Tnt(b);
  EXPECT_EQ(s.pending(), 0u);  // nothing written until a flush
  s.Tip(0x401234);
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].type, ppt_tnt_8);
  EXPECT_EQ(p[0].payload.tnt.bit_size, 4);
  EXPECT_EQ(p[0].payload.tnt.payload, 0b1011u);
  EXPECT_EQ(p[1].type, ppt_tip);
  EXPECT_EQ(p[1].payload.ip.ipc, pt_ipc_update_16);  // same upper 48 bits as the FUP
}

TEST(PtStream, LongTntHoldsAtMost47Bits) {
  PtStream s;
  for (int i = 0; i < 50; ++i) s.Tnt(i % 2 == 0);
  s.FlushTnt();
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].type, ppt_tnt_64);
  EXPECT_EQ(p[0].payload.tnt.bit_size, 47);
  EXPECT_EQ(p[1].type, ppt_tnt_8);
  EXPECT_EQ(p[1].payload.tnt.bit_size, 3);
}

TEST(PtStream, IpCompressionPicksTheShortestForm) {
  EXPECT_EQ(ChooseIpCompression(0x401234, 0x401000, true), pt_ipc_update_16);
  EXPECT_EQ(ChooseIpCompression(0x7f0012345678, 0x7f0012000000, true), pt_ipc_update_32);
  EXPECT_EQ(ChooseIpCompression(0x7f0012345678, 0x400000, true), pt_ipc_update_48);
  EXPECT_EQ(ChooseIpCompression(0x401234, 0, false), pt_ipc_sext_48);
  EXPECT_EQ(ChooseIpCompression(0xffffffff81000000, 0, false), pt_ipc_sext_48);
  EXPECT_EQ(ChooseIpCompression(0x0001000000000000, 0, false), pt_ipc_full);
}

TEST(PtStream, MatchingReturnIsCompressedAndPopped) {
  PtStream s;
  s.Psb(0, true, 0x401000);
  s.Take();
  s.Call(0x401005);
  s.Call(0x402005);
  s.Ret(0x402005);  // matches the top: one taken TNT bit
  s.Ret(0x999999);  // does not match 0x401005: TIP, no pop
  EXPECT_EQ(s.return_stack().size(), 1u);
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].type, ppt_tnt_8);
  EXPECT_EQ(p[0].payload.tnt.payload, 1u);
  EXPECT_EQ(p[1].type, ppt_tip);
}

TEST(PtStream, NoRetCompSendsEveryReturnAsTip) {
  PtStream s({.ret_compression = false});
  s.Call(0x401005);
  s.Ret(0x401005);
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].type, ppt_tip);
}

TEST(ReturnStack, DropsTheOldestBeyond64Entries) {
  ReturnStack r;
  for (uint64_t i = 0; i < 70; ++i) r.Push(i);
  EXPECT_EQ(r.size(), 64u);
  uint64_t top = 0;
  for (uint64_t i = 69; i >= 6; --i) {
    ASSERT_TRUE(r.Top(&top));
    EXPECT_EQ(top, i);
    r.Pop();
  }
  EXPECT_TRUE(r.empty());
}

TEST(PtStream, PgdClearsTheReturnStackAndSuppressesTheIp) {
  PtStream s;
  s.Psb(0, true, 0x401000);
  s.Take();
  s.Call(0x401005);
  s.Tnt(true);
  s.PgdSuppressed();
  EXPECT_TRUE(s.return_stack().empty());
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].type, ppt_tnt_8);
  EXPECT_EQ(p[1].type, ppt_tip_pgd);
  EXPECT_EQ(p[1].payload.ip.ipc, pt_ipc_suppressed);
  // Psb clears it too.
  s.Call(0x401005);
  s.Psb(0, false, 0);
  EXPECT_TRUE(s.return_stack().empty());
}

TEST(PtStream, PgeCarriesTscThenIp) {
  PtStream s;
  s.Pge(0x401000, 77);
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].type, ppt_tsc);
  EXPECT_EQ(p[1].type, ppt_tip_pge);
  EXPECT_EQ(p[1].payload.ip.ip, 0x401000u);
}

}  // namespace
}  // namespace ptsnap::emulate
