// The flow decoder against libipt on synthetic streams of the decoder test
// program (tests/programs/decode/calls.S): the streams src/decode's tests
// use, back to back, cut off, corrupted, and with timing packets (TMA, MTC,
// CYC, CBR, TSC) and event packets (OVF, MODE.TSX, FUP, TIP.PGD/PGE,
// TraceStop, PAD; PIP, VMCS, PTW, EXSTOP, MWAIT, PWRE, PWRX) inserted
// between packets, and hand-written streams over code with the
// instructions PIP, VMCS and PTW packets bind to. Both must yield the same
// items up to the first error and resync at the same PSB (flow_decoder.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <variant>

#include "decode/libipt.h"
#include "decode/test_stream.h"
#include "elf/symbol_file.h"
#include "emulate/pt_packets.h"
#include "flow/libipt_oracle.h"
#include "flow/packets.h"

namespace ptsnap::flow {
namespace {

using emulate::IpCompression;
using emulate::IpPacket;

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

// `unread`: adds the number of libipt's unmapped-code errors that name the
// address they could not read (Item kError ip, compared like the rest).
// `next_ips`: adds 1 when libipt's run ends with where decoding would go on
// (kNextIp, compared like the rest).
Comparison Diff(const std::string& bytes, bool timing = false, size_t* unread = nullptr,
                size_t* next_ips = nullptr) {
  const struct pt_config cfg = Config(bytes, timing);
  auto lib = DecodeWithLibipt(cfg, F().code.NewLibiptImage());
  if (unread != nullptr) {
    for (const Item& i : lib) *unread += i.kind == ItemKind::kError && i.ip != 0;
  }
  if (next_ips != nullptr && !lib.empty() && lib.back().kind == ItemKind::kNextIp) ++*next_ips;
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
// `timing`, other packets (events, noise) when `events`, paging, VMCS,
// PTWRITE and power packets (some with the FUP they bind to) when `more`.
std::string Mutate(const std::string& base, uint32_t seed, bool timing, bool events,
                   bool more = false) {
  std::mt19937 rng(seed);
  std::string out;
  uint64_t tsc = 100000;
  uint8_t ctc = 0;
  for (const std::string& pk : Packets(base)) {
    out += pk;
    emulate::PacketWriter w;
    if (more && pk.size() == 16 && rng() % 2 == 0) {  // in the PSB+ of this PSB
      w.Pip(0x7000, rng() % 2 == 0);
      if (rng() % 2 == 0) w.Vmcs(0x8000);
    }
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
    if (more) {
      const unsigned e = rng() % 50;
      const uint64_t fup = F().prog.Sym(rng() % 2 == 0 ? "main_after_syscall" : "fib");
      const bool with_fup = rng() % 2 == 0;
      if (e == 0) w.Pip(0x1000 * (1 + rng() % 8), rng() % 4 == 0);
      if (e == 1) w.Vmcs(0x2000 * (1 + rng() % 8));
      if (e == 2) w.Ptw(rng(), rng() % 2 == 0 ? 4 : 8, with_fup);
      if (e == 3) w.Exstop(with_fup);
      if (e == 4) w.Mwait(rng() % 16, rng() % 2);
      if (e == 5) w.Pwre(static_cast<uint8_t>(rng() % 16), static_cast<uint8_t>(rng() % 16), true);
      if (e == 6) w.Pwrx(static_cast<uint8_t>(rng() % 16), 1, static_cast<uint8_t>(rng() % 16));
      if ((e == 2 || e == 3) && with_fup)
        w.Ip(emulate::IpPacket::kFup, fup, IpCompression::kSext48);
      if (e == 4) w.Ip(emulate::IpPacket::kFup, fup, IpCompression::kSext48);
      // An async branch the paging and VMCS events bind to (in either order).
      if (e == 7 || e == 8) {
        w.Ip(emulate::IpPacket::kFup, fup, IpCompression::kSext48);
        if (e == 7) w.Pip(0x3000, true);
        w.Vmcs(0x4000);
        if (e == 8) w.Pip(0x5000, false);
        w.Ip(rng() % 3 == 0 ? emulate::IpPacket::kTipPgd : emulate::IpPacket::kTip,
             F().prog.Sym("leaf"), IpCompression::kSext48);
      }
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

// Every cut, as a snapshot cuts a stream: the same items, and where the
// trace ends after a block, the same next ip (StreamDecoder's trailing
// branch).
TEST(FlowDiffTest, EveryPrefix) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000);
  size_t next_ips = 0;
  for (size_t n = 0; n <= s.size(); ++n) {
    const std::string t = s.substr(0, n);
    ExpectEqual(Diff(t, false, nullptr, &next_ips), "prefix " + std::to_string(n));
  }
  EXPECT_GT(next_ips, s.size() / 4) << next_ips << " of " << s.size();
}

TEST(FlowDiffTest, CorruptedBytes) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000) +
                        decode::testing::CallsProgramStream(F().prog, 9000);
  std::mt19937 rng(7);
  size_t errors = 0, unread = 0;
  for (int i = 0; i < 600; ++i) {
    std::string t = s;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) t[rng() % t.size()] = static_cast<char>(rng());
    const Comparison c = Diff(t, false, &unread);
    errors += c.errors;
    ExpectEqual(c, "corruption " + std::to_string(i));
  }
  EXPECT_GT(errors, 100u);  // the corruptions do reach the error paths
  EXPECT_GT(unread, 0u);    // branches into unmapped code, the address compared too
  std::printf("errors %zu, naming the unread address %zu\n", errors, unread);
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

// Both decoders' items for `bytes` over `code`.
struct Runs {
  std::vector<Item> lib, ours;
  Comparison c;
  [[nodiscard]] size_t Count(EventType t) const {
    size_t n = 0;
    for (const Item& i : ours) n += i.kind == ItemKind::kEvent && i.event == t;
    return n;
  }
  [[nodiscard]] const Item* First(EventType t) const {
    for (const Item& i : ours) {
      if (i.kind == ItemKind::kEvent && i.event == t) return &i;
    }
    return nullptr;
  }
};
Runs RunBoth(const std::string& bytes, CodeImage& code, bool timing = false) {
  const struct pt_config cfg = Config(bytes, timing);
  Runs r;
  r.lib = DecodeWithLibipt(cfg, code.NewLibiptImage());
  r.ours = DecodeWithFlow(cfg, &code);
  r.c = Compare(r.lib, r.ours);
  return r;
}

TEST(FlowDiffTest, PagingVmcsPtwriteAndPowerPackets) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000);
  size_t paging = 0, async_paging = 0, vmcs = 0, async_vmcs = 0, ptw = 0, power = 0;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    const bool timing = seed % 2 == 0;
    const Runs r = RunBoth(Mutate(s, seed, timing, seed % 3 == 0, true), F().code, timing);
    ExpectEqual(r.c, "seed " + std::to_string(seed));
    paging += r.Count(EventType::kPaging);
    async_paging += r.Count(EventType::kAsyncPaging);
    vmcs += r.Count(EventType::kVmcs);
    async_vmcs += r.Count(EventType::kAsyncVmcs);
    ptw += r.Count(EventType::kPtwrite);
    power += r.Count(EventType::kExstop) + r.Count(EventType::kMwait) + r.Count(EventType::kPwre) +
             r.Count(EventType::kPwrx);
  }
  // The packets are decoded (not only errors): every kind of event shows.
  // (Seen here: 33, 308, 21, 171, 19, 283; the rest stop at errors that
  // the random packets cause, equally in both.)
  EXPECT_GT(paging, 15u);
  EXPECT_GT(async_paging, 150u);  // in PSB+ and bound to an async branch
  EXPECT_GT(vmcs, 10u);
  EXPECT_GT(async_vmcs, 80u);
  EXPECT_GT(ptw, 9u);
  EXPECT_GT(power, 140u);
}

// Code with the instructions the packets bind to, at kBase:
//   +0 nop; +1 ptwrite %rax; +6 mov %rax,%cr3; +9 vmptrld (%rax);
//   +12 vmlaunch; +15 nop; +16 jmp *%rax
constexpr uint64_t kBase = 0x500000;
CodeImage& BindCode() {
  static CodeImage* code = [] {
    static const uint8_t kCode[] = {0x90, 0xf3, 0x48, 0x0f, 0xae, 0xe0, 0x0f, 0x22, 0xd8,
                                    0x0f, 0xc7, 0x30, 0x0f, 0x01, 0xc2, 0x90, 0xff, 0xe0};
    static char path[] = "/tmp/ptsnap-flow-bind-XXXXXX";
    const int fd = ::mkstemp(path);
    std::atexit([] { ::unlink(path); });
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, kCode, sizeof kCode), static_cast<ssize_t>(sizeof kCode));
    ::close(fd);
    auto* c = new CodeImage();
    // Kept until exit: libipt reads the file whenever a decoder maps it.
    EXPECT_TRUE(c->AddFile(path, 0, sizeof kCode, kBase).has_value());
    return c;
  }();
  return *code;
}

// PSB+ with the IP at kBase, a PIP (CR3 0x1000, non-root) and a VMCS in it.
void Header(emulate::PacketWriter& w) {
  w.Psb();
  w.Tsc(1000);
  w.ModeExec64();
  w.Ip(IpPacket::kFup, kBase, IpCompression::kSext48);
  w.Pip(0x1000, true);
  w.Vmcs(0x5000);
  w.PsbEnd();
}

void ExpectExact(const Runs& r) {
  EXPECT_TRUE(r.c.all_equal) << r.c.message;
  EXPECT_FALSE(r.c.unsupported) << r.c.message;
  EXPECT_EQ(r.c.errors, 0u) << r.c.message;
}

// Each packet binds to its instruction: the PTW (no IP) to the PTWRITE, the
// PIP to the MOV CR3, the VMCS to the VMPTRLD, and a PIP and a VMCS both to
// the VMLAUNCH (a far branch, whose TIP then follows).
TEST(FlowDiffTest, PacketsBindToTheirInstructions) {
  emulate::PacketWriter w;
  Header(w);
  w.Ptw(0x1122334455667788, 8, false);
  w.Pip(0x2000, false);
  w.Vmcs(0x6000);
  w.Pip(0x3000, false);
  w.Vmcs(0x7000);
  w.Ip(IpPacket::kTip, kBase + 15, IpCompression::kSext48);  // vmlaunch -> +15
  w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);    // jmp *%rax
  const Runs r = RunBoth(Bytes(w), BindCode());
  ExpectExact(r);
  // The PSB+'s packets: status updates at the header's IP.
  const Item* ap = r.First(EventType::kAsyncPaging);
  ASSERT_NE(ap, nullptr);
  EXPECT_TRUE(ap->status_update);
  EXPECT_EQ(ap->ip, kBase);
  EXPECT_EQ(ap->payload, 0x1000u);
  EXPECT_TRUE(ap->non_root);
  const Item* av = r.First(EventType::kAsyncVmcs);
  ASSERT_NE(av, nullptr);
  EXPECT_EQ(av->payload, 0x5000u);
  const Item* pw = r.First(EventType::kPtwrite);
  ASSERT_NE(pw, nullptr);
  EXPECT_EQ(pw->ip, kBase + 1);
  EXPECT_EQ(pw->payload, 0x1122334455667788u);
  EXPECT_EQ(pw->size, 8u);
  EXPECT_EQ(r.Count(EventType::kPaging), 2u);
  EXPECT_EQ(r.Count(EventType::kVmcs), 2u);
  // Blocks end at each bound instruction: ptwrite, mov cr3, vmptrld, vmlaunch.
  std::vector<uint64_t> ends;
  for (const Item& i : r.ours) {
    if (i.kind == ItemKind::kBlock) ends.push_back(i.end_ip);
  }
  EXPECT_EQ(ends, (std::vector<uint64_t>{kBase + 1, kBase + 6, kBase + 9, kBase + 12, kBase + 16}));
}

// Entered in the middle of an instruction, at an encoding Zydis refuses and
// libipt's length decoder sizes: 0f ae e0 (group 15's /4 without the
// PTWRITE's f3: 3 bytes) and c7 30 (C7 /6 without VMPTRLD's 0f: no
// immediate, 2 bytes). Ours sizes them as libipt does.
TEST(FlowDiffTest, UndefinedEncodingsAreSizedAsLibiptSizesThem) {
  for (const auto& [start, ninsn] : {std::pair<uint64_t, uint16_t>{3, 4}, {10, 2}}) {
    emulate::PacketWriter w;
    w.Psb();
    w.ModeExec64();
    w.PsbEnd();
    w.Ip(IpPacket::kTipPge, kBase + start, IpCompression::kSext48);
    w.Ip(IpPacket::kTip, kBase + 15, IpCompression::kSext48);  // vmlaunch -> +15
    w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
    const Runs r = RunBoth(Bytes(w), BindCode());
    ExpectExact(r);
    const auto block = std::find_if(r.ours.begin(), r.ours.end(),
                                    [](const Item& i) { return i.kind == ItemKind::kBlock; });
    ASSERT_NE(block, r.ours.end());
    EXPECT_EQ(block->ip, kBase + start);
    EXPECT_EQ(block->end_ip, kBase + 12);
    EXPECT_EQ(block->ninsn, ninsn);
  }
}

// libipt's first pass through code ends a block where it reaches an
// address it has cached: here right after the PTWRITE (+6 was decoded
// first), and the block's last instruction is that PTWRITE.
TEST(FlowDiffTest, AFirstPassBlockEndingAtAPtwriteEndsInAPtwrite) {
  emulate::PacketWriter w;
  w.Psb();
  w.ModeExec64();
  w.PsbEnd();
  w.Ip(IpPacket::kTipPge, kBase + 6, IpCompression::kSext48);
  w.Ip(IpPacket::kTip, kBase, IpCompression::kSext48);       // vmlaunch -> +0
  w.Ip(IpPacket::kTip, kBase + 15, IpCompression::kSext48);  // vmlaunch -> +15
  w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
  const Runs r = RunBoth(Bytes(w), BindCode());
  ExpectExact(r);
  const auto block = std::find_if(r.ours.begin(), r.ours.end(), [](const Item& i) {
    return i.kind == ItemKind::kBlock && i.ip == kBase;
  });
  ASSERT_NE(block, r.ours.end());
  EXPECT_EQ(block->end_ip, kBase + 1);
  EXPECT_EQ(block->iclass, InsnClass::kPtwrite);
}

// With their IP bit set, PTW, EXSTOP and MWAIT take the next FUP's IP; PWRE
// and PWRX stand alone. A PTW while tracing is disabled binds to nothing.
TEST(FlowDiffTest, PacketsWithAFupAndPowerPackets) {
  emulate::PacketWriter w;
  Header(w);
  w.Ptw(0xabcd, 4, true);
  w.Ip(IpPacket::kFup, kBase + 1, IpCompression::kSext48);
  w.Exstop(true);
  w.Ip(IpPacket::kFup, kBase + 6, IpCompression::kSext48);
  w.Mwait(0x21, 1);
  w.Ip(IpPacket::kFup, kBase + 6, IpCompression::kSext48);
  w.Pwre(3, 2, true);
  w.Pwrx(6, 1, 5);
  w.Exstop(false);
  w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
  w.Ptw(7, 4, false);
  const Runs r = RunBoth(Bytes(w), BindCode());
  ExpectExact(r);
  const Item* pw = r.First(EventType::kPtwrite);
  ASSERT_NE(pw, nullptr);
  EXPECT_EQ(pw->ip, kBase + 1);
  EXPECT_EQ(pw->size, 4u);
  EXPECT_EQ(r.Count(EventType::kPtwrite), 2u);  // the second with its IP suppressed
  const Item* ex = r.First(EventType::kExstop);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->ip, kBase + 6);
  EXPECT_EQ(r.Count(EventType::kExstop), 2u);
  const Item* mw = r.First(EventType::kMwait);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(mw->payload, 0x21u | uint64_t{1} << 32);
  const Item* pe = r.First(EventType::kPwre);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->payload, 3u | 2u << 8 | 1u << 16);
  const Item* px = r.First(EventType::kPwrx);
  ASSERT_NE(px, nullptr);
  EXPECT_EQ(px->payload, 6u | 1u << 8 | 1u << 16 | 1u << 17);
}

// A PIP and a VMCS after a FUP bind to the async branch's TIP, the VMCS
// first (libipt reorders them); after a TIP.PGD both have their IP
// suppressed.
TEST(FlowDiffTest, PagingAndVmcsBindToAnAsyncBranch) {
  for (const bool disable : {false, true}) {
    emulate::PacketWriter w;
    Header(w);
    w.Ip(IpPacket::kFup, kBase + 1, IpCompression::kSext48);
    w.Pip(0x9000, true);
    w.Vmcs(0xa000);
    w.Ip(disable ? IpPacket::kTipPgd : IpPacket::kTip, kBase + 15, IpCompression::kSext48);
    if (!disable) w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
    const Runs r = RunBoth(Bytes(w), BindCode());
    ExpectExact(r);
    std::vector<EventType> order;
    for (const Item& i : r.ours) {
      if (i.kind == ItemKind::kEvent && !i.status_update) order.push_back(i.event);
    }
    if (disable) {
      EXPECT_EQ(order, (std::vector<EventType>{EventType::kAsyncDisabled, EventType::kAsyncVmcs,
                                               EventType::kAsyncPaging}));
    } else {
      EXPECT_EQ(order, (std::vector<EventType>{EventType::kAsyncBranch, EventType::kAsyncVmcs,
                                               EventType::kAsyncPaging, EventType::kDisabled}));
    }
  }
}

// Straight-line runs longer than libipt's first pass takes in one go (it
// stops filling its block cache after 1024 instructions with a
// trampoline), and than a block holds (65535 instructions), entered at
// their start and in their middle, first pass and from libipt's cache:
// `n` NOPs at kLongBase, then jmp *%rax.
constexpr uint64_t kLongBase = 0x600000;
CodeImage& LongCode(size_t n) {
  // Kept until exit, as BindCode's (never destroyed: LeakSanitizer).
  static auto* codes = new std::map<size_t, CodeImage*>;
  CodeImage*& c = (*codes)[n];
  if (c == nullptr) {
    std::string code(n, '\x90');
    code += "\xff\xe0";
    static auto* paths = new std::vector<std::string>;
    char path[] = "/tmp/ptsnap-flow-long-XXXXXX";
    const int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, code.data(), code.size()), static_cast<ssize_t>(code.size()));
    ::close(fd);
    if (paths->empty()) {
      std::atexit([] {
        for (const std::string& p : *paths) ::unlink(p.c_str());
      });
    }
    paths->emplace_back(path);
    c = new CodeImage();
    EXPECT_TRUE(c->AddFile(path, 0, code.size(), kLongBase).has_value());
  }
  return *c;
}

TEST(FlowDiffTest, LongStraightRunsFirstPassAndCached) {
  for (const size_t n :
       {1000u, 1023u, 1024u, 1025u, 1500u, 2047u, 2049u, 5000u, 20000u, 65534u, 65535u, 70000u}) {
    for (const size_t first : {0u, 1u, 500u, 1100u}) {
      if (first >= n) continue;
      emulate::PacketWriter w;
      w.Psb();
      w.Tsc(1000);
      w.ModeExec64();
      w.Ip(IpPacket::kFup, kLongBase + first, IpCompression::kSext48);
      w.PsbEnd();
      // Entered again at the start, in the middle, near the end, at the start.
      for (const size_t at : {size_t{0}, n / 2, n - 3, size_t{0}, first, size_t{0}}) {
        w.Ip(IpPacket::kTip, kLongBase + at, IpCompression::kSext48);
      }
      w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
      const Runs r = RunBoth(Bytes(w), LongCode(n));
      SCOPED_TRACE("n " + std::to_string(n) + " first " + std::to_string(first));
      if (n < 65535) {
        ExpectExact(r);
      } else {
        // Past what one block holds libipt splits a cached run where its
        // cache entries' counts overflow it: ours falls back there.
        EXPECT_TRUE(r.c.equal) << r.c.message;
        EXPECT_TRUE(r.c.unsupported) << r.c.message;
      }
      EXPECT_GT(r.c.items, 6u);
    }
  }
}

// libipt's errata workarounds for the CPUs it knows, each on streams that
// meet it: the calls.S streams with, after random packets, the packet runs
// the errata are about (an OVF without its FUP, with a TIP.PGD after it,
// with a FUP while tracing is off; a TMA with reserved bits; a TSX abort).
// For each CPU both decoders agree (no fallback to libipt but for BDM64,
// which ours leaves to it), and libipt's run with the CPU's errata differs
// from its run without them on some streams, so each workaround decided
// something there and ours decided it the same way.
std::string MutateForErrata(const std::string& base, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  uint64_t tsc = 200000;
  const uint64_t fib = F().prog.Sym("fib"), leaf = F().prog.Sym("leaf");
  for (const std::string& pk : Packets(base)) {
    out += pk;
    emulate::PacketWriter w;
    const unsigned r = rng() % 60;
    auto timing = [&] {
      if (rng() % 2 == 0) w.Cyc(1 + rng() % 200);
      if (rng() % 4 == 0) w.Tsc(tsc += 1000 + rng() % 3000);
    };
    switch (r) {
      case 0: w.Ovf(); break;  // whatever follows decides
      case 1:
        w.Ovf();
        timing();
        w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);  // APL11
        break;
      case 2:
        w.Ovf();
        timing();
        w.Ip(IpPacket::kFup, fib, IpCompression::kSext48);  // APL12 when tracing is off after
        timing();
        if (rng() % 2 == 0) {
          w.Ip(IpPacket::kTipPge, leaf, IpCompression::kSext48);
        } else {
          w.TraceStop();
        }
        break;
      case 3:
        w.Ovf();
        timing();
        w.Ip(IpPacket::kTip, leaf, IpCompression::kSext48);  // SKD010: resume at the TIP
        break;
      case 4:
        w.Ovf();
        w.ModeTsx(rng() % 2 == 0, false);
        timing();
        w.Ip(IpPacket::kFup, fib, IpCompression::kSext48);  // SKD010 with MODE.TSX, or plain
        break;
      case 5: {  // SKZ84: reserved bits set in a TMA
        const uint8_t tma[7] = {0x02, 0x73, 0x10, 0x00, static_cast<uint8_t>(1 + rng() % 255),
                                0x05, 0x00};
        w.Raw(tma, sizeof tma);
        break;
      }
      case 6:
        w.ModeTsx(false, true);  // an abort, bound to the FUP (BDM64)
        w.Ip(IpPacket::kFup, rng() % 2 == 0 ? fib : leaf, IpCompression::kSext48);
        w.Ip(IpPacket::kTip, leaf, IpCompression::kSext48);
        break;
      case 7:
        w.Ovf();
        w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
        w.Ip(IpPacket::kTipPge, fib, IpCompression::kSext48);
        break;
      default: break;
    }
    out += Bytes(w);
  }
  return out;
}

// SKL014 binds a TIP.PGD with its IP suppressed to the first direct
// branch; the address filter says whether tracing stopped at the branch or
// at its target, which shows in whether a TIP.PGE at the target resumes.
// (The random streams above never meet this, so a wrong filter check
// passes them.)
TEST(FlowDiffTest, Skl014FilterDecidesWhereTracingResumes) {
  const uint64_t start = F().prog.Sym("_start"), main = F().prog.Sym("main");
  for (const bool main_filtered_in : {true, false}) {
    emulate::PacketWriter w;
    w.Psb();
    w.Tsc(1000);
    w.ModeExec64();
    w.PsbEnd();
    w.Ip(IpPacket::kTipPge, start, IpCompression::kSext48);
    w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);  // at _start's call main
    w.Ip(IpPacket::kTipPge, main, IpCompression::kSext48);
    w.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
    const std::string bytes = Bytes(w);
    struct pt_config cfg = Config(bytes, false);
    cfg.cpu.model = 0x9e;  // Kaby Lake: SKL014
    ASSERT_EQ(pt_cpu_errata(&cfg.errata, &cfg.cpu), 0);
    ASSERT_TRUE(cfg.errata.skl014);
    cfg.addr_filter.config.addr_cfg = 1;
    cfg.addr_filter.addr0_a = start;
    cfg.addr_filter.addr0_b = main_filtered_in ? main + 16 : main - 1;
    const auto lib = DecodeWithLibipt(cfg, F().code.NewLibiptImage());
    const auto ours = DecodeWithFlow(cfg, &F().code);
    F().code.FreeLibiptImages();
    ExpectEqual(Compare(lib, ours), main_filtered_in ? "main in the filter" : "main outside");
    std::vector<bool> resumed;
    for (const Item& i : ours) {
      if (i.kind == ItemKind::kEvent && i.event == EventType::kEnabled)
        resumed.push_back(i.resumed);
    }
    // The second enable resumes where the first disable left: at main when
    // the call's target is still in the filter, else at the call.
    EXPECT_EQ(resumed, (std::vector<bool>{false, main_filtered_in})) << main_filtered_in;
  }
}

TEST(FlowDiffTest, ErrataOfTheCpusLibiptKnows) {
  const std::string s = decode::testing::CallsProgramStream(F().prog) +
                        decode::testing::CallsProgramStream(F().prog, 5000) +
                        decode::testing::CallsProgramStream(F().prog, 9000);
  struct Cpu {
    uint8_t model;
    const char* name;
    const char* errata;
  };
  // One model per set of errata libipt 2.0 applies (pt_cpu_errata).
  const Cpu cpus[] = {{0x9e, "Kaby Lake", "skd007 skd010 skd022 skl014 skl168 bdm70"},
                      {0x97, "Alder Lake", "apl11 skl014 skd022 bdm70"},
                      {0x5c, "Goldmont", "apl11 apl12"},
                      {0x55, "Skylake server", "skz84 skl014 skd022 bdm70"},
                      {0x3d, "Broadwell", "bdm64 bdm70"}};
  for (const Cpu& cpu : cpus) {
    size_t changed = 0, fallbacks = 0;
    for (uint32_t seed = 1; seed <= 150; ++seed) {
      const std::string t = MutateForErrata(s, seed);
      struct pt_config cfg = Config(t, seed % 2 == 0);
      cfg.cpu.vendor = pcv_intel;
      cfg.cpu.family = 6;
      cfg.cpu.model = cpu.model;
      ASSERT_EQ(pt_cpu_errata(&cfg.errata, &cfg.cpu), 0) << cpu.name;
      // SKL014 needs address filters: a filter range that leaf lies
      // outside of, on a third of the streams with a TraceStop range too.
      if (seed % 3 != 0) {
        cfg.addr_filter.config.addr_cfg = seed % 3 == 1 ? 0x21 : 0x1;  // ADDR0 filter, ADDR1 stop
        cfg.addr_filter.addr0_a = F().prog.Sym("_start");
        cfg.addr_filter.addr0_b = F().prog.Sym("leaf") - 1;
        cfg.addr_filter.addr1_a = F().prog.Sym("mid");
        cfg.addr_filter.addr1_b = F().prog.Sym("mid") + 3;
      }
      const auto lib = DecodeWithLibipt(cfg, F().code.NewLibiptImage());
      const Comparison c = Compare(lib, DecodeWithFlow(cfg, &F().code));
      EXPECT_TRUE(c.equal) << cpu.name << " seed " << seed << ": " << c.message;
      fallbacks += c.unsupported;
      struct pt_config none = cfg;
      none.errata = {};
      const Comparison w = Compare(lib, DecodeWithLibipt(none, F().code.NewLibiptImage()));
      changed += !w.all_equal;
    }
    F().code.FreeLibiptImages();
    std::printf("%s (%s): the errata changed libipt's run on %zu of 150 streams; %zu fallbacks\n",
                cpu.name, cpu.errata, changed, fallbacks);
    EXPECT_GT(changed, 0u) << cpu.name << ": no stream met an erratum";
    if (cpu.model != 0x3d) {
      EXPECT_EQ(fallbacks, 0u) << cpu.name;
    }
  }
}

}  // namespace
}  // namespace ptsnap::flow
