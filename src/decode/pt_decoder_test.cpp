#include "decode/pt_decoder.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/mapped_region.h"
#include "decode/test_stream.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::decode {
namespace {

using ::ptsnap::testing::HasValue;

struct Decoded {
  std::vector<BranchEvent> events;
  DecodeStats stats;
};

Decoded DecodeCalls(const std::string& stream, int32_t pid = 100) {
  auto p = testing::LoadCallsProgram();
  auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(pid),
                               testing::CallsSideband(p, pid));
  EXPECT_THAT(dec, HasValue());
  Decoded d;
  EXPECT_THAT(
      (*dec)->DecodeStream(pid, stream, [&](const BranchEvent& e) { d.events.push_back(e); }),
      HasValue());
  d.stats = (*dec)->stats();
  return d;
}

int Count(const Decoded& d, BranchKind k) {
  int n = 0;
  for (const auto& e : d.events) n += e.kind == k;
  return n;
}

TEST(PtDecoderTest, DecodesTheCallsProgram) {
  auto p = testing::LoadCallsProgram();
  Decoded d = DecodeCalls(testing::CallsProgramStream(p));
  EXPECT_EQ(d.stats.errors, 0u);
  ASSERT_FALSE(d.events.empty());
  EXPECT_EQ(d.events.front().kind, BranchKind::kEnable);
  EXPECT_EQ(d.events.front().to, p.Sym("_start"));
  // _start->main, main->mid, mid->leaf, main->tail_caller, main->*leaf,
  // main->fib + 24 recursive fib calls, main->lj1, lj1->lj2.
  EXPECT_EQ(Count(d, BranchKind::kCall), 4 + 1 + 25 + 2);
  EXPECT_EQ(Count(d, BranchKind::kReturn), 2 + 1 + 1 + 25 + 1);
  EXPECT_EQ(Count(d, BranchKind::kDisable), 2);
  EXPECT_EQ(Count(d, BranchKind::kEnable), 2);
  // Both disables are at syscall instructions.
  for (const auto& e : d.events) {
    if (e.kind == BranchKind::kDisable) {
      EXPECT_TRUE(e.syscall);
    }
  }
  // The tail call and the longjmp-like jump are jumps into other functions.
  bool saw_tail = false, saw_landing = false;
  for (const auto& e : d.events) {
    if (e.kind == BranchKind::kJump && e.to == p.Sym("leaf")) saw_tail = true;
    if (e.kind == BranchKind::kJump && e.to == p.Sym("main_landing")) saw_landing = true;
  }
  EXPECT_TRUE(saw_tail);
  EXPECT_TRUE(saw_landing);
  // Time is monotone and comes from the TSC packets (identity time_conv).
  uint64_t last = 0;
  for (const auto& e : d.events) {
    EXPECT_GE(e.time, last);
    last = e.time;
  }
  EXPECT_GE(d.events.front().time, 1000u);
  EXPECT_GT(d.events.back().time, 1050u);
  EXPECT_GT(d.stats.instructions, 100u);
}

Decoded DecodeCallsWith(const std::string& stream, PtDecoder::Engine engine,
                        const trace::Manifest& manifest = testing::CallsManifest(100)) {
  auto p = testing::LoadCallsProgram();
  auto dec = PtDecoder::Create("/nonexistent", manifest, testing::CallsSideband(p, 100));
  EXPECT_THAT(dec, HasValue());
  (*dec)->set_engine(engine);
  Decoded d;
  EXPECT_THAT(
      (*dec)->DecodeStream(100, stream, [&](const BranchEvent& e) { d.events.push_back(e); }),
      HasValue());
  d.stats = (*dec)->stats();
  return d;
}

std::string Describe(const BranchEvent& e) {
  return std::string(ToString(e.kind)) + " " + std::to_string(e.from) + "->" +
         std::to_string(e.to) + " t=" + std::to_string(e.time) + " n=" + std::to_string(e.insns) +
         (e.syscall ? " syscall" : "") + " " + std::to_string(e.pid) + "/" + std::to_string(e.tid) +
         "@" + std::to_string(e.space) + " " + ErrorMessage(e);
}

// The same events and counts from ptsnap's flow decoder and from libipt.
void ExpectSameAsLibipt(const std::string& stream, uint64_t fallbacks,
                        const trace::Manifest& manifest = testing::CallsManifest(100)) {
  Decoded lib = DecodeCallsWith(stream, PtDecoder::Engine::kLibipt, manifest);
  Decoded ours = DecodeCallsWith(stream, PtDecoder::Engine::kOurs, manifest);
  ASSERT_FALSE(lib.events.empty());
  ASSERT_EQ(lib.events.size(), ours.events.size());
  for (size_t i = 0; i < lib.events.size(); ++i)
    ASSERT_EQ(Describe(lib.events[i]), Describe(ours.events[i])) << "event " << i;
  EXPECT_EQ(lib.stats.instructions, ours.stats.instructions);
  EXPECT_EQ(lib.stats.events, ours.stats.events);
  EXPECT_EQ(lib.stats.errors, ours.stats.errors);
  EXPECT_EQ(lib.stats.undecoded_bytes, ours.stats.undecoded_bytes);
  EXPECT_EQ(lib.stats.flow_fallbacks, 0u);
  EXPECT_EQ(ours.stats.flow_fallbacks, fallbacks);
}

// Each PSB segment's times are its own (#40; docs/decoding.md,
// "Timestamps"): where tracing stops without a timing packet, events are
// placed at the rate measured in their segment, so a stream decodes to the
// same times whatever the decoder decoded before it, as streams decoded
// side by side must. The two streams' clocks run 100x apart; the rate was
// once summed over every stream decoded.
TEST(PtDecoderTest, AStreamsTimesDoNotDependOnTheStreamsDecodedBefore) {
  auto p = testing::LoadCallsProgram();
  // calls.S up to its first syscall, which stops tracing with no timing
  // packet since the last branch's, and 1 ms passes before tracing resumes:
  // where the stop lies in that millisecond, only the rate says.
  auto stream = [&](uint64_t t, uint64_t step) {
    testing::StreamBuilder b;
    t = testing::CallsUpToFirstSyscall(b, p, t, step);
    b.TipPgd();  // syscall (getpid)
    b.Tsc(t += 1'000'000);
    b.TipPge(p.Sym("main_after_syscall"));
    b.Tsc(t += step);
    b.TipPgd();
    return b.Finish();
  };
  const std::string fast = stream(1000, 10);
  const std::string slow = stream(100000, 1000);
  auto times_of_last = [&](const std::vector<std::string>& streams) {
    auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                 testing::CallsSideband(p, 100));
    EXPECT_THAT(dec, HasValue());
    std::vector<uint64_t> times;
    for (const std::string& s : streams) {
      times.clear();
      EXPECT_THAT(
          (*dec)->DecodeStream(100, s, [&](const BranchEvent& e) { times.push_back(e.time); }),
          HasValue());
    }
    return times;
  };
  const std::vector<uint64_t> alone = times_of_last({slow});
  ASSERT_GT(alone.size(), 10u);
  EXPECT_EQ(times_of_last({fast, slow}), alone);
  EXPECT_EQ(times_of_last({slow, fast, slow}), alone);
}

// A mapped stream's pages behind the decode leave the process's memory
// (StreamBytes::DropBefore), so that it does not grow with the stream, and
// the events are what decoding the same bytes held in memory gives.
TEST(PtDecoderTest, AMappedStreamsDecodedPagesAreDroppedAndTheEventsStayTheSame) {
  auto p = testing::LoadCallsProgram();
  const std::string one = testing::CallsProgramStream(p);
  std::string bytes;
  while (bytes.size() < (9u << 19)) bytes += one;  // 4.5 MiB: two drops
  ptsnap::testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "stream";
  std::ofstream(file, std::ios::binary) << bytes;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto region = base::MappedRegion::Map(bytes.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_THAT(region, HasValue());
  const uintptr_t at = reinterpret_cast<uintptr_t>(region->data());
  const trace::StreamBytes mapped(std::move(*region), bytes.size());
  ASSERT_EQ(mapped.view(), bytes);  // every page read once: all of it resident

  auto decode = [&](std::string_view view, const trace::StreamBytes* source) {
    auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                 testing::CallsSideband(p, 100));
    EXPECT_THAT(dec, HasValue());
    std::vector<std::array<uint64_t, 5>> events;
    auto sink = EventSinkOf([&](const BranchEvent& e) {
      events.push_back({static_cast<uint64_t>(e.kind), e.from, e.to, e.time, e.insns});
    });
    EXPECT_THAT((*dec)->DecodeStream(100, 100, view, sink, 0, 0, source), HasValue());
    return events;
  };
  const std::vector<std::array<uint64_t, 5>> held = decode(bytes, nullptr);
  ASSERT_GT(held.size(), 100000u);
  EXPECT_EQ(decode(mapped.view(), &mapped), held);

  // The mapping's resident size, from /proc/self/smaps: what is left is
  // the last 2 MiB or so (the decode drops every 2 MiB, 256 KiB behind it).
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  uint64_t rss_kb = UINT64_MAX;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.find('-') != std::string::npos && line.find(' ') > line.find('-') &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      in = std::stoull(line.substr(0, line.find('-')), nullptr, 16) == at;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      rss_kb = std::stoull(line.substr(4));
      break;
    }
  }
  ASSERT_NE(rss_kb, UINT64_MAX) << "the mapping is not in /proc/self/smaps";
  EXPECT_LT(rss_kb, 3u << 10) << "of " << (bytes.size() >> 10) << " KiB mapped";
}

TEST(PtDecoderTest, OursAndLibiptGiveTheSameEvents) {
  auto p = testing::LoadCallsProgram();
  const std::string good = testing::CallsProgramStream(p);
  ExpectSameAsLibipt(good, 0);
  // An error and the resync after it.
  testing::StreamBuilder b;
  b.Psb(500);
  b.TipPge(p.Sym("_start"));
  b.Raw(std::string("\xd9\xd9\xd9\xd9", 4));
  ExpectSameAsLibipt(b.Finish() + good, 0);
}

// Events only where a frame can change (docs/decoding.md, "Pipeline"):
// fib's `jl 1f` (at fib+3, two bytes) is taken for n < 2, in 13 of
// fib(6)'s 25 calls, and falls through to fib+5 in the other 12. The
// taken ones are jumps; the fall-throughs are no events, with either
// engine, and their instructions count in the next event's.
TEST(PtDecoderTest, ABranchNotTakenIsNoEvent) {
  auto p = testing::LoadCallsProgram();
  const uint64_t jl = p.Sym("fib") + 3;
  for (auto engine : {PtDecoder::Engine::kOurs, PtDecoder::Engine::kLibipt}) {
    SCOPED_TRACE(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt");
    Decoded d = DecodeCallsWith(testing::CallsProgramStream(p), engine);
    int taken = 0, fell = 0;
    uint64_t insns = 0;
    for (const auto& e : d.events) {
      insns += e.insns;
      if (e.kind != BranchKind::kJump || e.from != jl) continue;
      (e.to == jl + 2 ? fell : taken)++;
    }
    EXPECT_EQ(taken, 13);
    EXPECT_EQ(fell, 0);
    EXPECT_EQ(insns, d.stats.instructions);
  }
}

// Marks (docs/decoding.md, "Marks"): a stream of tests/programs/decode/
// marks.S decoded with `engine`; all its events.
std::vector<BranchEvent> EventsOf(const std::string& stream, PtDecoder::Engine engine) {
  auto p = testing::LoadMarksProgram();
  auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                               testing::ProgramSideband(p, 100, "decode_marks", 1));
  EXPECT_THAT(dec, HasValue());
  (*dec)->set_engine(engine);
  std::vector<BranchEvent> events;
  EXPECT_THAT((*dec)->DecodeStream(100, stream,
                                   [&](const BranchEvent& e) {
                                     EXPECT_NE(e.kind, BranchKind::kError) << ErrorMessage(e);
                                     events.push_back(e);
                                   }),
              HasValue());
  return events;
}
// Its kMark events.
std::vector<BranchEvent> MarksOf(const std::string& stream, PtDecoder::Engine engine) {
  const std::vector<BranchEvent> events = EventsOf(stream, engine);
  std::vector<BranchEvent> marks;
  for (const auto& e : events) {
    if (e.kind == BranchKind::kMark) marks.push_back(e);
  }
  EXPECT_GT(events.size(), marks.size());
  return marks;
}

// An emulated PTWRITE's payload is the 64 TNT bits after the `jmp` over its
// signature, highest bit first, whatever the code does with them: both
// ptsnap's shape (`jc` over a `nop`) and perf's (`jc` to the next
// instruction) read alike with our engine. libipt's engine reads ptsnap's
// shape only (its side decoder tells a taken branch by where the next
// instruction is: libipt_marks.h), and gives no mark for perf's.
TEST(PtDecoderTest, AnEmulatedPtwriteIsAMark) {
  auto p = testing::LoadMarksProgram();
  const uint64_t payload = 0x6f6c6c6548;  // "Hello"
  for (const auto& [fn, ret] :
       {std::pair{"ptsnap_emulate_ptwrite", 15}, {"perf_emulate_ptwrite", 20}}) {
    SCOPED_TRACE(fn);
    testing::StreamBuilder b;
    b.Psb(500);
    b.TipPge(p.Sym(fn));
    for (int bit = 63; bit >= 0; --bit) b.Tnt(((payload >> bit) & 1) != 0);
    b.Tip(p.Sym("_start") + ret);  // the return, uncompressed: no call was traced
    b.TipPgd();
    const std::string stream = b.Finish();
    const auto marks = MarksOf(stream, PtDecoder::Engine::kOurs);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0].to, payload);
    EXPECT_EQ(MarkText(marks[0].to), "0x6f6c6c6548 \"Hello\"");
    const auto lib = MarksOf(stream, PtDecoder::Engine::kLibipt);
    if (std::string_view(fn) == "perf_emulate_ptwrite") {
      EXPECT_TRUE(lib.empty());
      continue;
    }
    ASSERT_EQ(lib.size(), 1u);
    EXPECT_EQ(lib[0].to, payload);
    EXPECT_EQ(lib[0].from, marks[0].from);
  }
}

// The emulated PTWRITE's own frame is hidden (docs/decoding.md, "Marks"):
// marks.S's _start calls both shapes, then hw_mark. Neither engine reports
// the calls into the two functions, the jumps inside them or their returns,
// so their instructions are _start's; the call of hw_mark and its return
// stay. Every instruction is still counted.
TEST(PtDecoderTest, TheEmulatedPtwriteFunctionHasNoFrame) {
  auto p = testing::LoadMarksProgram();
  const uint64_t payload = 0x6f6c6c6548;
  testing::StreamBuilder b;
  b.Psb(500);
  b.TipPge(p.Sym("_start"));
  for (int shape = 0; shape < 2; ++shape) {
    for (int bit = 63; bit >= 0; --bit) b.Tnt(((payload >> bit) & 1) != 0);
    b.Tnt(true);  // the return, compressed: its call was traced
  }
  b.Tnt(true);  // hw_mark's return
  b.TipPgd();   // the exit syscall, with the kernel not traced
  const std::string stream = b.Finish();
  const uint64_t ours_lo = p.Sym("ptsnap_emulate_ptwrite");  // perf_emulate_ptwrite follows it
  const uint64_t hw = p.Sym("hw_mark");
  const auto inside = [&](uint64_t ip) { return ip >= ours_lo && ip < hw; };
  for (auto engine : {PtDecoder::Engine::kOurs, PtDecoder::Engine::kLibipt}) {
    SCOPED_TRACE(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt");
    auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                 testing::ProgramSideband(p, 100, "decode_marks", 1));
    ASSERT_THAT(dec, HasValue());
    (*dec)->set_engine(engine);
    int calls = 0, returns = 0, marks = 0;
    uint64_t insns = 0;
    ASSERT_THAT((*dec)->DecodeStream(100, stream,
                                     [&](const BranchEvent& e) {
                                       insns += e.insns;
                                       EXPECT_NE(e.kind, BranchKind::kError) << ErrorMessage(e);
                                       if (e.kind == BranchKind::kMark) {
                                         ++marks;
                                         return;
                                       }
                                       EXPECT_FALSE(inside(e.from) || inside(e.to))
                                           << std::hex << e.from << " -> " << e.to;
                                       if (e.kind == BranchKind::kCall) {
                                         ++calls;
                                         EXPECT_EQ(e.to, hw);
                                       }
                                       if (e.kind == BranchKind::kReturn) ++returns;
                                     }),
                HasValue());
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(returns, 1);
    // perf's shape gives libipt's engine no mark (libipt_marks.h).
    EXPECT_EQ(marks, engine == PtDecoder::Engine::kOurs ? 2 : 1);
    // _start's movabs and two calls, 2 x (jmp, mov, 64 x shl/jc, ret), the
    // nops not jumped over (the payload's zero bits, ptsnap's shape only),
    // then mov, call, ptwrite, ret, xor, mov, syscall.
    const uint64_t zeros = 64 - __builtin_popcountll(payload);
    EXPECT_EQ(insns, 3 + 2 * (3 + 128) + zeros + 7);
  }
}

// ptsnap's shape with libipt's engine: the same events as ours, the marks
// at the same place among them, for two marks in one segment (the side
// decoder stays positioned for the second) and for values of all zeros and
// all ones.
TEST(PtDecoderTest, LibiptEngineReadsEmulatedPtwriteLikeOurs) {
  auto p = testing::LoadMarksProgram();
  const uint64_t fn = p.Sym("ptsnap_emulate_ptwrite");
  for (const auto& [first, second] :
       {std::pair<uint64_t, uint64_t>{0x6f6c6c6548, 0x8000000000000001}, {0, ~uint64_t{0}}}) {
    SCOPED_TRACE(first);
    testing::StreamBuilder b;
    b.Psb(500);
    b.TipPge(fn);
    for (int bit = 63; bit >= 0; --bit) b.Tnt(((first >> bit) & 1) != 0);
    b.Tip(fn);  // "returns" into the function again
    for (int bit = 63; bit >= 0; --bit) b.Tnt(((second >> bit) & 1) != 0);
    b.Tip(p.Sym("_start") + 15);
    b.TipPgd();
    const std::string stream = b.Finish();
    const auto ours = EventsOf(stream, PtDecoder::Engine::kOurs);
    const auto lib = EventsOf(stream, PtDecoder::Engine::kLibipt);
    ASSERT_EQ(ours.size(), lib.size());
    std::vector<uint64_t> values;
    for (size_t i = 0; i < ours.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(ours[i].kind, lib[i].kind);
      EXPECT_EQ(ours[i].from, lib[i].from);
      EXPECT_EQ(ours[i].to, lib[i].to);
      EXPECT_EQ(ours[i].insns, lib[i].insns);
      if (lib[i].kind == BranchKind::kMark) values.push_back(lib[i].to);
    }
    EXPECT_THAT(values, ::testing::ElementsAre(first, second));
  }
}

// Tracing that stops inside the 64 branches: libipt's engine gives no mark
// (never a value made of what it did not see) and no error.
TEST(PtDecoderTest, LibiptEngineGivesNoMarkForACutEmulatedPtwrite) {
  auto p = testing::LoadMarksProgram();
  testing::StreamBuilder b;
  b.Psb(500);
  b.TipPge(p.Sym("ptsnap_emulate_ptwrite"));
  for (int bit = 0; bit < 30; ++bit) b.Tnt(bit % 3 == 0);
  b.TipPgd();
  const std::string stream = b.Finish();
  EXPECT_TRUE(MarksOf(stream, PtDecoder::Engine::kLibipt).empty());
}

// A PTW packet (with and without the FUP that fup_on_ptw adds) is a mark,
// with either engine, bound to the PTWRITE instruction (whose address the
// block decoders know from the code when no FUP gives it).
TEST(PtDecoderTest, APtwPacketIsAMark) {
  auto p = testing::LoadMarksProgram();
  for (bool fup : {false, true}) {
    SCOPED_TRACE(fup ? "fup_on_ptw" : "no fup");
    testing::StreamBuilder b;
    b.Psb(500);
    b.TipPge(p.Sym("hw_mark"));
    emulate::PacketWriter w;
    w.Ptw(0x1234, 8, fup);
    b.Raw(std::string(reinterpret_cast<const char*>(w.bytes().data()), w.bytes().size()));
    if (fup) b.Fup(p.Sym("hw_mark"));
    b.Tip(p.Sym("_start") + 28);  // the return
    b.TipPgd();
    const std::string stream = b.Finish();
    for (auto engine : {PtDecoder::Engine::kOurs, PtDecoder::Engine::kLibipt}) {
      SCOPED_TRACE(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt");
      const auto marks = MarksOf(stream, engine);
      ASSERT_EQ(marks.size(), 1u);
      EXPECT_EQ(marks[0].to, 0x1234u);
      EXPECT_EQ(marks[0].from, p.Sym("hw_mark"));  // the PTWRITE the block decoder binds it to
      EXPECT_EQ(MarkText(marks[0].to), "0x1234");
    }
  }
}

// Frequency and power (docs/decoding.md, "Frequency and power"): CBR
// packets are kCbr events on a hardware trace (not on an emulated one,
// whose CBR is a constant), PWRE and MWAIT kPowerEntry, PWRX kPowerExit,
// with either engine. Here hw_mark's thread goes idle between two blocks:
// CBR 36, PWRE C6 (state 5), PWRX (last C6, deepest C6), CBR 20, and an
// MWAIT asking for C1 where tracing starts.
TEST(PtDecoderTest, FrequencyAndPowerPacketsAreEvents) {
  auto p = testing::LoadMarksProgram();
  testing::StreamBuilder b;
  b.Psb(500);
  emulate::PacketWriter w;
  w.Cbr(36);
  w.Pwre(5, 0, false);
  w.Pwrx(5, 5, 1);
  w.Cbr(20);
  b.Raw(std::string(reinterpret_cast<const char*>(w.bytes().data()), w.bytes().size()));
  b.TipPge(p.Sym("_start"));
  emulate::PacketWriter mwait;
  mwait.Mwait(0x00, 0);  // bound to the FUP after it: where the MWAIT is
  b.Raw(std::string(reinterpret_cast<const char*>(mwait.bytes().data()), mwait.bytes().size()));
  b.Fup(p.Sym("_start"));
  b.TipPgd();
  const std::string stream = b.Finish();
  for (auto source : {trace::Source::kHardware, trace::Source::kEmulated}) {
    for (auto engine : {PtDecoder::Engine::kOurs, PtDecoder::Engine::kLibipt}) {
      SCOPED_TRACE(std::string(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt") +
                   (source == trace::Source::kHardware ? ", hardware" : ", emulated"));
      trace::Manifest m = testing::CallsManifest(100);
      m.source = source;
      auto dec =
          PtDecoder::Create("/nonexistent", m, testing::ProgramSideband(p, 100, "decode_marks", 1));
      ASSERT_THAT(dec, HasValue());
      (*dec)->set_engine(engine);
      std::vector<std::string> seen;
      ASSERT_THAT((*dec)->DecodeStream(100, stream,
                                       [&](const BranchEvent& e) {
                                         if (e.kind == BranchKind::kCbr ||
                                             e.kind == BranchKind::kPowerEntry ||
                                             e.kind == BranchKind::kPowerExit)
                                           seen.push_back(std::string(ToString(e.kind)) + " " +
                                                          std::to_string(e.to & 0xffff));
                                       }),
                  HasValue());
      if (source == trace::Source::kHardware) {
        EXPECT_THAT(seen, ::testing::ElementsAre("cbr 36", "power-entry 5", "power-exit 1285",
                                                 "cbr 20", "power-entry 0"));
      } else {
        EXPECT_THAT(seen,
                    ::testing::ElementsAre("power-entry 5", "power-exit 1285", "power-entry 0"));
      }
    }
  }
  EXPECT_EQ(CStateName(kPowerPwre | 5), "C6");
  EXPECT_EQ(CStateName(0x20), "C3");  // MWAIT hint EAX[7:4] = 2
  EXPECT_EQ(CStateName(0xf0), "C0");
}

// A PWRE's state, sub-state and HW bit, and a PWRX's last and deepest core
// C-state and wake reasons, reach the events (`to`) with either engine, and
// the [C-state] slice's arguments (PowerEntryArgs, PowerExitArgs) say them.
TEST(PtDecoderTest, PowerEventsCarryTheirStatesAndWakeReasons) {
  auto p = testing::LoadMarksProgram();
  testing::StreamBuilder b;
  b.Psb(500);
  emulate::PacketWriter w;
  w.Pwre(5, 1, true);   // C6, sub-state 1, hardware-initiated
  w.Pwrx(1, 5, 1 | 8);  // last C2, deepest C6: an interrupt and the hardware woke it
  w.Pwre(2, 0, false);  // C3
  w.Pwrx(0xf, 2, 4);    // last C0, deepest C3: a store to the monitored address
  w.Pwrx(3, 3, 0);      // no wake reason
  b.Raw(std::string(reinterpret_cast<const char*>(w.bytes().data()), w.bytes().size()));
  b.TipPge(p.Sym("_start"));
  b.TipPgd();
  const std::string stream = b.Finish();
  for (auto engine : {PtDecoder::Engine::kOurs, PtDecoder::Engine::kLibipt}) {
    SCOPED_TRACE(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt");
    auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                 testing::ProgramSideband(p, 100, "decode_marks", 1));
    ASSERT_THAT(dec, HasValue());
    (*dec)->set_engine(engine);
    std::vector<std::string> seen;
    ASSERT_THAT((*dec)->DecodeStream(100, stream,
                                     [&](const BranchEvent& e) {
                                       std::vector<PowerArg> args;
                                       if (e.kind == BranchKind::kPowerEntry)
                                         args = PowerEntryArgs(e.to);
                                       else if (e.kind == BranchKind::kPowerExit)
                                         args = PowerExitArgs(e.to);
                                       else
                                         return;
                                       std::string line(ToString(e.kind));
                                       for (const PowerArg& a : args)
                                         line += " " + *a.name + "=" + *a.value;
                                       seen.push_back(line);
                                     }),
                HasValue());
    EXPECT_THAT(seen, ::testing::ElementsAre(
                          "power-entry c_state=C6 sub_state=1 hardware_initiated=true",
                          "power-exit last_c_state=C2 deepest_c_state=C6 wake=interrupt,hardware",
                          "power-entry c_state=C3 sub_state=0 hardware_initiated=false",
                          "power-exit last_c_state=C0 deepest_c_state=C3 wake=store",
                          "power-exit last_c_state=C4 deepest_c_state=C4"));
  }
  // An MWAIT's hint: EAX[7:4] the state minus one, EAX[3:0] the sub-state.
  std::vector<std::string> mwait;
  for (const PowerArg& a : PowerEntryArgs(0x32)) mwait.push_back(*a.name + "=" + *a.value);
  EXPECT_THAT(mwait, ::testing::ElementsAre("c_state=C4", "sub_state=2"));
}

TEST(PtDecoderTest, AMarkIsShownAsTextWhereItIsPrintableAsciiAsPerfShowsIt) {
  EXPECT_EQ(MarkText(0), "0x0");
  EXPECT_EQ(MarkText(0x41), "0x41 \"A\"");
  EXPECT_EQ(MarkText(0x4141414141414141), "0x4141414141414141 \"AAAAAAAA\"");
  EXPECT_EQ(MarkText(0x4100), "0x4100");              // a NUL before the text
  EXPECT_EQ(MarkText(0x0a41), "0xa41");               // a newline
  EXPECT_EQ(MarkText(0xff00000041), "0xff00000041");  // bytes after the NUL
}

// libipt ends a block on its first pass through code where it meets an
// address its block cache holds, so the blocks of a stream depend on the
// streams decoded before it. The events do not: such a block runs straight
// on into the next, with no event between them. Here a first stream starts
// at fib's second push, so the calls program's stream decoded after it finds
// that address cached in the middle of fib's straight-line code; decoded
// alone, it does not. Its events are the same both ways, with either engine.
TEST(PtDecoderTest, TheEventsDoNotDependOnWhatLibiptCachedBefore) {
  auto p = testing::LoadCallsProgram();
  const std::string calls = testing::CallsProgramStream(p);
  testing::StreamBuilder first;
  first.Psb(500);
  first.TipPge(p.Sym("fib") + 6);  // push %rbp, after cmp (3 bytes), jl (2), push %rbx (1)
  // Two calls of fib(1) (jl taken, the return compressed), then tracing stops.
  for (int i = 0; i < 4; ++i) first.Tnt(true);
  first.TipPgd();
  const std::string before = first.Finish();
  auto branches = [](std::vector<std::string>* out) {
    return [out](const BranchEvent& e) {
      out->push_back(std::string(ToString(e.kind)) + " " + std::to_string(e.from) + "->" +
                     std::to_string(e.to) + " n=" + std::to_string(e.insns));
    };
  };
  for (auto engine : {PtDecoder::Engine::kLibipt, PtDecoder::Engine::kOurs}) {
    SCOPED_TRACE(engine == PtDecoder::Engine::kLibipt ? "libipt" : "ours");
    std::vector<std::string> alone, after, ignored;
    uint64_t blocks_alone = 0, blocks_after = 0;
    {
      auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                   testing::CallsSideband(p, 100));
      ASSERT_THAT(dec, HasValue());
      (*dec)->set_engine(engine);
      ASSERT_THAT((*dec)->DecodeStream(100, calls, branches(&alone)), HasValue());
      blocks_alone = (*dec)->stats().blocks;
    }
    {
      auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100),
                                   testing::CallsSideband(p, 100));
      ASSERT_THAT(dec, HasValue());
      (*dec)->set_engine(engine);
      ASSERT_THAT((*dec)->DecodeStream(100, before, branches(&ignored)), HasValue());
      const uint64_t blocks_before = (*dec)->stats().blocks;
      ASSERT_THAT((*dec)->DecodeStream(100, calls, branches(&after)), HasValue());
      blocks_after = (*dec)->stats().blocks - blocks_before;
    }
    // The cache split the block that holds fib's pushes.
    EXPECT_GT(blocks_after, blocks_alone);
    EXPECT_EQ(alone, after);
    EXPECT_GT(alone.size(), 60u);
  }
}

// A snapshot's stream ends wherever the ring buffer was copied, often right
// after the packet that took the last branch. That branch retired and its
// destination is known (from the TIP, from the TNT bit of a compressed
// return): it is the last event, as perf reports it, with nothing decoded
// at its destination. Both decoders agree.
TEST(PtDecoderTest, AStreamThatEndsAfterABranchEndsWithThatBranch) {
  auto p = testing::LoadCallsProgram();
  auto cut = [&](int upto) {
    testing::StreamBuilder b;
    b.Psb(1000);
    b.TipPge(p.Sym("_start"));
    b.Tsc(1010);
    b.Tnt(true);  // leaf -> mid
    if (upto >= 2) {
      b.Tnt(true);           // mid -> main
      b.Tnt(true);           // leaf (via tail_caller) -> main
      b.Tip(p.Sym("leaf"));  // call *%rax
    }
    return b.Finish();
  };
  // Both decoders' events, then ours.
  auto decode = [](const std::string& stream) {
    ExpectSameAsLibipt(stream, 0);
    return DecodeCallsWith(stream, PtDecoder::Engine::kOurs);
  };
  {  // ends after leaf's compressed return to mid
    SCOPED_TRACE("compressed return");
    Decoded d = decode(cut(1));
    ASSERT_FALSE(d.events.empty());
    EXPECT_EQ(d.events.back().kind, BranchKind::kReturn);
    EXPECT_EQ(d.events.back().from, p.Sym("leaf"));
    EXPECT_EQ(d.events.back().to, p.Sym("mid") + 5);  // after mid's `call leaf`
    EXPECT_EQ(Count(d, BranchKind::kCall), 3);        // _start->main->mid->leaf
    EXPECT_EQ(d.stats.instructions, 4u);
  }
  {  // ends after the TIP of main's `call *%rax`
    SCOPED_TRACE("indirect call");
    Decoded d = decode(cut(2));
    ASSERT_FALSE(d.events.empty());
    EXPECT_EQ(d.events.back().kind, BranchKind::kCall);
    EXPECT_EQ(d.events.back().to, p.Sym("leaf"));
    // Nothing at the destination was decoded: 10 instructions up to the
    // call, leaf's `ret` not among them.
    EXPECT_EQ(d.stats.instructions, 10u);
  }
  {  // inside a transaction (from main's entry) whose outcome is not in the trace
    SCOPED_TRACE("transaction");
    testing::StreamBuilder b;
    b.Psb(1000);
    b.TipPge(p.Sym("_start"));
    b.Tsc(1005);
    b.ModeTsx(true, false);
    b.Fup(p.Sym("main"));
    b.Tsc(1010);
    b.Tnt(true);  // leaf -> mid, speculative
    Decoded d = decode(b.Finish());
    ASSERT_FALSE(d.events.empty());
    EXPECT_EQ(Count(d, BranchKind::kReturn), 0);  // leaf -> mid: dropped with the transaction
  }
}

// SKL014 on a CPU with that erratum (the manifest's model 85) under an
// address filter: a TIP.PGD with its IP suppressed binds to the direct
// branch that leaves the filter, found with the configured ranges. Ours
// decodes it as libipt does, without falling back.
TEST(PtDecoderTest, Skl014UnderAnAddressFilterNeedsNoFallback) {
  auto p = testing::LoadCallsProgram();
  trace::Manifest m = testing::CallsManifest(100);
  m.pt.addr0_a = p.Sym("_start");  // the whole program: nothing is filtered out
  m.pt.addr0_b = p.Sym("main_landing") + 0x1000;
  const std::string stream = testing::CallsProgramStream(p) + testing::CallsProgramStream(p, 6000);
  ExpectSameAsLibipt(stream, 0, m);
  Decoded ours = DecodeCallsWith(stream, PtDecoder::Engine::kOurs, m);
  EXPECT_EQ(Count(ours, BranchKind::kCall), 2 * (4 + 1 + 25 + 2));
}

// A case ptsnap's flow decoder does not decode in the middle of a stream
// (here libipt's BDM64 workaround on a Broadwell, model 0x3d: a TSX abort
// whose FUP the code since the last branch may not reach): the events it
// delivered before are libipt's, and libipt decodes the stream again from
// the start, delivering only what follows them; one fallback is counted.
TEST(PtDecoderTest, ACaseOursDoesNotDecodeFallsBackToLibiptExactly) {
  auto p = testing::LoadCallsProgram();
  trace::Manifest m = testing::CallsManifest(100);
  m.cpu.model = 0x3d;
  testing::StreamBuilder b;
  b.Psb(9000);
  b.TipPge(p.Sym("_start"));
  b.Tsc(9010);
  b.ModeTsx(false, true);  // an abort at leaf, reported after _start's call
  b.Fup(p.Sym("leaf"));
  b.Tip(p.Sym("main_landing"));
  const std::string stream = testing::CallsProgramStream(p) + b.Finish();
  ExpectSameAsLibipt(stream, 1, m);
  Decoded ours = DecodeCallsWith(stream, PtDecoder::Engine::kOurs, m);
  // The first copy's calls and those of the part libipt decoded after the fallback.
  EXPECT_GT(Count(ours, BranchKind::kCall), 4 + 1 + 25 + 2);
}

// PIP (a CR3 write) and VMCS packets, which every kernel and per-CPU
// recording carries: in PSB+ (a status update), at a syscall (a far branch
// a paging event binds to), and after an interrupt's FUP (bound to its
// TIP). ptsnap's own decoder decodes them, exactly as libipt: no fallback.
TEST(PtDecoderTest, PagingAndVmcsPacketsNeedNoFallback) {
  auto p = testing::LoadCallsProgram();
  const auto raw = [](void (*write)(emulate::PacketWriter&)) {
    emulate::PacketWriter w;
    write(w);
    const auto b = w.bytes();
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  testing::StreamBuilder b;
  b.Raw(raw([](emulate::PacketWriter& w) {
    w.Psb();
    w.Tsc(1000);
    w.ModeExec64();
    w.Pip(0x1000, false);
    w.Vmcs(0x2000);
    w.PsbEnd();
  }));
  b.TipPge(p.Sym("_start"));
  b.Tsc(1010);
  b.Tnt(true);  // leaf -> mid
  b.Tnt(true);  // mid -> main
  b.Tnt(true);  // leaf (via tail_caller) -> main
  b.Tsc(1020);
  b.Tip(p.Sym("leaf"));  // call *%rax
  b.Tnt(true);           // leaf -> main
  b.Raw(raw([](emulate::PacketWriter& w) { w.Pip(0x3000, false); }));
  b.TipPgd();  // syscall (getpid): the PIP binds to it
  b.Tsc(1030);
  b.TipPge(p.Sym("main_after_syscall"));
  b.Fup(p.Sym("main_after_syscall"));  // an interrupt before the first instruction
  b.Raw(raw([](emulate::PacketWriter& w) {
    w.Pip(0x4000, false);
    w.Vmcs(0x5000);
  }));
  b.Tip(p.Sym("main_after_syscall"));  // ... returns there
  b.Tsc(1040);
  testing::FibTnt(b, 6);
  b.Tip(p.Sym("main_landing"));
  b.Tip(p.Sym("_start") + 5);
  b.TipPgd();
  const std::string stream = b.Finish();
  ExpectSameAsLibipt(stream, 0);
  Decoded ours = DecodeCallsWith(stream, PtDecoder::Engine::kOurs);
  EXPECT_EQ(ours.stats.errors, 0u);
  EXPECT_EQ(Count(ours, BranchKind::kCall), 4 + 1 + 25 + 2);
  EXPECT_EQ(Count(ours, BranchKind::kInterrupt), 1);
}

TEST(PtDecoderTest, CorruptBytesBecomeAnErrorAndDecodingResyncs) {
  auto p = testing::LoadCallsProgram();
  std::string good = testing::CallsProgramStream(p);
  // A broken stream start (bad packet after a PSB), then a good copy.
  testing::StreamBuilder b;
  b.Psb(500);
  b.TipPge(p.Sym("_start"));
  b.Raw(std::string("\xd9\xd9\xd9\xd9", 4));  // not valid packets
  std::string stream = b.Finish() + good;
  Decoded d = DecodeCalls(stream);
  EXPECT_GE(d.stats.errors, 1u);
  ASSERT_GE(Count(d, BranchKind::kError), 1);
  // Everything of the good copy is still decoded after the error.
  EXPECT_GE(Count(d, BranchKind::kCall), 4 + 1 + 25 + 2);
}

// --filter mid: the CPU traces mid only. Its call of leaf and its return to
// main leave the range (TIP.PGD with the target); leaf's return re-enters it.
// Each branch that left is reported before its disable, as a call or a
// return to where the trace resumes or stops: untraced time, not an error.
TEST(PtDecoderTest, FilterGapsReportTheBranchThatLeft) {
  auto p = testing::LoadCallsProgram();
  testing::StreamBuilder b;
  b.Psb(100);
  b.TipPge(p.Sym("mid"));   // main's call enters the range
  b.TipPgd(p.Sym("leaf"));  // mid: call leaf (outside)
  b.Tsc(110);
  b.TipPge(p.Sym("mid") + 5);   // leaf's ret comes back to mid
  b.TipPgd(p.Sym("main") + 5);  // mid: ret to main (outside)
  Decoded d = DecodeCalls(b.Finish());
  EXPECT_EQ(d.stats.errors, 0u);
  std::vector<std::string> got;
  for (const auto& e : d.events) {
    std::string k = e.kind == BranchKind::kEnable    ? "enable"
                    : e.kind == BranchKind::kDisable ? "disable"
                    : e.kind == BranchKind::kCall    ? "call"
                    : e.kind == BranchKind::kReturn  ? "return"
                                                     : "other";
    got.push_back(k + " " + std::to_string(e.kind == BranchKind::kDisable ? e.from : e.to));
  }
  const auto s = [&](const char* n, uint64_t off = 0) { return std::to_string(p.Sym(n) + off); };
  EXPECT_THAT(got, ::testing::ElementsAre("enable " + s("mid"), "call " + s("leaf"),
                                          "disable " + s("mid"), "enable " + s("mid", 5),
                                          "return " + s("main", 5), "disable " + s("mid", 5)));
}

TEST(PtDecoderTest, MissingImageGivesNomapErrors) {
  testing::StreamBuilder b;
  b.Psb(1);
  b.TipPge(0x12345000);  // nothing mapped there
  b.Tnt(true);
  std::string s = b.Finish();
  Decoded d = DecodeCalls(s);
  EXPECT_GE(d.stats.nomap_errors, 1u);
  EXPECT_GE(Count(d, BranchKind::kError), 1);
}

TEST(PtDecoderTest, OverflowIsReported) {
  auto p = testing::LoadCallsProgram();
  testing::StreamBuilder b;
  b.Psb(1);
  b.TipPge(p.Sym("_start"));
  b.Ovf();
  b.Fup(p.Sym("leaf"));
  std::string s = b.Finish();
  Decoded d = DecodeCalls(s);
  EXPECT_EQ(d.stats.overflows, 1u);
  EXPECT_EQ(Count(d, BranchKind::kOverflow), 1);
}

// Junk (no PSB in it) decodes to nothing; junk in front of a real stream
// costs nothing of it: decoding syncs at the stream's PSB and finds every
// instruction and event the clean stream has.
TEST(PtDecoderTest, ArbitraryBytesDecodeToNothingAndDoNotHideWhatFollows) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>((i * 7919) ^ (i >> 3)));
  Decoded d = DecodeCalls(junk);
  EXPECT_EQ(d.stats.instructions, 0u);
  EXPECT_TRUE(d.events.empty());
  const std::string stream = testing::CallsProgramStream(testing::LoadCallsProgram());
  Decoded clean = DecodeCalls(stream);
  Decoded mixed = DecodeCalls(junk + stream);
  ASSERT_GT(clean.stats.instructions, 0u);
  EXPECT_EQ(mixed.stats.instructions, clean.stats.instructions);
  ASSERT_EQ(mixed.events.size(), clean.events.size());
  for (size_t i = 0; i < clean.events.size(); ++i) {
    EXPECT_EQ(mixed.events[i].kind, clean.events[i].kind) << i;
    EXPECT_EQ(mixed.events[i].to, clean.events[i].to) << i;
    EXPECT_EQ(mixed.events[i].time, clean.events[i].time) << i;
  }
}

// Who runs on a CPU, from SWITCH_CPU_WIDE (either half) and ITRACE_START;
// idle and unknown stretches belong to the CPU's own track {0, -1 - cpu}.
TEST(PtDecoderTest, ThreadAtFollowsTheSwitchSideband) {
  auto p = testing::LoadCallsProgram();
  std::vector<trace::Record> records = testing::CallsSideband(p, 100);
  records.push_back(testing::SwitchRecord(2, 1000, true, {0, 0}, {100, 101}));  // idle -> 101
  records.push_back(testing::SwitchRecord(2, 1001, false, {100, 101}, {0, 0}));
  records.push_back(testing::SwitchRecord(2, 2000, true, {100, 101}, {7, 7}));
  records.push_back(testing::ItraceStartRecord(3, 500, 100, 100));
  records.push_back(testing::SwitchRecord(2, 3000, false, {0, 0}, {7, 7}));  // back to idle
  auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100), records);
  ASSERT_THAT(dec, HasValue());
  using T = PtDecoder::ThreadId;
  EXPECT_EQ((*dec)->ThreadAt(2, 999), (T{0, -3}));
  EXPECT_EQ((*dec)->ThreadAt(2, 1000), (T{100, 101}));
  EXPECT_EQ((*dec)->ThreadAt(2, 1999), (T{100, 101}));
  EXPECT_EQ((*dec)->ThreadAt(2, 2500), (T{7, 7}));
  EXPECT_EQ((*dec)->ThreadAt(2, 3000), (T{0, -3}));
  EXPECT_EQ((*dec)->ThreadAt(3, 499), (T{0, -4}));
  EXPECT_EQ((*dec)->ThreadAt(3, 500), (T{100, 100}));
  EXPECT_EQ((*dec)->ThreadAt(9, 500), (T{0, -10}));
  EXPECT_THAT((*dec)->CpuThreads(2), ::testing::ElementsAre(T{0, -3}, T{100, 101}, T{7, 7}));
}

// Address spaces in time order: an exec starts an empty one, an mmap over
// code from other bytes a copy; the same bytes mapped again change nothing.
TEST(PtDecoderTest, AddressSpacesChangeAtExecAndReplacingMmap) {
  auto p = testing::LoadCallsProgram();
  auto r = testing::LoadReplacedProgram();
  std::vector<trace::Record> records = testing::CallsSideband(p, 100);  // exec at 1
  for (auto& x : testing::ProgramSideband(p, 100, "", 10, false)) records.push_back(x);
  for (auto& x : testing::ProgramSideband(r, 100, "", 20, false)) records.push_back(x);
  for (auto& x : testing::ProgramSideband(p, 100, "again", 30)) records.push_back(x);
  auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100), records);
  ASSERT_THAT(dec, HasValue());
  PtDecoder& d = **dec;
  EXPECT_EQ(d.SpaceAt(100, 0), 100);      // the first space is the pid
  EXPECT_EQ(d.SpaceAt(100, 20), 100);     // the identical mapping at 11 is no change
  int32_t replaced = d.SpaceAt(100, 21);  // the replacing mmap (at 21)
  EXPECT_GE(replaced, kFirstSpaceId);
  EXPECT_FALSE(d.SpaceIsExec(replaced));
  EXPECT_EQ(d.NextSpaceChange(100, 5), 21u);
  int32_t exec = d.SpaceAt(100, 30);
  EXPECT_NE(exec, replaced);
  EXPECT_TRUE(d.SpaceIsExec(exec));
  EXPECT_EQ(d.LastSpace(100), exec);
  EXPECT_EQ(d.NextSpaceChange(100, 30), UINT64_MAX);
  // Symbols follow: main before the replacement, alpha's bytes after it.
  EXPECT_EQ(*d.symbolizer().Resolve(100, p.Sym("main")).name, "main");
  EXPECT_EQ(*d.symbolizer().Resolve(replaced, r.Sym("alpha")).name, "alpha");
  EXPECT_EQ(*d.symbolizer().Resolve(exec, p.Sym("main")).name, "main");
  EXPECT_EQ(d.SpaceAt(555, 10), 555);  // unknown processes: their pid
}

// The calls program (pid 100), then replaced.S exec'd at time 2000: two
// address spaces. `stream` decoded by `engine`, with the last space.
struct DecodedAcrossExec {
  Decoded d;
  int32_t last_space = 0;
};
DecodedAcrossExec DecodeAcrossExec(const std::string& stream, PtDecoder::Engine engine) {
  auto p = testing::LoadCallsProgram();
  auto r = testing::LoadReplacedProgram();
  std::vector<trace::Record> records = testing::CallsSideband(p, 100);
  for (auto& x : testing::ProgramSideband(r, 100, "replaced", 2000)) records.push_back(x);
  auto dec = PtDecoder::Create("/nonexistent", testing::CallsManifest(100), records);
  EXPECT_THAT(dec, HasValue());
  (*dec)->set_engine(engine);
  DecodedAcrossExec out;
  EXPECT_THAT(
      (*dec)->DecodeStream(100, stream, [&](const BranchEvent& e) { out.d.events.push_back(e); }),
      HasValue());
  out.d.stats = (*dec)->stats();
  out.last_space = (*dec)->LastSpace(100);
  return out;
}

// A stream without timing has no place in time: it decodes against the
// address space at the end of the recording (here: after the exec of
// replaced.S), as all streams did before spaces changed at their times.
TEST(PtDecoderTest, StreamWithoutTimingUsesTheLastSpace) {
  auto r = testing::LoadReplacedProgram();
  testing::StreamBuilder b;
  b.PsbWithoutTsc();
  b.TipPge(r.Sym("_start"));
  b.Tnt(true);
  b.Tnt(true);
  b.Tnt(true);
  b.TipPgd();
  const DecodedAcrossExec x = DecodeAcrossExec(b.Finish(), PtDecoder::Engine::kOurs);
  EXPECT_EQ(x.d.stats.errors, 0u);
  ASSERT_FALSE(x.d.events.empty());
  for (const auto& e : x.d.events) EXPECT_EQ(e.space, x.last_space);
  EXPECT_NE(x.last_space, 100);
}

// A TSC of 0 is a time, not the absence of one: an emulated trace starts at
// TSC 0 (one tick per instruction from the program's first). A stream that
// starts there decodes against the space of time 0, not the space of a
// later exec. Before, a program that exec'd another decoded its start
// against the new program's mappings: an error at its first block.
TEST(PtDecoderTest, StreamStartingAtTscZeroUsesTheSpaceOfTimeZero) {
  auto p = testing::LoadCallsProgram();
  testing::StreamBuilder b;
  b.Psb(0);
  b.TipPge(p.Sym("main"));
  b.TipPgd();
  const std::string stream = b.Finish();
  for (const auto engine : {PtDecoder::Engine::kLibipt, PtDecoder::Engine::kOurs}) {
    SCOPED_TRACE(engine == PtDecoder::Engine::kOurs ? "ours" : "libipt");
    const DecodedAcrossExec x = DecodeAcrossExec(stream, engine);
    EXPECT_EQ(x.d.stats.errors, 0u);
    ASSERT_FALSE(x.d.events.empty());
    for (const auto& e : x.d.events) EXPECT_EQ(e.space, 100);
    EXPECT_NE(x.last_space, 100);
  }
}

// JIT code is named by the process's perf map as the recording machine had
// it, which the recorder copies into the trace (jit/perf-PID.map); the
// decoding machine's /tmp/perf-PID.map belongs to other processes.
TEST(PtDecoderTest, PerfMapInTheTraceDirNamesJitCode) {
  ptsnap::testing::TempDir tmp;
  const int32_t pid = ::getpid();  // no other test run uses this pid
  const std::string map = "perf-" + std::to_string(pid) + ".map";
  tmp.Write("recording-host/" + map, "7f0000001000 40 jitted_add\n");
  auto p = testing::LoadCallsProgram();
  {
    auto w = trace::TraceWriter::Create(tmp.path() / "trace", testing::CallsManifest(pid));
    ASSERT_THAT(w, HasValue());
    const int32_t pids[] = {pid};
    ASSERT_THAT(w->CopyPerfMaps(pids, tmp.path() / "recording-host"), HasValue());
    ASSERT_THAT(w->Finish(), HasValue());
  }
  auto reader = trace::TraceReader::Open(tmp.path() / "trace");
  ASSERT_THAT(reader, HasValue());
  auto dec = PtDecoder::Create(reader->dir(), reader->manifest(), testing::CallsSideband(p, pid));
  ASSERT_THAT(dec, HasValue());
  Resolved r = (*dec)->symbolizer().Resolve(pid, 0x7f0000001010);
  EXPECT_TRUE(r.known);
  EXPECT_EQ(*r.name, "jitted_add");
  EXPECT_EQ(*r.dso, "[jit]");
  EXPECT_EQ(r.start, 0x7f0000001000u);
  EXPECT_EQ(*(*dec)->symbolizer().Resolve(pid, p.Sym("main")).name, "main");  // ELF code as before

  // This machine's map of the same pid is not the recording's: not read.
  const std::filesystem::path host_map = std::filesystem::path("/tmp") / map;
  ASSERT_FALSE(std::filesystem::exists(host_map));
  {
    std::ofstream out(host_map);
    out << "7f0000003000 40 decoding_host_only\n";
  }
  auto plain = PtDecoder::Create(tmp.path() / "no-jit", testing::CallsManifest(pid),
                                 testing::CallsSideband(p, pid));
  std::filesystem::remove(host_map);
  ASSERT_THAT(plain, HasValue());
  EXPECT_FALSE((*plain)->symbolizer().Resolve(pid, 0x7f0000003010).known);
  EXPECT_FALSE((*plain)->symbolizer().Resolve(pid, 0x7f0000001010).known);
}

// A hardware trace (an emulated one takes only names from a jitdump) of
// process `pid` in tmp/trace, with `dump` as its jitdump, opened.
Result<trace::TraceReader> JitdumpTrace(const ptsnap::testing::TempDir& tmp, int32_t pid,
                                        const std::string& dump) {
  const std::string name = "host/jit-" + std::to_string(pid) + ".dump";
  tmp.Write(name, dump);
  trace::Manifest m = testing::CallsManifest(pid);
  m.source = trace::Source::kHardware;
  PTSNAP_ASSIGN_OR_RETURN(auto w, trace::TraceWriter::Create(tmp.path() / "trace", m));
  PTSNAP_TRY(w.CopyJitdump(pid, tmp.path() / name));
  PTSNAP_TRY(w.Finish());
  return trace::TraceReader::Open(tmp.path() / "trace");
}

// Hardware traces take JIT code bytes from the runtime's jitdump: each
// JIT_CODE_LOAD is added at its timestamp, and a load over different bytes
// at the same address (code reused) starts a new address space there. Here
// version 1 (nop; ret) runs four times, then the stream's TSC passes the
// second load's time and version 2 (three nops; ret) runs twice: 4 * 2 +
// 2 * 4 instructions, none unmapped.
TEST(PtDecoderTest, JitdumpCodeLoadsDecodeAtTheirTimes) {
  ptsnap::testing::TempDir tmp;
  const int32_t pid = ::getpid();
  const uint64_t a = 0x7f0000001000;
  testing::JitdumpBuilder dump(pid);
  dump.Load(5, a, "jit_one", "\x90\xc3", 1).Load(150, a, "jit_two", "\x90\x90\x90\xc3", 2);
  auto p = testing::LoadCallsProgram();
  auto reader = JitdumpTrace(tmp, pid, dump.bytes());
  ASSERT_THAT(reader, HasValue());
  auto dec = PtDecoder::Create(reader->dir(), reader->manifest(), testing::CallsSideband(p, pid));
  ASSERT_THAT(dec, HasValue());
  testing::StreamBuilder b;
  b.Psb(10);
  b.TipPge(a);
  for (int i = 0; i < 3; ++i) b.Tip(a);  // each ret returns to a
  b.Tsc(200);
  b.Tip(a);
  b.Tip(a);
  b.TipPgd();
  const std::string stream = b.Finish();
  ASSERT_THAT((*dec)->DecodeStream(pid, stream, [](const BranchEvent&) {}), HasValue());
  const DecodeStats& st = (*dec)->stats();
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(st.instructions, 4u * 2 + 2u * 4);
  EXPECT_EQ(st.jit_loads, 2u);
  EXPECT_EQ(st.jit_rewrites, 1u);
  EXPECT_TRUE((*dec)->symbolizer().Resolve(pid, a).known);

  // The same dump in an emulated trace: names only (its timestamps are not
  // the virtual clock; the emulator's capture has the bytes).
  trace::Manifest emulated = reader->manifest();
  emulated.source = trace::Source::kEmulated;
  auto names_only = PtDecoder::Create(reader->dir(), emulated, testing::CallsSideband(p, pid));
  ASSERT_THAT(names_only, HasValue());
  ASSERT_THAT((*names_only)->DecodeStream(pid, stream, [](const BranchEvent&) {}), HasValue());
  EXPECT_EQ((*names_only)->stats().jit_loads, 0u);
  EXPECT_GE((*names_only)->stats().nomap_errors, 1u);
  EXPECT_TRUE((*names_only)->symbolizer().Resolve(pid, a).known);
}

// A jitdump's JIT_CODE_DEBUG_INFO gives its code load's source lines, in
// the address space the load went into: version 1 (with debug info) keeps
// its file:line for code that ran before version 2 (none) replaced it at
// the same address; a move carries the lines to the new address. An
// emulated trace sets them in every space (as the names): the last load
// at an address wins.
TEST(PtDecoderTest, JitdumpDebugInfoGivesJitCodeSourceLines) {
  ptsnap::testing::TempDir tmp;
  const int32_t pid = ::getpid();
  const uint64_t a = 0x7f0000001000, moved = 0x7f0000005000;
  // Two entries: the code's first byte is line 3 of hot.js, its ret line 4.
  const std::string file = "/app/hot.js";
  testing::JitdumpBuilder dump(pid);
  dump.DebugInfo(4, a, {{a, 3, file}, {a + 1, 4, file}})
      .Load(5, a, "jit_one", "\x90\xc3", 1)
      .Move(100, a, moved, 2, 1)
      .Load(150, a, "jit_two", "\x90\x90\x90\xc3", 2);
  auto p = testing::LoadCallsProgram();
  auto reader = JitdumpTrace(tmp, pid, dump.bytes());
  ASSERT_THAT(reader, HasValue());
  auto dec = PtDecoder::Create(reader->dir(), reader->manifest(), testing::CallsSideband(p, pid));
  ASSERT_THAT(dec, HasValue());
  Symbolizer& sym = (*dec)->symbolizer();
  const int32_t before = (*dec)->SpaceAt(pid, 10), after = (*dec)->SpaceAt(pid, 200);
  ASSERT_NE(before, after);  // version 2 rewrote the code: a new space
  const SourceLocation* entry = sym.SourceLine(before, a);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->file, file);
  EXPECT_EQ(entry->line, 3u);
  ASSERT_NE(sym.SourceLine(before, a + 1), nullptr);
  EXPECT_EQ(sym.SourceLine(before, a + 1)->line, 4u);
  EXPECT_EQ(sym.SourceLine(after, a), nullptr) << "version 2 has no debug info";
  ASSERT_NE(sym.SourceLine(after, moved + 1), nullptr) << "moved with its lines";
  EXPECT_EQ(sym.SourceLine(after, moved + 1)->line, 4u);

  // Emulated: in every space, the file's last load at `a` (version 2,
  // without lines) wins there; the move's copy keeps its lines.
  trace::Manifest emulated = reader->manifest();
  emulated.source = trace::Source::kEmulated;
  auto untimed = PtDecoder::Create(reader->dir(), emulated, testing::CallsSideband(p, pid));
  ASSERT_THAT(untimed, HasValue());
  const int32_t space = (*untimed)->SpaceAt(pid, 10);
  EXPECT_EQ((*untimed)->symbolizer().SourceLine(space, a), nullptr);
  ASSERT_NE((*untimed)->symbolizer().SourceLine(space, moved), nullptr);
  EXPECT_EQ((*untimed)->symbolizer().SourceLine(space, moved)->line, 3u);
}

}  // namespace
}  // namespace ptsnap::decode
