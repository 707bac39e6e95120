// End to end on the emulated PT source: programs with a known call
// structure run under qemu-x86_64 with ptsnap's plugin (src/emulate), and the
// trace directory is decoded with the real pipeline. Checks the exact slice
// structure a user would see in Perfetto.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/string_util.h"
#include "decode/symbols.h"
#include "elf/symbol_file.h"
#include "emulate/emulate.h"
#include "pipeline/pipeline.h"
#include "tests/support/events.h"
#include "tests/support/objdump.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// The writers and readers this module drives.
using namespace ::ptsnap::output;
namespace {

using ::ptsnap::testing::HasValue;

struct Line {
  uint64_t ts = 0;
  int32_t tid = 0;
  char ph = 0;
  std::string name;
};

std::vector<Line> Parse(const std::string& text) {
  std::vector<Line> out;
  for (const auto& e : ::ptsnap::testing::ParseEvents(text))
    out.push_back({e.ts, e.tid, e.kind, e.name});
  return out;
}

class DecodeEmulated : public ::testing::Test {
 protected:
  std::string Run(std::vector<std::string> cmd, DecodeReport* report_out = nullptr,
                  const std::string& suffix = ".events") {
    record::RecordOptions o;
    o.full_execution = true;
    return Run(std::move(cmd), o, report_out, suffix);
  }
  std::string Run(std::vector<std::string> cmd, record::RecordOptions o,
                  DecodeReport* report_out = nullptr, const std::string& suffix = ".events") {
    o.command = std::move(cmd);
    auto dir = tmp_.path() / ("t" + std::to_string(n_++));
    auto r = emulate::RecordEmulated(o, dir);
    EXPECT_THAT(r, HasValue());
    if (!r) return "";
    exit_code_ = *r;
    DecodeOptions d;
    d.output = dir.string() + suffix;
    d.inline_frames = inline_frames_;
    auto rep = DecodeTraceDir(dir, d);
    EXPECT_THAT(rep, HasValue());
    if (!rep) return "";
    if (report_out != nullptr) *report_out = *rep;
    auto text = base::ReadFile(d.output, size_t{1} << 30);
    return text ? *text : "";
  }
  ::ptsnap::testing::TempDir tmp_;
  int n_ = 0;
  int exit_code_ = -1;  // the last program's, under the emulator
  bool inline_frames_ = true;
};

TEST_F(DecodeEmulated, FibSixGivesExactlyTwentyFiveNestedFibSlices) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_FIB, "6"}, &rep);
  auto lines = Parse(text);
  int begins = 0, depth = 0, max_depth = 0, open = 0;
  for (const auto& l : lines) {
    if (l.name != "fib") continue;
    if (l.ph == 'B') {
      ++begins;
      max_depth = std::max(max_depth, ++depth);
      ++open;
    }
    if (l.ph == 'E') {
      --depth;
      --open;
    }
  }
  EXPECT_EQ(begins, 25);
  EXPECT_EQ(open, 0);
  EXPECT_EQ(max_depth, 6);  // fib(6) .. fib(1)
  // deep(150): 151 nested frames.
  int deep = 0;
  for (const auto& l : lines) deep += l.ph == 'B' && l.name == "deep";
  EXPECT_EQ(deep, 151);
  EXPECT_EQ(rep.decode.errors, 0u) << text.substr(0, 2000);
  int mains = 0, syscalls = 0, writes_with_syscall = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    mains += lines[i].ph == 'B' && lines[i].name == "main";
    syscalls += lines[i].ph == 'B' && lines[i].name == "[syscall]";
    // printf's write(2): "[syscall]" nested directly inside write (libc's __write
    // too, both weak: the fewest underscores name it, as perf names it).
    if (i > 0 && lines[i].ph == 'B' && lines[i].name == "[syscall]" && lines[i - 1].ph == 'B' &&
        lines[i - 1].name == "write") {
      ++writes_with_syscall;
    }
  }
  EXPECT_EQ(mains, 1);
  EXPECT_GT(syscalls, 5);  // the loader's mmap/open/..., and the write
  EXPECT_GE(writes_with_syscall, 1);
  EXPECT_FALSE(rep.top_total.empty());
}

TEST_F(DecodeEmulated, JsonSlicesCarryFileAndLineFromDwarf) {
  // fib.c is built with -g (debugoptimized); fib's entry is on line 6.
  std::string text = Run({PTSNAP_EMU_FIB, "3"}, nullptr, ".json");
  nlohmann::json j = nlohmann::json::parse(text);  // throws (fails the test) if invalid
  int fibs = 0, with_line = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "fib") continue;
    ++fibs;
    const auto& args = e["args"];
    if (args.contains("file") && args.contains("line")) {
      std::string file = args["file"].get<std::string>();
      EXPECT_EQ(file.substr(file.rfind('/') + 1), "fib.c");
      EXPECT_EQ(args["line"], 6);
      ++with_line;
    }
  }
  EXPECT_EQ(fibs, 5);  // fib(3): 3, 2, 1, 0, 1
  EXPECT_EQ(with_line, fibs);
}

// Inline frames (tests/programs/decode/inline.c, -O2 with DWARF): inl_step,
// inlined into loop_caller's loop, is a frame of its own nested in
// loop_caller, one per iteration, like leaf_call, a real call; with inline
// frames off only the real calls are frames.
TEST_F(DecodeEmulated, InlinedCallsAreFramesNestedInTheirCaller) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_DECODE_INLINE, "7"}, &rep);
  if (std::getenv("PTSNAP_DUMP") != nullptr) std::fputs(text.c_str(), stderr);
  EXPECT_EQ(rep.decode.errors, 0u);
  auto count = [](const std::string& events) {
    std::map<std::string, int> calls, in_caller;  // begins; begins right inside loop_caller
    std::vector<std::string> stack;
    for (const auto& e : ::ptsnap::testing::ParseEvents(events)) {
      if (e.kind == 'B' && !e.inferred) {
        calls[e.name]++;
        if (!stack.empty() && stack.back() == "loop_caller") in_caller[e.name]++;
        if (e.name.ends_with(" (inlined)")) {
          EXPECT_EQ(e.via, "inline") << e.name;
        }
        stack.push_back(e.name);
      }
      if (e.kind == 'E' && !e.inferred && !stack.empty()) {
        EXPECT_EQ(stack.back(), e.name);
        stack.pop_back();
      }
    }
    return std::make_pair(calls, in_caller);
  };
  auto [calls, in_caller] = count(text);
  EXPECT_EQ(calls["loop_caller"], 1);
  EXPECT_EQ(calls["inl_step (inlined)"], 7) << text.substr(0, 4000);
  EXPECT_EQ(in_caller["inl_step (inlined)"], 7);
  EXPECT_EQ(calls["leaf_call"], 7);
  EXPECT_EQ(in_caller["leaf_call"], 7);

  // Chrome JSON: the same frames, marked, each inside a loop_caller slice.
  std::string json = Run({PTSNAP_DECODE_INLINE, "7"}, nullptr, ".json");
  nlohmann::json j = nlohmann::json::parse(json);
  double caller_ts = -1, caller_end = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") == "loop_caller") {
      caller_ts = e["ts"].get<double>();
      caller_end = caller_ts + e["dur"].get<double>();
    }
  }
  int marked = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "inl_step (inlined)") continue;
    EXPECT_TRUE(e["args"].value("inlined", false));
    EXPECT_GE(e["ts"].get<double>(), caller_ts);
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), caller_end);
    ++marked;
  }
  EXPECT_EQ(marked, 7);

  inline_frames_ = false;
  text = Run({PTSNAP_DECODE_INLINE, "7"});
  EXPECT_EQ(text.find("(inlined)"), std::string::npos);
  auto [plain, plain_in_caller] = count(text);
  EXPECT_EQ(plain["leaf_call"], 7);
  EXPECT_EQ(plain_in_caller["leaf_call"], 7);
}

// Under the emulator every instruction takes 1 ns, so an inlined frame lasts
// exactly the instructions it ran: each inl_step frame of the loop lasts as
// many ns as objdump (an independent disassembler) lists instructions in
// inl_step's run of the loop's block (the run by DWARF, from the Symbolizer).
TEST_F(DecodeEmulated, InlinedFramesLastTheInstructionsTheyRan) {
  const std::string prog = PTSNAP_DECODE_INLINE;
  auto elf = elf::SymbolFile::Open(prog);
  ASSERT_TRUE(elf.has_value());
  uint64_t caller = 0, caller_size = 0;
  for (const auto& sym : elf->symbols().symbols()) {
    if (sym.name == "loop_caller") {
      caller = sym.start;
      caller_size = sym.size;
    }
  }
  ASSERT_NE(caller, 0u);
  // The loop's block: from the instruction after the call of leaf_call to
  // the jne that closes the loop.
  const auto listing = ::ptsnap::testing::ObjdumpInstructions(prog, caller, caller + caller_size);
  uint64_t start = 0, end = 0;
  for (size_t i = 0; i + 1 < listing.size(); ++i) {
    if (start == 0 && listing[i].text.find("<leaf_call>") != std::string::npos)
      start = listing[i + 1].addr;
    if (start != 0 && end == 0 && listing[i + 1].text.rfind("jne ", 0) == 0)
      end = listing[i + 1].addr;
  }
  ASSERT_NE(start, 0u);
  ASSERT_NE(end, 0u);
  constexpr uint64_t kBase = 0x555500000000;
  decode::Symbolizer symbols;
  symbols.AddMapping(1, kBase, 0x10000, 0, prog, "inline");
  const decode::Resolved fn = symbols.Resolve(1, kBase + caller);
  const decode::InlineRuns* runs = symbols.Inlines(1, fn.start, kBase + start, kBase + end);
  ASSERT_NE(runs, nullptr);
  // loop_caller's code, inl_step's, loop_caller's.
  ASSERT_EQ(runs->runs.size(), 3u);
  ASSERT_NE(runs->runs[1].leaf, nullptr);
  const uint64_t lo = runs->runs[1].addr - kBase, hi = runs->runs[2].addr - kBase;
  const auto expected = static_cast<uint64_t>(std::count_if(
      listing.begin(), listing.end(), [&](const auto& i) { return i.addr >= lo && i.addr < hi; }));
  ASSERT_GT(expected, 3u);

  const std::string text = Run({prog, "7"});
  int frames = 0;
  for (const auto& e : ::ptsnap::testing::ParseEvents(text)) {
    if (e.kind != 'E' || e.name != "inl_step (inlined)") continue;
    ++frames;
    EXPECT_EQ(e.ts - e.begin, expected) << "inl_step ending at " << e.ts;
  }
  EXPECT_EQ(frames, 7);
}

TEST_F(DecodeEmulated, ExceptionCrossingThreeFramesUnwindsThem) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_EXCEPTION}, &rep);
  if (std::getenv("PTSNAP_DUMP") != nullptr) std::fputs(text.c_str(), stderr);
  auto lines = Parse(text);
  // Per main-thread stack: after each catch, no inner/middle/outer is open.
  std::vector<std::string> stack;
  int throws_closed = 0;
  for (const auto& l : lines) {
    if (l.ph == 'B') stack.push_back(l.name);
    if (l.ph == 'E' && !stack.empty()) stack.pop_back();
    if (l.ph == 'E' && l.name == "outer(int)") {
      // outer ends; nothing above main may remain from that call.
      ++throws_closed;
    }
  }
  EXPECT_EQ(throws_closed, 4);  // two normal returns, two unwound by exceptions
  EXPECT_GE(rep.model.unwinds, 2u);
  EXPECT_EQ(rep.decode.errors, 0u);
  // No stair-stepping: "main" is never nested inside inner/middle/outer.
  stack.clear();
  for (const auto& l : lines) {
    if (l.ph == 'B') {
      if (l.name == "main") {
        for (const auto& s : stack) EXPECT_NE(s, "inner(int)");
      }
      stack.push_back(l.name);
    }
    if (l.ph == 'E' && !stack.empty()) stack.pop_back();
    if (l.ph == 'B' && l.name == "outer(int)") {
      // When outer begins, the stack below it must not hold another outer.
      int outers = 0;
      for (const auto& s : stack) outers += s == "outer(int)";
      EXPECT_EQ(outers, 1);
    }
  }
}

TEST_F(DecodeEmulated, TwoThreadsOnSeparateTracks) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_THREADS}, &rep);
  auto lines = Parse(text);
  std::map<int32_t, int> work_by_tid;
  for (const auto& l : lines) {
    if (l.ph == 'B' && l.name == "work") work_by_tid[l.tid]++;
  }
  ASSERT_EQ(work_by_tid.size(), 2u) << text.substr(0, 3000);
  std::vector<int> counts;
  counts.reserve(work_by_tid.size());
  for (auto& [tid, n] : work_by_tid) counts.push_back(n);
  std::sort(counts.begin(), counts.end());
  EXPECT_EQ(counts, (std::vector<int>{5, 7}));
  EXPECT_GE(rep.threads, 2u);
}

// Signals (tests/programs/emulate/signal.c): five raise(SIGUSR1), each
// delivered on the way out of its syscall, then SIGALRM from a timer
// interrupting main's busy loop. Each handler is a frame nested above the
// interrupted one, which stays open: main is begun once, seen (not
// inferred), and ends after every handler.
TEST_F(DecodeEmulated, SignalHandlersNestAboveTheInterruptedFrame) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_SIGNAL}, &rep);
  ASSERT_EQ(exit_code_, 0) << "the signal program failed under the emulator";
  EXPECT_EQ(text.find(" main inferred"), std::string::npos) << text.substr(0, 3000);
  auto lines = Parse(text);
  std::vector<std::string> stack;
  int main_begins = 0, handlers = 0, in_main = 0, above_raise = 0;
  bool main_open = false;
  for (const auto& l : lines) {
    if (l.ph == 'B') {
      if (l.name == "main") {
        ++main_begins;
        main_open = true;
      }
      if (l.name == "handler") {
        ++handlers;
        EXPECT_TRUE(main_open) << "handler #" << handlers << " outside main";
        ASSERT_FALSE(stack.empty());
        in_main += stack.back() == "main";  // the timer interrupted main's loop
        // raise() is libc's gsignal (one address, two names).
        above_raise += std::find_if(stack.begin(), stack.end(), [](const std::string& f) {
                         return f == "raise" || f == "gsignal";
                       }) != stack.end();
      }
      stack.push_back(l.name);
    } else if (l.ph == 'E') {
      ASSERT_FALSE(stack.empty()) << "E " << l.name << " with no open frame";
      EXPECT_EQ(stack.back(), l.name) << "frames must nest";
      stack.pop_back();
      if (l.name == "main") main_open = false;
    }
  }
  EXPECT_EQ(main_begins, 1);
  EXPECT_GE(handlers, 15);
  EXPECT_EQ(above_raise, 5);  // raise(SIGUSR1) stays open below its handler
  EXPECT_GE(in_main, 10);     // the busy loop's frame stays open below SIGALRM's
  EXPECT_EQ(rep.decode.errors, 0u);
  EXPECT_EQ(rep.model.inferred, 0u);
}

size_t CountLines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The AUX ring is not cleared between the snapshots of a --multi-snapshot
// recording, so each snapshot here still holds everything before it. The
// decode shows each stretch once: as many fib slices as one snapshot at
// exit, not the sum over the four snapshots (perf removes the overlap too).
TEST_F(DecodeEmulated, OverlappingSnapshotsAreShownOnce) {
  record::RecordOptions once;  // one snapshot, at exit
  DecodeReport one;
  std::string single = Run({PTSNAP_EMU_STOP_INDICATOR, "3"}, once, &one);
  ASSERT_EQ(exit_code_, 0);
  record::RecordOptions multi;
  multi.trigger = ".";
  multi.multi_snapshot = true;
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_STOP_INDICATOR, "3"}, multi, &rep);
  ASSERT_EQ(exit_code_, 0);
  EXPECT_EQ(rep.streams, 4u);
  const size_t fib_once = CountLines(single, " B fib");
  EXPECT_EQ(fib_once, 1973u + 3 * 177u) << "fib(15) then fib(10) three times";
  EXPECT_EQ(CountLines(text, " B fib"), fib_once);
  EXPECT_GT(rep.overlap_events_skipped, 0u);
  EXPECT_EQ(rep.decode.errors, 0u);
  EXPECT_EQ(CountLines(text, "[snapshot "), 4u);
}

// The frames of a thread's snapshots are stitched: a frame that runs
// through several snapshots is one slice, so the multi-snapshot timeline
// has each function's frames once, as one snapshot at exit has them
// (before, every snapshot began `main` again from the trace's start:
// main 4 times, totals above the span).
TEST_F(DecodeEmulated, SnapshotsOfAThreadAreStitched) {
  auto begins = [](const std::string& text) {
    std::map<std::string, size_t> n;
    for (std::string_view line : base::Split(text, '\n')) {
      const auto f = base::Split(line, ' ');
      if (f.size() < 5 || f[3] != "B" || f[4].starts_with("[")) continue;
      n[std::string(f[4])]++;
    }
    return n;
  };
  record::RecordOptions once;
  DecodeReport one;
  const std::string single = Run({PTSNAP_EMU_STOP_INDICATOR, "3"}, once, &one);
  ASSERT_EQ(exit_code_, 0);
  record::RecordOptions multi;
  multi.trigger = ".";
  multi.multi_snapshot = true;
  DecodeReport rep;
  const std::string text = Run({PTSNAP_EMU_STOP_INDICATOR, "3"}, multi, &rep);
  ASSERT_EQ(exit_code_, 0);
  ASSERT_EQ(rep.streams, 4u);
  EXPECT_EQ(begins(text), begins(single));
  EXPECT_EQ(begins(text)["main"], 1u);
  EXPECT_EQ(CountLines(text, " inferred"), 0u) << "nothing begins before the trace";
  EXPECT_EQ(rep.implausible.count(), 0u) << rep.implausible.first_over_span;
  EXPECT_EQ(rep.snapshot_gaps, 0u);
}

// --multi-snapshot under --emulate stores a thread's snapshot as what its
// ring gained since the thread's previous snapshot (trace::Stream::follows,
// docs/trace-format.md), so the disk grows with the new data, not with the
// number of snapshots. Read back, every snapshot's stream is byte for byte
// the whole ring that a recording storing whole rings
// (PTSNAP_EMULATE_WHOLE_RINGS; the emulator is deterministic) wrote, and the
// timeline, of all snapshots or of one, is the same. With a 64 KiB ring the
// program's start and the slow call (call 20) bring more than the ring
// holds: those snapshots are whole rings, and later ones continue them.
TEST_F(DecodeEmulated, MultiSnapshotStoresWhatEachRingGainedAndDecodesTheSame) {
  // Events as (time, thread in order of appearance, kind, name): the two
  // recordings' thread ids differ.
  auto events = [](const std::string& text) {
    std::vector<std::string> out;
    std::map<int32_t, size_t> threads;
    for (const auto& e : ::ptsnap::testing::ParseEvents(text)) {
      const size_t t = threads.emplace(e.tid, threads.size()).first->second;
      out.push_back(std::to_string(e.ts) + " " + std::to_string(t) + " " + e.kind + " " + e.name);
    }
    return out;
  };
  auto decode = [&](const std::filesystem::path& dir, uint32_t snapshot) {
    DecodeOptions d;
    d.output = dir.string() + "." + std::to_string(snapshot) + ".events";
    d.snapshot = snapshot;
    auto rep = DecodeTraceDir(dir, d);
    EXPECT_THAT(rep, HasValue());
    auto text = base::ReadFile(d.output, size_t{1} << 30);
    return text ? events(*text) : std::vector<std::string>{};
  };
  for (const uint64_t ring : {uint64_t{0}, uint64_t{64} << 10}) {
    SCOPED_TRACE("ring " + std::to_string(ring));
    std::vector<std::filesystem::path> dirs;
    for (const bool whole : {false, true}) {
      // The program sees the variable too: one of the same length in both
      // runs, so that both run the same instructions.
      ::setenv("PTSNAP_EMULATE_WHOLE_RINGS", whole ? "1" : "0", 1);
      record::RecordOptions o;
      o.command = {PTSNAP_EMU_SLOW_CALL, "40", "20", "300", "100000"};
      o.trigger = "handle_request";
      o.multi_snapshot = true;
      o.snapshot_size = ring;
      dirs.push_back(tmp_.path() / ("t" + std::to_string(n_++)));
      auto r = emulate::RecordEmulated(o, dirs.back());
      ::unsetenv("PTSNAP_EMULATE_WHOLE_RINGS");
      ASSERT_THAT(r, HasValue());
      ASSERT_EQ(*r, 0);
    }
    auto incremental = trace::TraceReader::Open(dirs[0]);
    auto whole = trace::TraceReader::Open(dirs[1]);
    ASSERT_THAT(incremental, HasValue());
    ASSERT_THAT(whole, HasValue());
    const auto& streams = incremental->manifest().streams;
    ASSERT_EQ(incremental->manifest().snapshots.size(), 41u);  // 40 calls, the exit
    ASSERT_EQ(streams.size(), whole->manifest().streams.size());
    uint64_t on_disk = 0, viewed = 0, whole_on_disk = 0;
    size_t follow = 0;
    for (size_t k = 0; k < streams.size(); ++k) {
      SCOPED_TRACE("stream " + std::to_string(k));
      const trace::Stream& s = streams[k];
      const trace::Stream& w = whole->manifest().streams[k];
      EXPECT_FALSE(w.follows.has_value());
      EXPECT_EQ(s.snapshot, w.snapshot);
      EXPECT_EQ(s.wrapped, w.wrapped);
      EXPECT_EQ(trace::ViewedBytes(s), w.size);
      auto bytes = incremental->ReadStream(s);
      auto want = whole->ReadStream(w);
      ASSERT_THAT(bytes, HasValue());
      ASSERT_THAT(want, HasValue());
      EXPECT_TRUE(*bytes == *want) << bytes->size() << " bytes, want " << want->size();
      on_disk += s.size;
      viewed += trace::ViewedBytes(s);
      whole_on_disk += w.size;
      follow += s.follows.has_value();
    }
    EXPECT_EQ(viewed, whole_on_disk);
    // Each call adds a few hundred bytes; a whole ring holds the program's
    // start too, and every snapshot repeated it.
    EXPECT_LT(on_disk * 5, viewed) << on_disk << " bytes on disk";
    if (ring == 0) {
      EXPECT_EQ(follow, streams.size() - 1);  // all but the first
    } else {
      EXPECT_GE(follow, streams.size() - 3);
      EXPECT_LT(follow, streams.size() - 1);  // the slow call's snapshot is whole
    }
    EXPECT_EQ(incremental->manifest().version, trace::kManifestVersionFollows);
    for (const uint32_t snapshot : {0u, 1u, 21u, 41u}) {
      SCOPED_TRACE("snapshot " + std::to_string(snapshot));
      const auto got = decode(dirs[0], snapshot);
      EXPECT_GT(got.size(), 10u);
      EXPECT_TRUE(got == decode(dirs[1], snapshot));
    }
  }
}

// JIT code (tests/programs/emulate/jit.c): machine code written into an
// anonymous buffer, called three times, overwritten with code of another
// layout and called twice. The emulator captures each version's bytes when
// they first run; the decode has no error, retires exactly what the
// emulator retired, and shows the five calls under one "[jit @ 0x...]"
// name, each version at its time: version 1 runs 1000 loop iterations
// (~2000 instructions, one tick each), version 2 ten (~40).
class DecodeEmulatedJit : public DecodeEmulated,
                          public ::testing::WithParamInterface<const char*> {};

TEST_P(DecodeEmulatedJit, BothVersionsDecodeExactlyAtTheirTimes) {
  DecodeReport rep;
  std::string text = Run({PTSNAP_EMU_JIT, GetParam()}, &rep);
  ASSERT_EQ(exit_code_, 0);
  const auto dir = tmp_.path() / ("t" + std::to_string(n_ - 1));
  EXPECT_EQ(rep.decode.errors, 0u) << text.substr(0, 2000);
  EXPECT_EQ(rep.decode.nomap_errors, 0u);
  // What the emulator retired, per stream (emulator-stats.txt).
  auto stats = base::ReadFile(dir / "emulator-stats.txt");
  ASSERT_TRUE(stats);
  uint64_t retired = 0;
  for (std::string_view line : base::Split(*stats, '\n')) {
    auto f = base::Split(line, ' ');
    if (f.size() == 5) retired += base::ParseUint(f[3]).value_or(0);
  }
  EXPECT_GT(retired, 6000u);
  EXPECT_EQ(rep.decode.instructions, retired);
  // Two versions at one address: a rewrite, so two address spaces.
  EXPECT_GE(rep.decode.jit_loads, 2u);
  EXPECT_GE(rep.decode.jit_rewrites, 1u);
  EXPECT_TRUE(std::filesystem::exists(dir / "jit"));
  std::vector<uint64_t> durations;
  std::string name;
  std::vector<uint64_t> begins;
  for (const auto& l : Parse(text)) {
    if (!l.name.starts_with("[jit @ 0x")) continue;
    if (name.empty()) name = l.name;
    EXPECT_EQ(l.name, name);
    if (l.ph == 'B') begins.push_back(l.ts);
    if (l.ph == 'E' && !begins.empty()) {
      durations.push_back(l.ts - begins.back());
      begins.pop_back();
    }
  }
  ASSERT_EQ(durations.size(), 5u) << text.substr(0, 3000);
  for (size_t i = 0; i < 3; ++i) EXPECT_GT(durations[i], 1900u) << i;
  for (size_t i = 3; i < 5; ++i) EXPECT_LT(durations[i], 100u) << i;
}

INSTANTIATE_TEST_SUITE_P(Modes, DecodeEmulatedJit, ::testing::Values("rwx", "wx"));

// Node.js (Debian's /usr/bin/node, V8) under the emulator: a hot loop
// calling a named function, compiled by V8's baseline and optimizing JITs.
// Without help from the runtime, every JIT block decodes from the bytes the
// emulator captured, named "[jit @ 0x...]"; with --perf-prof
// --perf-basic-prof (jitdump and perf map) the same code carries the JS
// function's name. No hot loop call is lost to an unmapped-code error in
// either. The program's last act is the loop (no console.log, which would
// load and parse modules after it), so the default 4 MiB snapshot holds it.
class DecodeEmulatedNode : public DecodeEmulated {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kNode)) GTEST_SKIP() << kNode << " is not installed (nodejs)";
    // --perf-prof writes jit-PID.dump into the working directory.
    old_cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(tmp_.path());
  }
  void TearDown() override {
    if (!old_cwd_.empty()) std::filesystem::current_path(old_cwd_);
    std::error_code ec;
    for (int32_t pid : pids_)
      std::filesystem::remove("/tmp/perf-" + std::to_string(pid) + ".map", ec);
  }
  std::string RunNode(std::vector<std::string> flags, DecodeReport& rep,
                      const std::string& suffix = ".events") {
    // --single-threaded: V8 compiles on the main thread, so when hotFunction
    // reaches baseline and optimized code depends on call counts, not on how
    // soon a background compiler thread gets a core (CI saw 992 of 2000 calls
    // in JIT code under load with concurrent compilation).
    std::vector<std::string> cmd = {kNode, "--single-threaded"};
    cmd.insert(cmd.end(), flags.begin(), flags.end());
    cmd.push_back("-e");
    cmd.push_back(
        "function hotFunction(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; }"
        " let t = 0; for (let k = 0; k < 2000; k++) t += hotFunction(500);"
        " process.exitCode = t === 2988000 ? 0 : 1;");
    record::RecordOptions o;  // a snapshot at exit
    std::string text = Run(cmd, o, &rep, suffix);
    auto reader = trace::TraceReader::Open(tmp_.path() / ("t" + std::to_string(n_ - 1)));
    if (reader) pids_ = reader->manifest().pids;
    return text;
  }
  static size_t Begins(const std::string& text, std::string_view prefix) {
    size_t n = 0;
    for (const auto& l : Parse(text)) n += l.ph == 'B' && l.name.starts_with(prefix);
    return n;
  }
  static constexpr const char* kNode = "/usr/bin/node";
  std::filesystem::path old_cwd_;
  std::vector<int32_t> pids_;
};

TEST_F(DecodeEmulatedNode, JitCodeDecodesWithoutTheRuntimesHelp) {
  DecodeReport rep;
  std::string text = RunNode({}, rep);
  ASSERT_EQ(exit_code_, 0);
  EXPECT_EQ(rep.decode.errors, 0u);
  EXPECT_EQ(rep.decode.nomap_errors, 0u);
  EXPECT_GT(rep.decode.jit_loads, 100u);
  const size_t jit = Begins(text, "[jit @ 0x");
  std::cout << jit << "\n";
  EXPECT_GT(jit, 1000u) << "the 2000 hotFunction calls, most in JIT code";
}

TEST_F(DecodeEmulatedNode, PerfProfNamesTheJsFunction) {
  DecodeReport rep;
  std::string text = RunNode({"--perf-prof", "--perf-basic-prof"}, rep);
  ASSERT_EQ(exit_code_, 0);
  EXPECT_EQ(rep.decode.errors, 0u);
  EXPECT_EQ(rep.decode.nomap_errors, 0u);
  // Baseline (^) and optimized (*) code of hotFunction, named from the
  // runtime's perf map and jitdump, both copied into jit/.
  const size_t named = Begins(text, "JS:*hotFunction") + Begins(text, "JS:^hotFunction");
  std::cout << named << "\n";
  EXPECT_GT(named, 1000u);
  ASSERT_FALSE(pids_.empty());
  const auto dir = tmp_.path() / ("t" + std::to_string(n_ - 1));
  EXPECT_TRUE(std::filesystem::exists(trace::JitdumpPath(dir, pids_[0])));
  bool in_summary = false;
  for (const auto& f : rep.top_self)
    in_summary = in_summary || f.name.find("hotFunction") != std::string::npos;
  EXPECT_TRUE(in_summary) << "the hottest JIT function is in the summary";
}

// node --perf-prof writes JIT_CODE_DEBUG_INFO for baseline and optimized
// code, each entry 0x40 past its code (V8's perf inject workaround, taken
// off by the jitdump parser): a JS function's slices carry the file and
// line its V8 name gives ("JS:^resolve node:path:1217:10": node:path, 1217).
TEST_F(DecodeEmulatedNode, V8DebugInfoGivesJsFunctionsTheirSourceLine) {
  DecodeReport rep;
  std::string text = RunNode({"--perf-prof"}, rep, ".json");
  ASSERT_EQ(exit_code_, 0);
  EXPECT_EQ(rep.decode.errors, 0u);
  nlohmann::json j = nlohmann::json::parse(text);  // throws (fails the test) if invalid
  size_t with_line = 0, matching = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (!name.starts_with("JS:^") && !name.starts_with("JS:*")) continue;
    if (!e.contains("args") || !e["args"].contains("line")) continue;
    ++with_line;
    // "JS:^name FILE:LINE:COLUMN"
    const size_t sp = name.rfind(' ');
    const size_t col = name.rfind(':');
    const size_t line =
        col == std::string::npos || col == 0 ? std::string::npos : name.rfind(':', col - 1);
    if (sp == std::string::npos || line == std::string::npos || line < sp) continue;
    const std::string file = name.substr(sp + 1, line - sp - 1);
    const std::string want = name.substr(line + 1, col - line - 1);
    if (e["args"].value("file", "") == file && std::to_string(e["args"].value("line", 0)) == want)
      ++matching;
  }
  std::cout << with_line << " JS slices with a line, " << matching << " as their name says\n";
  EXPECT_GT(with_line, 1000u) << "the 2000 hotFunction calls, most in JIT code";
  EXPECT_EQ(matching, with_line);
}

}  // namespace
}  // namespace ptsnap::pipeline
