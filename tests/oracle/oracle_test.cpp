// The call-stack oracle (docs/testing.md, "The call-stack oracle"): ptsnap's
// call stacks on optimized code (docs/decoding.md, "Call stacks on optimized
// code") against ptsnap-stepcount --all-calls, which single-steps the same
// static program natively and makes a frame per call instruction from the
// stack pointer alone (no symbols, no unwind tables, no PT). Each program of
// tests/programs/oracle is recorded in full under the emulator, with its
// symbols and stripped, and decoded to .events. From main's entry on (before
// it, glibc's start-up reads the auxiliary vector and CPUID, which differ
// between QEMU and this machine, so counts there differ), every frame ptsnap
// begins with a call must be a stepcount frame: the same begin, the same
// depth, and the call's chain (the frame and those that take its place by
// tail calls) ends where stepcount's frame ends. Nothing may be inferred.
// The stripped copy must name every function .eh_frame bounds and show the
// frames the copy with symbols shows (but for one known limitation, folded
// explicitly: see Structure).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/events.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/stepcount_run.h"
#include "tests/support/temp_dir.h"

namespace ptsnap {
namespace {

// As the timing test: with the CPU features QEMU lacks masked in both
// runs, glibc picks the same string and memory routines natively and under
// QEMU, so the calls into them retire the same instructions.
constexpr const char* kSameLibcRoutines =
    "glibc.cpu.hwcaps=-AVX2,-AVX,-AVX512F,-AVX512VL,-AVX512BW,-FSRM,-ERMS,-RTM";

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// One frame of ptsnap's .events, paired B with E.
struct Frame {
  std::string name;
  uint64_t begin = 0, end = 0;
  std::string begin_via, end_via;
  size_t depth = 0;   // open frames below it that are neither inlined nor pseudo
  bool real = false;  // neither inlined nor a pseudo frame
};

struct Events {
  std::vector<Frame> frames;  // in order of begin
  size_t inferred = 0;        // lines marked inferred
  size_t threads = 0;
  std::string text;
};

Events ReadEvents(const std::filesystem::path& path) {
  Events out;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  out.text = text.str();
  std::map<int32_t, std::vector<size_t>> open;
  for (const auto& e : testing::ParseEvents(out.text)) {
    if (e.inferred) ++out.inferred;
    if (e.kind == 'B') {
      std::vector<size_t>& stack = open[e.tid];
      Frame f{e.name, e.ts, 0, e.via, "", 0, e.via != "inline" && !e.dso.empty()};
      for (size_t i : stack) f.depth += out.frames[i].real ? 1 : 0;
      out.frames.push_back(f);
      stack.push_back(out.frames.size() - 1);
    } else if (e.kind == 'E') {
      std::vector<size_t>& stack = open[e.tid];
      EXPECT_FALSE(stack.empty()) << e.line;
      if (stack.empty()) continue;
      Frame& f = out.frames[stack.back()];
      EXPECT_EQ(f.begin, e.begin) << e.line;
      f.end = e.ts;
      f.end_via = e.via;
      stack.pop_back();
    }
  }
  out.threads = open.size();
  return out;
}

// Where the chain begun by frames[i] ends: follows the frames that take its
// place (a frame ending via=jump, the next beginning via=jump at its end
// and depth). Returns the index of the chain's last frame.
size_t ChainEnd(const std::vector<Frame>& frames, size_t i) {
  for (size_t j = i + 1; j < frames.size() && frames[i].end_via == "jump"; ++j) {
    if (frames[j].begin > frames[i].end) break;
    if (frames[j].begin == frames[i].end && frames[j].begin_via == "jump" &&
        frames[j].depth == frames[i].depth && frames[j].real) {
      i = j;
    }
  }
  return i;
}

// [start, end) of every FDE, from readelf (binutils, not ptsnap's reader).
std::vector<std::pair<uint64_t, uint64_t>> FdeRanges(const std::string& program) {
  testing::ShellRun r = testing::RunShellRaw("readelf --debug-dump=frames '" + program + "'");
  EXPECT_EQ(r.status, 0);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  static const std::regex kPc("pc=([0-9a-f]+)\\.\\.([0-9a-f]+)");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), kPc), end; it != end; ++it) {
    ranges.emplace_back(std::stoull((*it)[1], nullptr, 16), std::stoull((*it)[2], nullptr, 16));
  }
  return ranges;
}

uint64_t MainAddress(const std::string& program) {
  testing::ShellRun r =
      testing::RunShellRaw("nm '" + program + "' | awk '$3 == \"main\" {print $1}'");
  EXPECT_EQ(r.status, 0);
  return r.out.empty() ? 0 : std::stoull(r.out, nullptr, 16);
}

struct Recorded {
  Events events;
  std::vector<testing::SteppedFrame> stepped;
};

// Records `program` under the emulator, decodes it to .events, and
// single-steps it; checks ptsnap's call frames from main's entry on against
// stepcount's. `main_addr` is main's address (the stripped copy has no name).
// Both tools run a copy of `program` named `prog` in a temporary directory,
// so that either copy of a program has a path of the same length, and so
// the same start-up (its strlen and the like).
// One run of each: `program` under the emulator, decoded to .events, and
// single-stepped, both as a copy named `prog` in `tmp`.
Recorded RecordBoth(const std::string& program, const std::string& args,
                    const testing::TempDir& tmp) {
  ::setenv("GLIBC_TUNABLES", kSameLibcRoutines, 1);  // stepcount and ptsnap inherit it
  Recorded rec;
  const auto dir = tmp.path() / "t.ptsnap";
  const auto events_path = tmp.path() / "t.events";
  const std::string copy = (tmp.path() / "prog").string();
  std::filesystem::remove_all(dir);
  std::filesystem::copy_file(program, copy, std::filesystem::copy_options::overwrite_existing);
  auto run = testing::RunPtsnap("run --emulate --full-execution --trace-dir '" + dir.string() +
                                "' -o '" + events_path.string() + "' -- '" + copy + "' " + args);
  EXPECT_EQ(run.rc, 0) << run.out;
  EXPECT_THAT(run.out, ::testing::HasSubstr("Decode errors: 0 ")) << run.out;
  rec.events = ReadEvents(events_path);
  rec.stepped = testing::RunStepcountAllCalls(testing::RequiredEnv("STEPCOUNT_BIN"),
                                              "'" + copy + "' " + args);
  return rec;
}

// main's frame in both runs, the anchor of times and depths: its index in
// ptsnap's frames (frames.size() when none) and stepcount's (nullptr).
struct MainFrames {
  size_t frame = 0;
  const testing::SteppedFrame* step = nullptr;
};
MainFrames FindMain(const Recorded& rec, uint64_t main_addr) {
  const std::string main_suffix = "+" + Hex(main_addr);
  const auto& frames = rec.events.frames;
  MainFrames m{frames.size(), nullptr};
  for (size_t i = 0; i < frames.size() && m.frame == frames.size(); ++i) {
    const std::string& n = frames[i].name;
    if (frames[i].begin_via == "call" &&
        (n == "main" ||
         (n.size() > main_suffix.size() &&
          n.compare(n.size() - main_suffix.size(), main_suffix.size(), main_suffix) == 0))) {
      m.frame = i;
    }
  }
  for (const auto& s : rec.stepped) {
    if (s.target == main_addr && m.step == nullptr) m.step = &s;
  }
  return m;
}

// main's instructions in each run: ptsnap's main frame (to the end of its
// chain) and stepcount's; nullopt where either has none, or main did not
// return.
std::optional<std::pair<uint64_t, uint64_t>> MainLengths(const Recorded& rec, uint64_t main_addr) {
  const MainFrames m = FindMain(rec, main_addr);
  const auto& frames = rec.events.frames;
  if (m.frame == frames.size() || m.step == nullptr || m.step->open) return std::nullopt;
  return std::make_pair(frames[ChainEnd(frames, m.frame)].end - frames[m.frame].begin,
                        m.step->duration);
}

// ptsnap's call frames from main's entry on against stepcount's: what
// disagrees, one line each, and how many frames ptsnap began with a call and
// stepcount has. Empty `disagree` with `calls` == `stepped`: the same.
struct Comparison {
  std::vector<std::string> disagree;
  size_t calls = 0, stepped = 0;
  bool has_main = false;
};
Comparison Compare(const Recorded& rec, uint64_t main_addr) {
  Comparison out;
  const Events& ev = rec.events;
  const auto [main_frame, main_step] = FindMain(rec, main_addr);
  if (main_frame == ev.frames.size() || main_step == nullptr) return out;
  out.has_main = true;
  const Frame& m = ev.frames[main_frame];
  // Virtual time and instruction counts differ by a constant from main on.
  const auto ts_of = [&](uint64_t count) { return count - main_step->begin + m.begin; };
  const auto depth_of = [&](uint64_t depth) { return depth - main_step->depth + m.depth; };

  std::map<uint64_t, const testing::SteppedFrame*> by_begin;
  for (const auto& s : rec.stepped) {
    if (s.thread == 0 && s.begin >= main_step->begin) by_begin[ts_of(s.begin)] = &s;
  }
  for (size_t i = 0; i < ev.frames.size(); ++i) {
    const Frame& f = ev.frames[i];
    if (f.begin_via != "call" || f.begin < m.begin) continue;
    ++out.calls;
    const Frame& last = ev.frames[ChainEnd(ev.frames, i)];
    auto it = by_begin.find(f.begin);
    if (it == by_begin.end()) {
      out.disagree.push_back(f.name + " at " + std::to_string(f.begin) + ": no stepcount frame");
      continue;
    }
    const testing::SteppedFrame& s = *it->second;
    std::string what;
    if (depth_of(s.depth) != f.depth) {
      what += " depth " + std::to_string(f.depth) + " vs " + std::to_string(depth_of(s.depth));
    }
    if (s.open != (last.end_via == "close")) {
      what += std::string(" ") + (s.open ? "open in stepcount" : "ends in stepcount") +
              ", chain ends via=" + last.end_via;
    } else if (!s.open && ts_of(s.begin + s.duration) != last.end) {
      what += " chain ends at " + std::to_string(last.end) + " (" + last.name +
              " via=" + last.end_via + ") vs " + std::to_string(ts_of(s.begin + s.duration));
    }
    if (!what.empty()) {
      out.disagree.push_back(f.name + " at " + std::to_string(f.begin) + " (call at " +
                             Hex(s.site) + " to " + Hex(s.target) + "):" + what);
    }
  }
  out.stepped = by_begin.size();
  return out;
}

// ptsnap's frames as text without the pids and tids (which differ run to
// run): name, begin, end, vias and depth of each, in order.
std::string FramesText(const Events& ev) {
  std::string out;
  for (const Frame& f : ev.frames) {
    out += f.name + " " + std::to_string(f.begin) + " " + f.begin_via + " " +
           std::to_string(f.end) + " " + f.end_via + " " + std::to_string(f.depth) + "\n";
  }
  return out;
}

// Copies `tmp` to $TMPDIR/ptsnap-oracle-NAME-PID for a look; returns the path.
std::filesystem::path Keep(const testing::TempDir& tmp, const std::string& name) {
  const auto kept = std::filesystem::temp_directory_path() /
                    ("ptsnap-oracle-" + name + "-" + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::copy(
      tmp.path(), kept,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing,
      ec);
  return kept;
}

Recorded CheckAgainstStepcount(const std::string& program, const std::string& args,
                               uint64_t main_addr) {
  // The two are separate executions. Twice in CI, under load, the
  // emulated run retired 2 or 3 instructions more in libgcc's unwinder than
  // the native one, in both copies of exception (with symbols and
  // stripped) in one test process, and every frame after that was off by
  // as much (not reproduced outside CI: docs/testing.md, "The call-stack
  // oracle"). Where
  // main's instruction counts differ, the runs are not the same execution:
  // both are made again (at most twice), the first pair kept for a look
  // (its path is printed). A ptsnap that mistimes main fails every time.
  testing::TempDir tmp;
  Recorded rec = RecordBoth(program, args, tmp);
  for (int again = 0; again < 2; ++again) {
    const auto lengths = MainLengths(rec, main_addr);
    if (!lengths || lengths->first == lengths->second) break;
    const auto kept = Keep(tmp, "apart-" + std::to_string(again));
    std::printf(
        "main retired %llu instructions under ptsnap, %llu single-stepped: not the same "
        "execution; recording both again (this pair kept in %s)\n",
        static_cast<unsigned long long>(lengths->first),
        static_cast<unsigned long long>(lengths->second), kept.c_str());
    rec = RecordBoth(program, args, tmp);
  }
  Comparison c = Compare(rec, main_addr);
  if (!c.disagree.empty()) {
    // Seen in CI, in the exception case (3 of 490 frames, main's counts
    // equal): ptsnap's error, a PSB+ whose FUP is a callee reached by a
    // direct call, its TSC applied before the decoders walked the call (fixed
    // in the plugin: docs/testing.md, "The call-stack oracle"). ptsnap's
    // output is the same every run in one environment, so recording both
    // again fails again where ptsnap is wrong; it passes only where ptsnap
    // writes the same frames and the second pair agrees. The first pair is
    // kept.
    const auto kept = Keep(tmp, "disagree");
    const std::string first_frames = FramesText(rec.events);
    const std::string first = c.disagree.front();
    const size_t first_count = c.disagree.size();
    rec = RecordBoth(program, args, tmp);
    c = Compare(rec, main_addr);
    EXPECT_EQ(FramesText(rec.events), first_frames)
        << "ptsnap wrote other frames the second time (both kept in " << kept << ")";
    std::printf(
        "%zu frames disagreed (the first: %s); recorded both again: %s (the first pair kept in "
        "%s)\n",
        first_count, first.c_str(),
        c.disagree.empty() ? "the second pair agrees" : "they disagree again", kept.c_str());
  }
  const Events& ev = rec.events;
  EXPECT_EQ(ev.threads, 1u);
  EXPECT_EQ(ev.inferred, 0u) << "ptsnap inferred frames:\n" << ev.text;
  EXPECT_TRUE(c.has_main) << "no frame of main in ptsnap's output, or no call of main at "
                          << Hex(main_addr) << " in stepcount's";
  EXPECT_EQ(c.calls, c.stepped) << "ptsnap's calls from main on vs stepcount's frames";
  EXPECT_GT(c.calls, 0u);
  std::string list;
  for (size_t i = 0; i < c.disagree.size() && i < 20; ++i) list += c.disagree[i] + "\n";
  if (!c.disagree.empty())
    list += "(this pair kept in " + Keep(tmp, "disagree-again").string() + ")\n";
  EXPECT_TRUE(c.disagree.empty()) << c.disagree.size() << " of " << c.calls << " frames disagree:\n"
                                  << list;
  return rec;
}

// Entry addresses of the `.cold` parts GCC split off (nm of the copy with
// symbols).
std::set<uint64_t> ColdParts(const std::string& program) {
  testing::ShellRun r =
      testing::RunShellRaw("nm '" + program + "' | awk '$3 ~ /\\.cold(\\.[0-9]+)?$/ {print $1}'");
  EXPECT_EQ(r.status, 0);
  std::set<uint64_t> parts;
  std::istringstream in(r.out);
  std::string addr;
  while (in >> addr) parts.insert(std::stoull(addr, nullptr, 16));
  return parts;
}

// Whether the frame `next`, begun by a jump at the end of the chain that
// `first` began, is to be shown as part of that chain's frame.
using FoldRule = std::function<bool(const Frame& first, const Frame& next)>;

// Every frame without its name: begin and end, vias and depth, in order.
// Inlined frames are left out: they come from DWARF, which strip removes.
// A frame `fold` accepts joins the chain's frame (its end becomes theirs);
// `folds` counts them. `names` gets each line's frame's name.
std::vector<std::string> Structure(const Recorded& rec, const FoldRule& fold, size_t* folds,
                                   std::vector<std::string>* names) {
  std::vector<std::string> out;
  std::vector<Frame> frames = rec.events.frames;
  std::map<std::pair<size_t, uint64_t>, size_t> ended_by_jump;  // (depth, end) -> chain's frame
  std::vector<bool> folded(frames.size(), false);
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    size_t owner = i;
    if (f.begin_via == "jump") {
      auto it = ended_by_jump.find({f.depth, f.begin});
      if (it != ended_by_jump.end() && fold(rec.events.frames[it->second], f)) {
        owner = it->second;
        frames[owner].end = f.end;
        frames[owner].end_via = f.end_via;
        folded[i] = true;
        ++*folds;
      }
    }
    if (frames[owner].end_via == "jump") ended_by_jump[{f.depth, f.end}] = owner;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    if (folded[i] || f.begin_via == "inline") continue;
    names->push_back(f.name);
    out.push_back(std::to_string(f.begin) + " " + f.begin_via + " .. " + std::to_string(f.end) +
                  " " + f.end_via + " depth " + std::to_string(f.depth) +
                  (f.real ? "" : " " + f.name));
  }
  return out;
}

// A program of tests/programs/oracle and its arguments (shell words), with
// what GCC must have made of it for the case to test what it is for: the
// `.cold` parts nm must list, and per function (a symbol) a pattern its
// objdump -d listing must hold.
struct Case {
  std::string program, args;
  std::vector<std::string> cold_parts;
  std::vector<std::pair<std::string, std::string>> code;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.program << (c.args.empty() ? "" : " ") << c.args;
}

// The lines objdump -d lists for `function` in `listing`.
std::string Listing(const std::string& listing, const std::string& function) {
  const size_t at = listing.find(" <" + function + ">:\n");
  if (at == std::string::npos) return "";
  const size_t end = listing.find("\n\n", at);
  return listing.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

class Oracle : public ::testing::TestWithParam<Case> {};

TEST_P(Oracle, CallStacksAreTheSingleStepperStacksWithAndWithoutSymbols) {
  const std::string dir = testing::RequiredEnv("ORACLE_PROGRAMS_DIR");
  const std::string program = dir + "/oracle_" + GetParam().program;
  const std::string& args = GetParam().args;
  const uint64_t main_addr = MainAddress(program);
  ASSERT_NE(main_addr, 0u);
  {
    SCOPED_TRACE("what GCC made of " + program);
    const testing::ShellRun symbols = testing::RunShellRaw("nm '" + program + "'");
    for (const std::string& part : GetParam().cold_parts) {
      EXPECT_THAT(symbols.out, ::testing::HasSubstr(" " + part + "\n"));
    }
    const testing::ShellRun listing =
        testing::RunShellRaw("objdump -d --no-show-raw-insn '" + program + "'");
    for (const auto& [function, pattern] : GetParam().code) {
      EXPECT_TRUE(std::regex_search(Listing(listing.out, function), std::regex(pattern)))
          << function << " has no " << pattern;
    }
  }
  Recorded plain;
  {
    SCOPED_TRACE("with symbols");
    plain = CheckAgainstStepcount(program, args, main_addr);
    // A jump into a split part keeps its function's frame: no part has one.
    for (const Frame& f : plain.events.frames) {
      EXPECT_EQ(f.name.find(".cold"), std::string::npos)
          << f.name << " has a frame of its own (at " << f.begin << ", via=" << f.begin_via << ")";
    }
  }
  SCOPED_TRACE("stripped");
  const std::string stripped = program + ".stripped";
  const Recorded bare = CheckAgainstStepcount(stripped, args, main_addr);
  // Where .eh_frame bounds the code, the function has a name.
  // (FILE+0xVADDR: the stripped file is not PIE, so its vaddrs are the FDEs'.)
  static const std::regex kUnknown("\\[unknown @ .*\\+0x([0-9a-f]+)\\]$");
  const auto fdes = FdeRanges(stripped);
  ASSERT_FALSE(fdes.empty());
  for (const Frame& f : bare.events.frames) {
    std::smatch m;
    if (!std::regex_search(f.name, m, kUnknown)) continue;
    const uint64_t addr = std::stoull(m[1], nullptr, 16);
    for (const auto& [lo, hi] : fdes) {
      EXPECT_FALSE(addr >= lo && addr < hi) << f.name << " at " << f.begin << " lies in the FDE ["
                                            << Hex(lo) << ", " << Hex(hi) << ")";
    }
  }
  // Names aside, the same frames: the first difference, with the names.
  // Two differences are known and folded, each only where it applies:
  // - Stripped, a `.cold` part that its function enters before pushing
  //   anything has a function entry's unwind rule at its first byte, so the
  //   jump into it shows as a tail call into `FILE+0xPART` (docs/decoding.md,
  //   "Call stacks on optimized code"), and the jump back into the middle of
  //   its function as a tail call back: such frames join the one they
  //   replaced.
  // - Code no FDE bounds (crtstuff's frame_dummy and register_tm_clones, PLT
  //   stubs) is one `[unknown @ ...]` frame across jumps to more such code
  //   of the file, where the copy with symbols shows tail calls: those join
  //   the chain's frame while the unknown frame of the same begin lasts.
  const std::set<uint64_t> cold_parts = ColdParts(program);
  static const std::regex kAddressName(".*\\+0x([0-9a-f]+)$");
  std::map<std::pair<size_t, uint64_t>, uint64_t> unknown_ends;  // (depth, begin) -> end
  for (const Frame& f : bare.events.frames) {
    if (f.name.rfind("[unknown @ ", 0) == 0) unknown_ends[{f.depth, f.begin}] = f.end;
  }
  size_t unknown_folds = 0, cold_folds = 0;
  std::vector<std::string> want_names, got_names;
  const auto want = Structure(
      plain,
      [&](const Frame& first, const Frame& next) {
        auto it = unknown_ends.find({first.depth, first.begin});
        return it != unknown_ends.end() && next.begin < it->second;
      },
      &unknown_folds, &want_names);
  const auto got = Structure(
      bare,
      [&](const Frame& first, const Frame& next) {
        // The part's jump back into its function's middle is a tail call
        // back into that function (a jump into another function's middle):
        // it joins the chain too.
        if (next.name == first.name) return true;
        std::smatch m;
        return std::regex_match(next.name, m, kAddressName) &&
               cold_parts.count(std::stoull(m[1], nullptr, 16)) != 0;
      },
      &cold_folds, &got_names);
  RecordProperty("unknown_folds", std::to_string(unknown_folds));
  RecordProperty("cold_folds", std::to_string(cold_folds));
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  if (i < want.size() || i < got.size()) {
    std::string context;
    for (size_t j = i; j < i + 4; ++j) {
      if (j < want.size()) context += "  with symbols: " + want[j] + " " + want_names[j] + "\n";
      if (j < got.size()) context += "  stripped:     " + got[j] + " " + got_names[j] + "\n";
    }
    ADD_FAILURE() << "the stripped copy's frames differ from the one with symbols from frame " << i
                  << " (of " << want.size() << " with symbols, " << got.size() << " stripped):\n"
                  << context;
  }
}

const Case kCases[] = {
    {"cold_split", "", {"scale.cold", "mix.cold"}, {{"scale", "j[a-z]+ +[0-9a-f]+ <scale.cold>"}}},
    {"jump_table",
     "",
     {"dispatch.cold"},
     {{"dispatch", "jmp +\\*%"}, {"dispatch", "jmp +[0-9a-f]+ <op_sub>"}}},
    {"tail_calls",
     "",
     {"relay.cold"},
     {{"first", "jmp +[0-9a-f]+ <second>"},
      {"through_table", "jmp +\\*"},
      {"relay.cold", "jmp +[0-9a-f]+ <third>"}}},
    {"noreturn", "", {"check.cold", "step.cold"}, {{"step.cold", "call +[0-9a-f]+ <finish>"}}},
    {"noreturn", "abort", {"check.cold"}, {{"check.cold", "call +[0-9a-f]+ <fail>"}}},
    {"longjmp", "", {"descend.cold"}, {{"descend.cold", "call +[0-9a-f]+ <raise_error>"}}},
    {"cold_recursion", "", {"walk.cold"}, {{"walk.cold", "call +[0-9a-f]+ <walk>"}}},
    {"exception",
     "",
     {"_Z7throwerl.cold", "_Z6middlel.cold", "_Z7catcherl.cold"},
     {{"_Z7throwerl.cold", "call +[0-9a-f]+ <__cxa_throw>"},
      {"_Z6middlel.cold", "call +[0-9a-f]+ <_Unwind_Resume>"}}},
    {"libc_mix",
     "",
     {},
     {{"__vfprintf_internal", "jmp +\\*%"}, {"msort_with_tmp.part.0", "call +\\*"}}},
};

INSTANTIATE_TEST_SUITE_P(Programs, Oracle, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return c.program + (c.args.empty() ? "" : "_" + c.args);
});

}  // namespace
}  // namespace ptsnap
