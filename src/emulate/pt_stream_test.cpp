#include "emulate/pt_stream.h"

#include "emulate/virtual_cpu.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <span>
#include <string>
#include <vector>

namespace ptsnap::emulate {
namespace {

// A copy of the stream's bytes and a libipt config over it.
struct Bytes {
  explicit Bytes(std::span<const uint8_t> bytes) : copy(bytes.begin(), bytes.end()) {
    pt_config_init(&cfg);
    cfg.begin = copy.data();
    cfg.end = copy.data() + copy.size();
  }
  std::vector<uint8_t> copy;
  pt_config cfg;
};

// Decodes the stream's bytes back into packets with libipt's packet decoder.
std::vector<pt_packet> Packets(std::span<const uint8_t> bytes) {
  Bytes b(bytes);
  pt_config& cfg = b.cfg;
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

std::vector<pt_packet> Packets(const PtStream& s) { return Packets(s.bytes()); }

// Every packet the writer lays out decodes, with libipt's packet decoder, to
// what was written, across the buffer's growth from its smallest size.
TEST(PacketWriter, EveryPacketDecodesToWhatWasWritten) {
  PacketWriter w(1);
  for (int round = 0; round < 200; ++round) {
    w.Psb();
    w.Tsc(1000 + round);
    w.Tma(0x1234, 7);
    w.Cbr(40);
    w.ModeExec64();
    w.PsbEnd();
    w.ModeTsx(true, false);
    w.Ip(IpPacket::kFup, 0x7f0000401000, IpCompression::kSext48);
    w.Ip(IpPacket::kTip, 0x401234, IpCompression::kUpdate16);
    w.Ip(IpPacket::kTipPge, 0xffffffff81000000, IpCompression::kFull);
    w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
    w.Tnt(0b101, 3);
    w.Tnt(0x2aaaaaaaaaaa, 47);
    w.Mtc(0x5a);
    w.Cyc(3);
    w.Cyc(uint64_t{1} << 40);
    w.Ovf();
  }
  auto p = Packets(w.bytes());
  ASSERT_EQ(p.size(), 200u * 17);
  for (size_t i = 0; i < p.size(); i += 17) {
    const uint64_t round = i / 17;
    EXPECT_EQ(p[i].type, ppt_psb);
    EXPECT_EQ(p[i + 1].payload.tsc.tsc, 1000 + round);
    EXPECT_EQ(p[i + 2].payload.tma.ctc, 0x1234);
    EXPECT_EQ(p[i + 2].payload.tma.fc, 7);
    EXPECT_EQ(p[i + 3].payload.cbr.ratio, 40);
    EXPECT_EQ(p[i + 4].payload.mode.leaf, pt_mol_exec);
    EXPECT_EQ(p[i + 5].type, ppt_psbend);
    EXPECT_EQ(p[i + 6].payload.mode.leaf, pt_mol_tsx);
    EXPECT_EQ(p[i + 6].payload.mode.bits.tsx.intx, 1u);
    EXPECT_EQ(p[i + 7].type, ppt_fup);
    EXPECT_EQ(p[i + 7].payload.ip.ipc, pt_ipc_sext_48);
    EXPECT_EQ(p[i + 7].payload.ip.ip, 0x7f0000401000u);
    EXPECT_EQ(p[i + 8].type, ppt_tip);
    EXPECT_EQ(p[i + 8].payload.ip.ipc, pt_ipc_update_16);
    EXPECT_EQ(p[i + 8].payload.ip.ip, 0x1234u);
    EXPECT_EQ(p[i + 9].type, ppt_tip_pge);
    EXPECT_EQ(p[i + 9].payload.ip.ip, 0xffffffff81000000u);
    EXPECT_EQ(p[i + 10].type, ppt_tip_pgd);
    EXPECT_EQ(p[i + 10].payload.ip.ipc, pt_ipc_suppressed);
    EXPECT_EQ(p[i + 11].type, ppt_tnt_8);
    EXPECT_EQ(p[i + 11].payload.tnt.bit_size, 3);
    EXPECT_EQ(p[i + 11].payload.tnt.payload, 0b101u);
    EXPECT_EQ(p[i + 12].type, ppt_tnt_64);
    EXPECT_EQ(p[i + 12].payload.tnt.bit_size, 47);
    EXPECT_EQ(p[i + 12].payload.tnt.payload, 0x2aaaaaaaaaaau);
    EXPECT_EQ(p[i + 13].payload.mtc.ctc, 0x5a);
    EXPECT_EQ(p[i + 14].payload.cyc.value, 3u);
    EXPECT_EQ(p[i + 15].payload.cyc.value, uint64_t{1} << 40);
    EXPECT_EQ(p[i + 16].type, ppt_ovf);
  }
  w.Clear();
  EXPECT_EQ(w.size(), 0u);
}

TEST(PacketWriter, PagingVmcsPtwAndPowerPacketsDecodeToWhatWasWritten) {
  PacketWriter w;
  w.Pip(0x12345000, true);
  w.Vmcs(0xabcde000);
  w.Ptw(0x1122334455667788, 8, true);
  w.Ptw(0x99aabbcc, 4, false);
  w.Exstop(true);
  w.Mwait(0x21, 3);
  w.Pwre(5, 3, true);
  w.Pwrx(6, 2, 0xd);
  auto p = Packets(w.bytes());
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].type, ppt_pip);
  EXPECT_EQ(p[0].payload.pip.cr3, 0x12345000u);
  EXPECT_EQ(p[0].payload.pip.nr, 1u);
  EXPECT_EQ(p[1].payload.vmcs.base, 0xabcde000u);
  EXPECT_EQ(p[2].type, ppt_ptw);
  EXPECT_EQ(p[2].payload.ptw.payload, 0x1122334455667788u);
  EXPECT_EQ(p[2].payload.ptw.plc, 1);
  EXPECT_EQ(p[2].payload.ptw.ip, 1u);
  EXPECT_EQ(p[3].payload.ptw.payload, 0x99aabbccu);
  EXPECT_EQ(p[3].payload.ptw.plc, 0);
  EXPECT_EQ(p[3].payload.ptw.ip, 0u);
  EXPECT_EQ(p[4].type, ppt_exstop);
  EXPECT_EQ(p[4].payload.exstop.ip, 1u);
  EXPECT_EQ(p[5].payload.mwait.hints, 0x21u);
  EXPECT_EQ(p[5].payload.mwait.ext, 3u);
  EXPECT_EQ(p[6].payload.pwre.state, 5);
  EXPECT_EQ(p[6].payload.pwre.sub_state, 3);
  EXPECT_EQ(p[6].payload.pwre.hw, 1u);
  EXPECT_EQ(p[7].payload.pwrx.last, 6);
  EXPECT_EQ(p[7].payload.pwrx.deepest, 2);
  EXPECT_EQ(p[7].payload.pwrx.interrupt, 1u);
  EXPECT_EQ(p[7].payload.pwrx.store, 1u);
  EXPECT_EQ(p[7].payload.pwrx.autonomous, 1u);
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

// The PSB period counts bytes since the last PSB, across the owner's
// Take()s (the plugin drains a thread at every syscall), from the PSB's
// first byte.
TEST(PtStream, SincePsbCountsAcrossTakes) {
  PtStream s;
  s.Tip(0x401000);
  const size_t before = s.pending();
  EXPECT_EQ(s.since_psb(), before);
  s.Psb(0, true, 0x401000);
  const size_t psb = s.pending() - before;
  EXPECT_EQ(s.since_psb(), psb);
  s.Take();
  EXPECT_EQ(s.since_psb(), psb);
  s.Tip(0x402000);
  const size_t tip = s.pending();
  EXPECT_GT(tip, 0u);
  EXPECT_EQ(s.since_psb(), psb + tip);
  s.Take();
  s.Tip(0x403000);
  EXPECT_EQ(s.since_psb(), psb + tip + s.pending());
  s.Psb(10, true, 0x403000);
  s.Take();
  s.Tip(0x404000);
  const size_t at = s.pending();
  s.Psb(20, true, 0x404000);  // a PSB in the middle of pending bytes
  const size_t psb2 = s.pending() - at;
  EXPECT_EQ(s.since_psb(), psb2);
  s.Take();
  EXPECT_EQ(s.since_psb(), psb2);  // the bytes before it no longer count
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

// --filter: a branch out of the ranges is a TIP.PGD carrying its target
// (compressed against the last IP), TNT bits flushed first; a tracestop
// range adds TraceStop after it.
TEST(PtStream, FilterPgdCarriesTheTargetAndTraceStopFollows) {
  PtStream s;
  s.Psb(0, true, 0x401000);
  s.Take();
  s.Call(0x401005);
  s.Tnt(false);
  s.Pgd(0x401234);
  s.TraceStop();
  EXPECT_TRUE(s.return_stack().empty());
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].type, ppt_tnt_8);
  EXPECT_EQ(p[1].type, ppt_tip_pgd);
  EXPECT_EQ(p[1].payload.ip.ipc, pt_ipc_update_16);
  EXPECT_EQ(p[1].payload.ip.ip, 0x1234u);
  EXPECT_EQ(p[2].type, ppt_stop);
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

// The virtual CPU's timing (virtual_cpu.h): 100 TSC ticks per CTC tick.
PtStreamOptions Timed(bool cyc, uint32_t mtc_freq, uint32_t cyc_thresh = 1) {
  PtStreamOptions o;
  o.mtc = true;
  o.mtc_freq = mtc_freq;
  o.cyc = cyc;
  o.cyc_thresh = cyc_thresh;
  o.tsc_per_ctc = kTscPerCtc;
  o.cbr = kCoreBusRatio;
  return o;
}

TEST(PtStreamTiming, PsbCarriesTmaAndCbrAndMtcFollowsTheCrystal) {
  PtStream s(Timed(/*cyc=*/false, /*mtc_freq=*/0));
  s.Psb(1000, true, 0x401000);  // CTC 10, FC 0
  s.Take();
  s.Tnt(true);
  s.SetTime(1199);  // crosses CTC 11 (TSC 1100) only
  s.Tnt(false);
  s.SetTime(1200);  // CTC 12
  s.FlushTnt();
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].type, ppt_tnt_8);  // flushed before the MTC: it came first
  EXPECT_EQ(p[1].type, ppt_mtc);
  EXPECT_EQ(p[1].payload.mtc.ctc, 11u);
  EXPECT_EQ(p[2].type, ppt_tnt_8);
  EXPECT_EQ(p[3].type, ppt_mtc);
  EXPECT_EQ(p[3].payload.mtc.ctc, 12u);

  PtStream h(Timed(false, 3));
  h.Psb(1234, false, 0);  // CTC 12, FC 34
  auto q = Packets(h);
  ASSERT_GE(q.size(), 5u);
  EXPECT_EQ(q[1].type, ppt_tsc);
  EXPECT_EQ(q[2].type, ppt_tma);
  EXPECT_EQ(q[2].payload.tma.ctc, 12u);
  EXPECT_EQ(q[2].payload.tma.fc, 34u);
  EXPECT_EQ(q[3].type, ppt_cbr);
  EXPECT_EQ(q[3].payload.cbr.ratio, kCoreBusRatio);
}

// A thread that starts after time 0: its stream begins with its PSB (no CYC
// before it, which no decoder could read: 3 "undecoded PT bytes" a thread),
// and the first CYC after it counts from the PSB's time. A later PSB+ has
// its CYC before it (the cycles since the last one).
TEST(PtStreamTiming, AStreamBeginsWithItsPsb) {
  PtStream s(Timed(/*cyc=*/true, /*mtc_freq=*/9));
  s.Psb(5000, true, 0x401000);
  s.SetTime(5010);
  s.Tip(0x401100);
  s.Psb(6000, true, 0x401100);
  auto p = Packets(s);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].type, ppt_psb);
  std::vector<uint64_t> cycs;
  for (const pt_packet& q : p)
    if (q.type == ppt_cyc) cycs.push_back(q.payload.cyc.value);
  EXPECT_EQ(cycs, (std::vector<uint64_t>{10, 990}));
}

TEST(PtStreamTiming, CycTimesTheFirstBranchOfATntAndRespectsTheThreshold) {
  PtStream s(Timed(/*cyc=*/true, /*mtc_freq=*/9));  // MTCs far apart
  s.Pge(0x401000, 100);
  s.Take();
  s.SetTime(105);
  s.Tnt(true);  // first bit at 105
  s.SetTime(109);
  s.Tnt(true);
  s.SetTime(112);
  s.Tip(0x401234);  // TNT (CYC 5), then CYC 7 for the TIP at 112
  auto p = Packets(s);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].type, ppt_cyc);
  EXPECT_EQ(p[0].payload.cyc.value, 5u);
  EXPECT_EQ(p[1].type, ppt_tnt_8);
  EXPECT_EQ(p[2].type, ppt_cyc);
  EXPECT_EQ(p[2].payload.cyc.value, 7u);
  EXPECT_EQ(p[3].type, ppt_tip);

  // cyc_thresh 5: CYCs at least 16 cycles apart; the counter runs on.
  PtStream t(Timed(true, 9, 5));
  t.Pge(0x401000, 100);
  t.Take();
  t.SetTime(110);
  t.Tip(0x401100);  // 10 cycles: no CYC
  t.SetTime(120);
  t.Tip(0x401200);  // 20 cycles since 100: CYC 20
  auto q = Packets(t);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].type, ppt_tip);
  EXPECT_EQ(q[1].type, ppt_cyc);
  EXPECT_EQ(q[1].payload.cyc.value, 20u);
}

TEST(PtStreamTiming, CycOfAnySizeDecodes) {
  for (uint64_t v : {1ull, 31ull, 32ull, 4095ull, 4096ull, 123456789ull, 1ull << 40}) {
    PtStreamOptions o = Timed(/*cyc=*/true, 0);
    o.mtc = false;
    PtStream s(o);
    s.Pge(0x401000, 1000);
    s.Take();
    s.SetTime(1000 + v);
    s.Tip(0x401004);
    auto p = Packets(s);
    ASSERT_EQ(p.size(), 2u) << v;
    EXPECT_EQ(p[0].type, ppt_cyc);
    EXPECT_EQ(p[0].payload.cyc.value, v);
    EXPECT_EQ(p[1].type, ppt_tip);
  }
}

// What the encoder writes, libipt's query decoder turns back into the exact
// virtual time of each branch (cycle-accurate), or the last MTC before it
// (MTC only): across PSBs, MTC payload wrap-around and a TIP.PGD/TIP.PGE gap
// in which the clock jumped.
void CheckLibiptTime(bool cyc, uint32_t mtc_freq) {
  SCOPED_TRACE(std::string(cyc ? "cyc" : "no cyc") + ", mtc_freq " + std::to_string(mtc_freq));
  PtStreamOptions o = Timed(cyc, mtc_freq);
  o.buffer_size = 1 << 22;
  PtStream s(o);
  struct Tip {
    uint64_t ip, time;
    bool after_psb;
  };
  std::vector<Tip> tips;
  uint64_t t = 5000;
  s.Psb(t, true, 0x401000);
  for (int i = 0; i < 3000; ++i) {
    t += 1 + static_cast<uint64_t>(i * 7919) % 37;  // instructions retired before the branch
    if (i == 1500) {                                // a syscall, then the thread waits 123456 ticks
      s.SetTime(t);
      s.PgdSuppressed();
      t += 123456;
      s.Pge(0x401000, t);
      continue;
    }
    const bool psb = i % 700 == 699;
    if (psb) s.Psb(t, true, 0x401000);
    s.SetTime(t);
    const uint64_t ip = 0x401000 + static_cast<uint64_t>(i % 50) * 16;
    s.Tip(ip);
    tips.push_back({ip, t, psb});
  }
  Bytes b(s.bytes());
  pt_config& cfg = b.cfg;
  cfg.cpuid_0x15_eax = kCpuid15Eax;
  cfg.cpuid_0x15_ebx = kCpuid15Ebx;
  cfg.mtc_freq = static_cast<uint8_t>(mtc_freq);
  cfg.nom_freq = kNominalRatio;
  pt_query_decoder* q = pt_qry_alloc_decoder(&cfg);
  ASSERT_NE(q, nullptr);
  uint64_t ip = 0;
  int status = pt_qry_sync_forward(q, &ip);
  ASSERT_GE(status, 0);
  const uint64_t step = uint64_t{kTscPerCtc} << mtc_freq;
  uint64_t last_exact = 5000;  // TSCs: the PSBs' and the PGE's
  size_t next = 0, wrong = 0;
  while (next < tips.size()) {
    while (status & pts_event_pending) {
      pt_event ev;
      status = pt_qry_event(q, &ev, sizeof ev);
      ASSERT_GE(status, 0) << pt_errstr(pt_errcode(status));
      if (ev.type == ptev_enabled) last_exact = ev.tsc;
    }
    uint64_t target = 0;
    status = pt_qry_indirect_branch(q, &target);
    ASSERT_GE(status, 0) << pt_errstr(pt_errcode(status)) << " at TIP " << next;
    uint64_t tsc = 0;
    ASSERT_GE(pt_qry_time(q, &tsc, nullptr, nullptr), 0);
    ASSERT_EQ(target, tips[next].ip);
    const uint64_t truth = tips[next].time;
    if (tips[next].after_psb) last_exact = truth;
    // Without CYC: the later of the last TSC and the last MTC boundary.
    const uint64_t want = cyc ? truth : std::max(last_exact, truth / step * step);
    if (tsc != want && wrong++ < 5)
      ADD_FAILURE() << "TIP " << next << ": libipt " << tsc << ", want " << want;
    ++next;
  }
  EXPECT_EQ(wrong, 0u);
  pt_qry_free_decoder(q);
}

TEST(PtStreamTiming, LibiptRecoversTheVirtualClock) {
  CheckLibiptTime(/*cyc=*/true, /*mtc_freq=*/0);  // --timer-resolution normal
  CheckLibiptTime(/*cyc=*/true, /*mtc_freq=*/3);
  CheckLibiptTime(/*cyc=*/false, /*mtc_freq=*/3);  // low
}

}  // namespace
}  // namespace ptsnap::emulate
