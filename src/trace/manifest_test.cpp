#include "trace/manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "tests/support/result_matchers.h"

namespace ptsnap::trace {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;
using ::testing::Not;

Manifest FullManifest() {
  Manifest m;
  m.source = Source::kEmulated;
  m.state = State::kInterrupted;
  m.ptsnap_version = "0.1.0";
  m.created_unix_ns = 1764450000123456789ull;
  m.command = {"/bin/ls", "-l", "dir with space"};
  m.pids = {1234, 1235};
  m.kernel_release = "6.1.0-13-amd64";
  m.kernel_start = 0xffffffff81000000ull;
  m.cpu = {.vendor = "GenuineIntel",
           .family = 6,
           .model = 0x8c,
           .stepping = 1,
           .cpuid_15_eax = 2,
           .cpuid_15_ebx = 188};
  m.pt = {.pmu_type = 9,
          .config = 0xffffffffffffffffull,
          .mtc_freq = 3,
          .nom_freq = 24,
          .psb_period = 0,
          .tsc = true,
          .mtc = true,
          .cyc = false,
          .noretcomp = true,
          .filter = "filter main @ /bin/ls",
          .addr0_a = 0x401000,
          .addr0_b = 0x402000};
  m.scope = Scope::kUserKernel;
  m.mode = Mode::kFull;
  m.snapshot_size = 4 << 20;
  m.time_conv = {.time_zero = 0xfffa0b1c2d3e4f50ull,
                 .time_mult = 699050667,
                 .time_shift = 31,
                 .cap_user_time_zero = true};
  m.sideband = "sideband.data";
  m.snapshots = {
      {.seq = 1, .reason = SnapshotReason::kTrigger, .detail = "main", .time = 123, .tid = 1234},
      {.seq = 2, .reason = SnapshotReason::kExit, .detail = "", .time = 456, .tid = 0},
      {.seq = 3,
       .reason = SnapshotReason::kSlowCall,
       .detail = "handle_request took 5.123 ms (from +1.000 ms, thread 1234)",
       .time = 6'123'000,
       .tid = 1234,
       .call_begin = 1'000'000,
       .call_ns = 5'123'000}};
  m.streams = {{.id = 0,
                .file = "pt/0.pt",
                .pid = 1234,
                .tid = 1235,
                .cpu = -1,
                .snapshot = 1,
                .size = 4096,
                .wrapped = true,
                .lost_bytes = 0},
               {.id = 1, .file = "pt/1.pt", .cpu = 3, .size = 0, .lost_bytes = 77, .truncated = 2}};
  m.lost_records = 5;
  m.aux_truncated = 2;
  m.kcore = {.status = KcoreStatus::kCopied, .reason = "", .dir = "kcore"};
  m.binaries = {{.path = "/bin/ls", .build_id = "abcdef", .copy = "binaries/abcdef/ls"}};
  m.emulator = "qemu-x86_64 7.2 + ptsnap plugin";
  m.virtual_clock = VirtualClock::kInstructionsAndWaits;
  m.journal_seq = 12;
  return m;
}

TEST(ManifestTest, RoundTripsEveryField) {
  Manifest m = FullManifest();
  std::string text = SerializeManifest(m);
  auto parsed = ParseManifest(text);
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(*parsed, m);

  Manifest defaults;
  auto parsed_defaults = ParseManifest(SerializeManifest(defaults));
  ASSERT_THAT(parsed_defaults, HasValue());
  EXPECT_EQ(*parsed_defaults, defaults);
}

// SerializeManifest writes the lists element by element (no tree of the
// whole manifest): the text is byte for byte what dumping one tree with
// indent 2 gives, with several snapshots and streams and with none.
TEST(ManifestTest, TheTextIsTheWholeTreesDump) {
  Manifest m = FullManifest();
  for (uint32_t i = 0; i < 3; ++i) {
    Stream s = m.streams.at(0);
    s.id = 100 + i;
    s.file = "pt/" + std::to_string(s.id) + ".pt";
    m.streams.push_back(s);
    m.snapshots.push_back(m.snapshots.at(0));
    m.snapshots.back().seq = 100 + i;
  }
  ASSERT_GE(m.streams.size(), 4u);
  for (const Manifest& one : {m, Manifest{}}) {
    const std::string text = SerializeManifest(one);
    EXPECT_EQ(text, nlohmann::ordered_json::parse(text).dump(2) + "\n");
  }
}

TEST(ManifestTest, RoundTripsASampledRecording) {
  Manifest m = FullManifest();
  m.source = Source::kSampled;
  m.virtual_clock = VirtualClock::kInstructions;  // an emulated trace's only
  m.streams[1].kind = StreamKind::kSamples;
  m.streams[1].file = "samples/1.data";
  m.sampling = Sampling{.event = "cpu-clock",
                        .type = 1,
                        .config = 0,
                        .sample_type = 0x100a7,
                        .frequency = 10000,
                        .period = 0,
                        .callgraph = "dwarf",
                        .regs_user = 0xff0fff,
                        .stack_user = 8192,
                        .max_stack = 0};
  auto parsed = ParseManifest(SerializeManifest(m));
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(*parsed, m);
  EXPECT_THAT(SerializeManifest(m), HasSubstr("\"kind\": \"samples\""));

  m.sampling.reset();
  EXPECT_THAT(ParseManifest(SerializeManifest(m)),
              HasErrorContaining("field 'sampling': missing (source is \"sampled\")"));
}

TEST(ManifestTest, WritesTheDocumentedShape) {
  std::string text = SerializeManifest(FullManifest());
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["format"], "ptsnap-trace");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["source"], "emulated");
  EXPECT_EQ(j["state"], "interrupted");
  EXPECT_EQ(j["scope"], "user+kernel");
  EXPECT_EQ(j["mode"], "full");
  // 64-bit values that may exceed 2^53 are hex strings.
  EXPECT_EQ(j["pt"]["config"], "0xffffffffffffffff");
  EXPECT_EQ(j["kernel"]["start"], "0xffffffff81000000");
  EXPECT_EQ(j["pt"]["addr0_a"], "0x401000");
  EXPECT_EQ(j["time_conv"]["time_zero"], "0xfffa0b1c2d3e4f50");
  EXPECT_EQ(j["streams"][0]["file"], "pt/0.pt");
  EXPECT_EQ(j["streams"][1]["cpu"], 3);
  EXPECT_EQ(j["kcore"]["status"], "copied");

  Manifest no_start;
  auto j2 = nlohmann::json::parse(SerializeManifest(no_start));
  EXPECT_TRUE(j2["kernel"]["start"].is_null());
}

// The serialized full manifest with one edit applied.
std::string Edited(const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(SerializeManifest(FullManifest()));
  edit(j);
  return j.dump();
}

TEST(ManifestTest, AcceptsPlainNumbersForHexFieldsAndIgnoresUnknownFields) {
  auto parsed = ParseManifest(Edited([](auto& j) {
    j["pt"]["config"] = 4096;
    j["future_field"] = {{"anything", true}};
  }));
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(parsed->pt.config, 4096u);
}

// `virtual_clock` (#41): an emulated trace says how its clock ran; one
// written before the field existed reads as "instructions", the clock it
// had; no other source has one.
TEST(ManifestTest, TheVirtualClockIsAnEmulatedTracesAndDefaultsToInstructions) {
  EXPECT_EQ(nlohmann::json::parse(SerializeManifest(FullManifest()))["virtual_clock"],
            "instructions+waits");
  auto old = ParseManifest(Edited([](auto& j) { j.erase("virtual_clock"); }));
  ASSERT_THAT(old, HasValue());
  EXPECT_EQ(old->virtual_clock, VirtualClock::kInstructions);
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j["virtual_clock"] = "sundial"; })),
              HasErrorContaining("field 'virtual_clock': unknown value \"sundial\" (expected "
                                 "\"instructions\", \"instructions+waits\")"));
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j["source"] = "hardware"; })),
              HasErrorContaining("field 'virtual_clock': only an emulated trace"));
  Manifest hardware;
  EXPECT_THAT(SerializeManifest(hardware), Not(HasSubstr("virtual_clock")));
}

TEST(ManifestTest, RejectsUnknownVersions) {
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j["version"] = 3; })),
              HasErrorContaining("unsupported version 3 (this ptsnap reads 1 and 2)"));
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j["version"] = -1; })),
              HasErrorContaining("unsupported version -1"));
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j["version"] = "1"; })),
              HasErrorContaining("field 'version': expected an integer"));
  EXPECT_THAT(ParseManifest(Edited([](auto& j) { j.erase("version"); })),
              HasErrorContaining("field 'version': missing"));
}

TEST(ManifestTest, RejectsWrongTypesNamingTheField) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string error;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j["streams"][1]["size"] = "big"; },
       "field 'streams[1].size': expected a hex string"},
      {[](auto& j) { j["streams"][0]["size"] = -5; }, "field 'streams[0].size': must not be"},
      {[](auto& j) { j["streams"][0]["tid"] = 1ll << 40; }, "field 'streams[0].tid': value"},
      {[](auto& j) { j["streams"][0].erase("file"); }, "field 'streams[0].file': missing"},
      {[](auto& j) { j["streams"][0]["file"] = "../../etc/shadow"; },
       "field 'streams[0].file': must be a path inside the trace directory"},
      {[](auto& j) { j["streams"][0]["file"] = "/etc/shadow"; }, "field 'streams[0].file'"},
      {[](auto& j) { j["streams"] = nlohmann::json::object(); },
       "field 'streams': expected an array"},
      {[](auto& j) { j.erase("streams"); }, "field 'streams': missing"},
      {[](auto& j) { j["pt"]["config"] = "0xzz"; }, "field 'pt.config': expected a hex string"},
      {[](auto& j) { j["pt"]["tsc"] = 1; }, "field 'pt.tsc': expected true or false"},
      {[](auto& j) { j["pt"] = 3; }, "field 'pt': expected an object"},
      {[](auto& j) { j["cpu"]["family"] = 1.5; }, "field 'cpu.family': expected an unsigned"},
      {[](auto& j) { j["cpu"]["model"] = 1ll << 33; }, "field 'cpu.model': value 8589934592"},
      {[](auto& j) { j["source"] = "laser"; },
       "field 'source': unknown value \"laser\" (expected \"hardware\", \"emulated\", "
       "\"sampled\")"},
      {[](auto& j) { j["state"] = 1; }, "field 'state': expected a string"},
      {[](auto& j) { j["snapshots"][0]["reason"] = "boredom"; },
       "field 'snapshots[0].reason': unknown value \"boredom\" (expected \"exit\", \"trigger\""},
      {[](auto& j) { j["kcore"]["status"] = "stolen"; },
       "field 'kcore.status': unknown value \"stolen\" (expected \"not-needed\", \"copied\", "
       "\"disabled\", \"unavailable\")"},
      {[](auto& j) { j["command"][1] = 5; }, "field 'command[1]': expected a string"},
      {[](auto& j) { j["pids"][0] = "x"; }, "field 'pids[0]': expected an integer"},
      {[](auto& j) { j["snapshots"][0] = "x"; }, "field 'snapshots[0]': expected an object"},
      {[](auto& j) { j["time_conv"]["time_shift"] = 64; },
       "field 'time_conv.time_shift': value 64 is out of range"},
      {[](auto& j) { j["kernel"]["start"] = true; }, "field 'kernel.start'"},
      {[](auto& j) { j["binaries"][0]["copy"] = "a/../../x"; }, "field 'binaries[0].copy'"},
      {[](auto& j) { j["format"] = "perf"; }, "not a ptsnap trace manifest"},
      {[](auto& j) { j["streams"][1]["id"] = j["streams"][0]["id"]; },
       "field 'streams[1].id': duplicate stream id 0 (streams[0] has it)"},
      {[](auto& j) { j["streams"][1]["file"] = j["streams"][0]["file"]; },
       "field 'streams[1].file': file pt/0.pt is listed twice (streams[0] has it)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    EXPECT_THAT(ParseManifest(Edited(c.edit)), HasErrorContaining(c.error));
  }
}

// A snapshot of a ring stored as what it gained since the ring's previous
// snapshot (`follows`, `ring_bytes`): written only when set (version 2),
// read back, and checked: the stream it follows must be listed before it
// and be of the same ring, and the ring holds at least the file's bytes.
TEST(ManifestTest, AStreamFollowingAnEarlierOneRoundTripsAndIsChecked) {
  Manifest m = FullManifest();
  m.version = kManifestVersionFollows;
  m.streams.push_back({.id = 2,
                       .file = "pt/2.pt",
                       .pid = 1234,
                       .tid = 1235,
                       .cpu = -1,
                       .snapshot = 2,
                       .size = 100,
                       .follows = 0,
                       .ring_bytes = 4000});
  const std::string text = SerializeManifest(m);
  auto parsed = ParseManifest(text);
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(*parsed, m);
  EXPECT_EQ(ViewedBytes(parsed->streams[2]), 4000u);
  EXPECT_EQ(ViewedBytes(parsed->streams[0]), 4096u);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["streams"][2]["follows"], 0);
  EXPECT_EQ(j["streams"][2]["ring_bytes"], 4000);
  EXPECT_FALSE(j["streams"][0].contains("follows"));
  EXPECT_FALSE(j["streams"][0].contains("ring_bytes"));

  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string error;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j["streams"][2]["follows"] = 9; },
       "field 'streams[2].follows': no stream 9 is listed before it"},
      {[](auto& j) { j["streams"][2]["follows"] = 2; },
       "field 'streams[2].follows': no stream 2 is listed before it"},
      {[](auto& j) {
         j["streams"][0]["follows"] = 2;
         j["streams"][0]["ring_bytes"] = 5000;
       },
       "field 'streams[0].follows': no stream 2 is listed before it"},
      {[](auto& j) { j["streams"][2]["follows"] = 1; },
       "field 'streams[2].follows': stream 1 is of another ring"},
      {[](auto& j) { j["streams"][2]["tid"] = 7; },
       "field 'streams[2].follows': stream 0 is of another ring"},
      {[](auto& j) { j["streams"][2].erase("ring_bytes"); },
       "field 'streams[2].ring_bytes': missing"},
      {[](auto& j) { j["streams"][2]["ring_bytes"] = 99; },
       "field 'streams[2].ring_bytes': value 99 is less than the stream's size 100"},
      {[](auto& j) { j["streams"][2]["follows"] = "zero"; },
       "field 'streams[2].follows': expected a hex string"},
      {[](auto& j) { j["streams"][0]["ring_bytes"] = 5000; },
       "field 'streams[0].ring_bytes': only a stream that follows another has it"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    auto edited = nlohmann::json::parse(text);
    c.edit(edited);
    EXPECT_THAT(ParseManifest(edited.dump()), HasErrorContaining(c.error));
  }

  // A journal line's streams are checked against everything listed before.
  Manifest base = FullManifest();
  ManifestChange line{.seq = 13};
  line.streams = {m.streams[2]};
  ASSERT_THAT(ApplyJournal(base, SerializeManifestChange(line)), HasValue());
  EXPECT_EQ(base.streams.back(), m.streams[2]);
  base = FullManifest();
  line.streams[0].follows = 7;
  EXPECT_THAT(ApplyJournal(base, SerializeManifestChange(line)),
              HasErrorContaining("line 1: field 'streams[0].follows': no stream 7 is listed"));
}

TEST(ManifestTest, RejectsTextThatIsNotAManifest) {
  EXPECT_THAT(ParseManifest(""), HasErrorContaining("not valid JSON"));
  EXPECT_THAT(ParseManifest("{\"format\": "), HasErrorContaining("not valid JSON"));
  EXPECT_THAT(ParseManifest("[1, 2]"), HasErrorContaining("not a JSON object"));
  EXPECT_THAT(ParseManifest("{}"), HasErrorContaining("field 'format': missing"));
  EXPECT_THAT(ParseManifest(std::string("\xff\xfe{", 3)), HasErrorContaining("not valid JSON"));
}

TEST(ManifestTest, NonUtf8StringsAreWrittenWithoutThrowing) {
  Manifest m;
  m.command = {std::string("/tmp/\xff\xfe", 7)};
  std::string text = SerializeManifest(m);
  auto parsed = ParseManifest(text);
  ASSERT_THAT(parsed, HasValue());
  ASSERT_EQ(parsed->command.size(), 1u);
  EXPECT_THAT(parsed->command[0], HasSubstr("/tmp/"));
}

// The formula from perf_event_mmap_page, in 64-bit arithmetic.
uint64_t DocFormula(const TimeConv& tc, uint64_t tsc) {
  uint64_t quot = tsc >> tc.time_shift;
  uint64_t rem = tsc & ((uint64_t{1} << tc.time_shift) - 1);
  return tc.time_zero + quot * tc.time_mult + ((rem * tc.time_mult) >> tc.time_shift);
}

TEST(JournalTest, ReplaysWhatChangedAfterTheManifest) {
  Manifest m = FullManifest();  // journal_seq 12
  Manifest want = m;
  ManifestChange old{.seq = 12};
  old.streams = {m.streams[0]};  // in the manifest already: skipped, not a duplicate
  ManifestChange next{.seq = 13};
  next.snapshots = {{.seq = 2, .reason = SnapshotReason::kSignal, .detail = "SIGUSR2"}};
  next.streams = {{.id = 7, .file = "pt/7.pt", .tid = 9, .snapshot = 2, .size = 10}};
  next.sizes = {{.id = 1, .size = 500, .lost_bytes = 80, .truncated = 3}};
  Manifest edited = m;
  edited.lost_records = 9;
  edited.state = State::kComplete;
  for (const auto& field : SerializeManifestFields(edited)) {
    if (field.first == "lost_records" || field.first == "state") next.set.push_back(field);
  }
  ManifestChange last{.seq = 14};
  last.set = {{"emulator", "null"}};
  const std::string text =
      SerializeManifestChange(old) + SerializeManifestChange(next) + SerializeManifestChange(last);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);

  ASSERT_THAT(ApplyJournal(m, text), HasValue());
  want.snapshots.push_back(next.snapshots[0]);
  want.streams.push_back(next.streams[0]);
  want.streams[1].size = 500;
  want.streams[1].lost_bytes = 80;
  want.streams[1].truncated = 3;
  want.lost_records = 9;
  want.state = State::kComplete;
  want.emulator = "";
  want.journal_seq = 14;
  EXPECT_EQ(m, want);
  // The result written as one manifest reads back the same.
  auto again = ParseManifest(SerializeManifest(m));
  ASSERT_THAT(again, HasValue());
  EXPECT_EQ(*again, want);
}

TEST(JournalTest, ATornLastLineIsIgnoredAndOtherDamageIsAnError) {
  Manifest base = FullManifest();
  const std::string line13 = SerializeManifestChange(
      {.seq = 13, .snapshots = {{.seq = 2, .reason = SnapshotReason::kSignal}}});
  Manifest m = base;
  ASSERT_THAT(ApplyJournal(m, line13 + R"({"seq":14,"snaps)"), HasValue());
  EXPECT_EQ(m.snapshots.size(), base.snapshots.size() + 1);
  EXPECT_EQ(m.journal_seq, 13u);
  m = base;
  EXPECT_THAT(ApplyJournal(m, line13 + "{\"seq\":14,\n" + line13),
              HasErrorContaining("line 2: not valid JSON"));
  m = base;
  EXPECT_THAT(ApplyJournal(m, line13 + line13),
              HasErrorContaining("line 2: seq 13 does not follow 13"));
  m = base;
  EXPECT_THAT(ApplyJournal(m, "[1]\n"), HasErrorContaining("line 1: not a JSON object"));
  m = base;
  EXPECT_THAT(ApplyJournal(m, "{}\n"), HasErrorContaining("line 1: field 'seq': missing"));
  m = base;
  EXPECT_THAT(ApplyJournal(m, R"({"seq":13,"set":{"lost_records":"many"}})"
                              "\n"),
              HasErrorContaining("line 1: set: field 'lost_records': expected a hex string"));
  m = base;
  ASSERT_THAT(ApplyJournal(m, ""), HasValue());
  EXPECT_EQ(m, base);
}

TEST(TimeConvTest, MatchesTheKernelFormula) {
  // A 3 GHz TSC: mult / 2^shift = 1/3.
  TimeConv tc{.time_zero = 0xfffffc0000000000ull, .time_mult = 715827883, .time_shift = 31};
  for (uint64_t tsc : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}, uint64_t{1} << 40,
                       uint64_t{0x123456789abcdef}}) {
    EXPECT_EQ(TscToPerfTime(tc, tsc), DocFormula(tc, tsc)) << tsc;
  }
}

TEST(TimeConvTest, RoundTripsWithinOneNanosecond) {
  std::vector<TimeConv> convs = {
      {.time_zero = 0xfffffc0000000000ull, .time_mult = 715827883, .time_shift = 31},  // 3 GHz
      {.time_zero = 12345, .time_mult = 1 << 20, .time_shift = 20},                    // 1 GHz
      {.time_zero = 0, .time_mult = 3 << 9, .time_shift = 10},  // 0.67 GHz (virtual TSC)
  };
  for (const TimeConv& tc : convs) {
    SCOPED_TRACE(tc.time_mult);
    for (uint64_t ns : {tc.time_zero, tc.time_zero + 1, tc.time_zero + 999'999'937,
                        tc.time_zero + (uint64_t{1} << 50)}) {
      uint64_t back = TscToPerfTime(tc, PerfTimeToTsc(tc, ns));
      EXPECT_LE(back - ns, 1u) << ns;
    }
    for (uint64_t tsc : {uint64_t{0}, uint64_t{7}, uint64_t{3'000'000'017}, uint64_t{1} << 45}) {
      uint64_t ns = TscToPerfTime(tc, tsc);
      uint64_t back = PerfTimeToTsc(tc, ns);
      // Same nanosecond: the tsc may differ by less than one ns worth of ticks.
      EXPECT_EQ(TscToPerfTime(tc, back), ns) << tsc;
      if (tc.time_mult >= (1u << tc.time_shift)) {
        EXPECT_EQ(back, tsc);
      }
    }
  }
  // Degenerate conversions do not divide by zero.
  EXPECT_EQ(PerfTimeToTsc(TimeConv{}, 5), 0u);
}

}  // namespace
}  // namespace ptsnap::trace
