// SPDX-License-Identifier: GPL-2.0
// The ptpmu module's packet writer (pt_packets.h) on the host: each encoder
// against libipt's own encoder byte for byte, and whole streams laid out the
// way the module lays them out (several schedule-ins, user and kernel
// scope, PSB periods, dropped payloads, a snapshot ring that wraps) through
// libipt's packet, block and instruction decoders: no decode error, and the
// PTW payloads come back in order.
#include <gtest/gtest.h>
#include <intel-pt.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/vm/ptpmu/pt_packets.h"

namespace {

constexpr uint64_t kUserIp = 0x401136;
constexpr uint64_t kUserIp2 = 0x7f12345678a0;
constexpr uint64_t kKernelIp = 0xffffffff81a0c3d0;

// Encodes `p` with libipt's encoder.
std::vector<uint8_t> LibiptEncode(const pt_packet& p) {
  std::vector<uint8_t> buf(64);
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = buf.data();
  cfg.end = buf.data() + buf.size();
  pt_encoder* enc = pt_alloc_encoder(&cfg);
  pt_packet copy = p;
  const int n = pt_enc_next(enc, &copy);
  pt_free_encoder(enc);
  EXPECT_GT(n, 0) << pt_errstr(pt_errcode(n));
  buf.resize(n > 0 ? n : 0);
  return buf;
}

std::vector<uint8_t> Ours(int (*fn)(unsigned char*)) {
  std::vector<uint8_t> b(PTPKT_MAX);
  b.resize(fn(b.data()));
  return b;
}

TEST(PtpmuPackets, EachEncoderWritesLibiptsBytes) {
  pt_packet p{};
  p.type = ppt_psb;
  EXPECT_EQ(Ours(ptpkt_psb), LibiptEncode(p));
  p.type = ppt_psbend;
  EXPECT_EQ(Ours(ptpkt_psbend), LibiptEncode(p));
  p.type = ppt_ovf;
  EXPECT_EQ(Ours(ptpkt_ovf), LibiptEncode(p));

  std::vector<uint8_t> b(PTPKT_MAX);
  p = {};
  p.type = ppt_tsc;
  p.payload.tsc.tsc = 0x00123456789abcdeull;
  b.resize(ptpkt_tsc(b.data(), 0x00123456789abcdeull));
  EXPECT_EQ(b, LibiptEncode(p));

  p = {};
  p.type = ppt_tma;
  p.payload.tma.ctc = 0xbeef;
  p.payload.tma.fc = 0x1a5;
  b.assign(PTPKT_MAX, 0);
  b.resize(ptpkt_tma(b.data(), 0xbeef, 0x1a5));
  EXPECT_EQ(b, LibiptEncode(p));

  p = {};
  p.type = ppt_cbr;
  p.payload.cbr.ratio = 36;
  b.assign(PTPKT_MAX, 0);
  b.resize(ptpkt_cbr(b.data(), 36));
  EXPECT_EQ(b, LibiptEncode(p));

  p = {};
  p.type = ppt_mode;
  p.payload.mode.leaf = pt_mol_exec;
  p.payload.mode.bits.exec.csl = 1;
  EXPECT_EQ(Ours(ptpkt_mode_exec64), LibiptEncode(p));

  p = {};
  p.type = ppt_ptw;
  p.payload.ptw.plc = 1;  // 8 bytes
  p.payload.ptw.payload = 0x1122334455667788ull;
  b.assign(PTPKT_MAX, 0);
  b.resize(ptpkt_ptw(b.data(), 0x1122334455667788ull));
  EXPECT_EQ(b, LibiptEncode(p));

  const struct {
    pt_packet_type type;
    unsigned opc;
  } ips[] = {{ppt_tip, PTPKT_OPC_TIP},
             {ppt_tip_pge, PTPKT_OPC_TIP_PGE},
             {ppt_tip_pgd, PTPKT_OPC_TIP_PGD},
             {ppt_fup, PTPKT_OPC_FUP}};
  for (const auto& ip : ips) {
    for (uint64_t addr : {kUserIp, kUserIp2, kKernelIp}) {
      p = {};
      p.type = ip.type;
      p.payload.ip.ipc = pt_ipc_sext_48;
      p.payload.ip.ip = addr;
      b.assign(PTPKT_MAX, 0);
      b.resize(ptpkt_ip(b.data(), ip.opc, addr, 0));
      EXPECT_EQ(b, LibiptEncode(p)) << ip.type << " " << std::hex << addr;
    }
    p = {};
    p.type = ip.type;
    p.payload.ip.ipc = pt_ipc_suppressed;
    b.assign(PTPKT_MAX, 0);
    b.resize(ptpkt_ip(b.data(), ip.opc, 0, 1));
    EXPECT_EQ(b, LibiptEncode(p)) << ip.type;
  }
}

// A stream as the module writes one event's AUX buffer: each schedule-in
// is an "ptpkt_stream" from perf_aux_output_begin to _end on one CPU.
class ModuleLikeWriter {
 public:
  // ring_bytes: the AUX buffer (power of two); snapshot: no room limit.
  ModuleLikeWriter(size_t ring_bytes, unsigned psb_period, bool tsc)
      : buf_(ring_bytes, 0), psb_period_(psb_period), tsc_(tsc) {}

  // One schedule-in: `ticks` PTWs, each with the next sequence number;
  // `drop` of them (from the tick `drop_at`) are skipped, as the module's
  // drop_ptws parameter makes it do, and an OVF precedes the next PTW.
  void Run(const std::vector<unsigned long long>& ips, int ticks, int drop_at = -1, int drop = 0) {
    ptpkt_stream s{};
    s.ring.base = buf_.data();
    s.ring.mask = buf_.size() - 1;
    s.ring.pos = pos_;
    s.ring.limit = ~0ul;
    s.psb_period = ptpkt_psb_period_bytes(psb_period_);
    s.tsc = tsc_;
    s.cbr = 36;
    ASSERT_EQ(ptpkt_sched_in(&s, tsc_value_ += 1000, ips.data(), static_cast<int>(ips.size())), 0);
    bool ovf = false;
    for (int i = 0; i < ticks; ++i) {
      const uint64_t seq = ++seq_;
      if (i >= drop_at && i < drop_at + drop) {
        ovf = true;
        continue;
      }
      ASSERT_EQ(ptpkt_tick(&s, tsc_value_ += 100, seq, ovf), 0);
      ovf = false;
      written_.push_back(seq);
    }
    ASSERT_EQ(ptpkt_sched_out(&s, ips.data(), static_cast<int>(ips.size())), 0);
    pos_ = s.ring.pos;
  }

  // The bytes in order: a buffer that has not wrapped is [0, pos); one
  // that has is [pos, end) + [0, pos), as a snapshot reader copies it.
  std::vector<uint8_t> Bytes() const {
    const size_t head = pos_ & (buf_.size() - 1);
    if (pos_ <= buf_.size()) return {buf_.begin(), buf_.begin() + pos_};
    std::vector<uint8_t> out(buf_.begin() + head, buf_.end());
    out.insert(out.end(), buf_.begin(), buf_.begin() + head);
    return out;
  }
  bool wrapped() const { return pos_ > buf_.size(); }
  const std::vector<uint64_t>& written() const { return written_; }

 private:
  std::vector<uint8_t> buf_;
  unsigned psb_period_;
  bool tsc_;
  size_t pos_ = 0;
  uint64_t seq_ = 0;
  uint64_t tsc_value_ = 1000000;
  std::vector<uint64_t> written_;
};

struct Decoded {
  std::vector<uint64_t> ptw;  // payloads in stream order
  int psbs = 0, ovfs = 0, enables = 0, disables = 0;
  uint64_t max_psb_gap = 0;  // the most bytes from one PSB to the next (or the end)
  std::string error;         // first decode error, empty if none
};

pt_config Config(const std::vector<uint8_t>& bytes) {
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = const_cast<uint8_t*>(bytes.data());
  cfg.end = const_cast<uint8_t*>(bytes.data()) + bytes.size();
  cfg.cpu.vendor = pcv_intel;
  cfg.cpu.family = 6;
  cfg.cpu.model = 0x9e;  // Kaby Lake
  cfg.cpu.stepping = 9;
  pt_cpu_errata(&cfg.errata, &cfg.cpu);
  return cfg;
}

// libipt's packet decoder from the first PSB to the end.
Decoded PacketDecode(const std::vector<uint8_t>& bytes) {
  Decoded d;
  pt_config cfg = Config(bytes);
  pt_packet_decoder* dec = pt_pkt_alloc_decoder(&cfg);
  int r = pt_pkt_sync_forward(dec);
  if (r < 0) d.error = std::string("sync: ") + pt_errstr(pt_errcode(r));
  uint64_t last_psb = 0;
  if (r >= 0) pt_pkt_get_offset(dec, &last_psb);
  while (r >= 0) {
    pt_packet p;
    uint64_t offset = 0;
    pt_pkt_get_offset(dec, &offset);
    r = pt_pkt_next(dec, &p, sizeof p);
    if (r == -pte_eos) {
      d.max_psb_gap = std::max<uint64_t>(d.max_psb_gap, bytes.size() - last_psb);
      break;
    }
    if (p.type == ppt_psb) {
      d.max_psb_gap = std::max(d.max_psb_gap, offset - last_psb);
      last_psb = offset;
    }
    if (r < 0) {
      d.error = pt_errstr(pt_errcode(r));
      break;
    }
    if (p.type == ppt_ptw) d.ptw.push_back(p.payload.ptw.payload);
    if (p.type == ppt_psb) ++d.psbs;
    if (p.type == ppt_ovf) ++d.ovfs;
  }
  pt_pkt_free_decoder(dec);
  return d;
}

void TakeEvent(const pt_event& ev, Decoded& d) {
  switch (ev.type) {
    case ptev_ptwrite: d.ptw.push_back(ev.variant.ptwrite.payload); break;
    case ptev_overflow: ++d.ovfs; break;
    case ptev_enabled: ++d.enables; break;
    case ptev_disabled:
    case ptev_async_disabled: ++d.disables; break;
    default: break;
  }
}

// One of libipt's flow decoders (block or instruction) over the whole
// stream, with an empty image: a stream that needed an instruction decoded
// would fail with -pte_nomap. RAN says whether an item decoded code.
template <typename Dec, typename Item>
struct FlowApi {
  Dec* (*alloc)(const pt_config*);
  int (*sync)(Dec*);
  int (*event)(Dec*, pt_event*, size_t);
  int (*next)(Dec*, Item*, size_t);
  void (*release)(Dec*);
  bool (*ran)(const Item&);
  const char* what;  // the error when one did
};

template <typename Dec, typename Item>
Decoded FlowDecode(const std::vector<uint8_t>& bytes, const FlowApi<Dec, Item>& api) {
  Decoded d;
  pt_config cfg = Config(bytes);
  Dec* dec = api.alloc(&cfg);
  for (;;) {
    int status = api.sync(dec);
    if (status == -pte_eos) break;
    if (status < 0) {
      d.error = std::string("sync: ") + pt_errstr(pt_errcode(status));
      break;
    }
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = api.event(dec, &ev, sizeof ev);
        if (status < 0) break;
        TakeEvent(ev, d);
      }
      if (status < 0 || (status & pts_eos)) break;
      Item item;
      status = api.next(dec, &item, sizeof item);
      if (status < 0) break;
      if (api.ran(item)) d.error = api.what;
    }
    if (status == -pte_eos || (status >= 0 && (status & pts_eos))) break;
    d.error = pt_errstr(pt_errcode(status));
    break;
  }
  api.release(dec);
  return d;
}

Decoded BlockDecode(const std::vector<uint8_t>& bytes) {
  return FlowDecode(bytes, FlowApi<pt_block_decoder, pt_block>{
                               pt_blk_alloc_decoder, pt_blk_sync_forward, pt_blk_event, pt_blk_next,
                               pt_blk_free_decoder, [](const pt_block& b) { return b.ninsn != 0; },
                               "a block with instructions"});
}

Decoded InsnDecode(const std::vector<uint8_t>& bytes) {
  return FlowDecode(
      bytes, FlowApi<pt_insn_decoder, pt_insn>{
                 pt_insn_alloc_decoder, pt_insn_sync_forward, pt_insn_event, pt_insn_next,
                 pt_insn_free_decoder, [](const pt_insn&) { return true; }, "an instruction"});
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> v;
  for (uint64_t i = first; i <= last; ++i) v.push_back(i);
  return v;
}

// Full mode: a buffer that never wraps holds every PTW from 1, over
// several schedule-ins (user scope, kernel scope, both) and PSB periods.
TEST(PtpmuPackets, FullModeStreamDecodesWithEveryPayloadInOrder) {
  for (unsigned psb_period : {0u, 3u}) {
    for (bool tsc : {true, false}) {
      ModuleLikeWriter w(1 << 20, psb_period, tsc);
      w.Run({kUserIp}, 700);
      w.Run({kKernelIp}, 5);
      w.Run({kKernelIp, kUserIp2}, 300);
      w.Run({kUserIp}, 0);
      w.Run({kUserIp2}, 2000);
      ASSERT_FALSE(w.wrapped());
      const auto bytes = w.Bytes();
      const auto want = Range(1, 3005);
      ASSERT_EQ(w.written(), want);
      SCOPED_TRACE("psb_period " + std::to_string(psb_period) + " tsc " + std::to_string(tsc));

      const Decoded pkt = PacketDecode(bytes);
      EXPECT_EQ(pkt.error, "");
      EXPECT_EQ(pkt.ptw, want);
      // A PSB at each schedule-in and one per period in between: never
      // more than the period and one tick (and a schedule-out) apart.
      EXPECT_GE(pkt.psbs, static_cast<int>(bytes.size() / (ptpkt_psb_period_bytes(psb_period) +
                                                           2 * PTPKT_WINDOW_SIZE + 64)));
      EXPECT_LE(pkt.max_psb_gap,
                ptpkt_psb_period_bytes(psb_period) + PTPKT_PTW_SIZE + 2 * PTPKT_WINDOW_SIZE + 64);

      const Decoded blk = BlockDecode(bytes);
      EXPECT_EQ(blk.error, "");
      EXPECT_EQ(blk.ptw, want);
      // Two windows per schedule-in (in and out), two scopes in one of them.
      EXPECT_EQ(blk.enables, 12);
      EXPECT_EQ(blk.disables, 12);

      const Decoded insn = InsnDecode(bytes);
      EXPECT_EQ(insn.error, "");
      EXPECT_EQ(insn.ptw, want);
    }
  }
}

// drop_ptws: the skipped payloads are missing, an OVF marks the gap, and
// the decoders go on without an error.
TEST(PtpmuPackets, DroppedPayloadsLeaveAGapMarkedByOverflow) {
  ModuleLikeWriter w(1 << 20, 0, true);
  w.Run({kUserIp}, 100, /*drop_at=*/40, /*drop=*/7);
  w.Run({kUserIp}, 10);
  std::vector<uint64_t> want = Range(1, 40);
  for (uint64_t s : Range(48, 110)) want.push_back(s);
  ASSERT_EQ(w.written(), want);
  const auto bytes = w.Bytes();
  for (const Decoded& d : {PacketDecode(bytes), BlockDecode(bytes), InsnDecode(bytes)}) {
    EXPECT_EQ(d.error, "");
    EXPECT_EQ(d.ptw, want);
    EXPECT_EQ(d.ovfs, 1);
  }
}

// Snapshot mode: a 16 KiB ring written far past its size. Read from the
// head as a snapshot reader reads it, the decoders start at the first
// whole PSB and find a contiguous run of payloads ending with the newest.
TEST(PtpmuPackets, WrappedSnapshotHoldsTheNewestPayloadsContiguously) {
  for (unsigned psb_period : {0u, 1u, 3u}) {
    ModuleLikeWriter w(16 << 10, psb_period, true);
    for (int i = 0; i < 12; ++i) w.Run({i % 2 ? kUserIp : kUserIp2}, 333);
    ASSERT_TRUE(w.wrapped());
    const auto bytes = w.Bytes();
    ASSERT_EQ(bytes.size(), 16u << 10);
    const uint64_t newest = w.written().back();
    SCOPED_TRACE("psb_period " + std::to_string(psb_period));
    for (const Decoded& d : {PacketDecode(bytes), BlockDecode(bytes), InsnDecode(bytes)}) {
      EXPECT_EQ(d.error, "");
      ASSERT_FALSE(d.ptw.empty());
      EXPECT_EQ(d.ptw.back(), newest);
      EXPECT_EQ(d.ptw, Range(d.ptw.front(), newest));
      // 16 KiB of 10-byte PTWs less PSB+ and windows: most of the ring.
      EXPECT_GT(d.ptw.size(), 1000u);
    }
  }
}

// A full-mode ring with a room limit: a PTW that does not fit is not
// written, nothing partial is left behind (the module then ends the AUX
// transaction with TRUNCATED).
TEST(PtpmuPackets, NoRoomWritesNothing) {
  std::vector<uint8_t> buf(4096, 0);
  ptpkt_stream s{};
  s.ring.base = buf.data();
  s.ring.mask = buf.size() - 1;
  s.ring.limit = 100;
  s.psb_period = ptpkt_psb_period_bytes(0);
  s.tsc = 1;
  const unsigned long long ip = kUserIp;
  ASSERT_EQ(ptpkt_sched_in(&s, 1, &ip, 1), 0);
  const unsigned long after_in = s.ring.written;
  int ok = 0;
  while (ptpkt_tick(&s, 2, ok + 1, 0) == 0) ++ok;
  EXPECT_EQ(s.ring.written, after_in + ok * PTPKT_PTW_SIZE);
  EXPECT_LE(s.ring.written, 100u);
  EXPECT_GT(s.ring.written + PTPKT_PTW_SIZE, 100u);
}

}  // namespace
