// The public C++ API (ptsnap/recording.h, ptsnap/decoder.h) as an agent
// uses it, linked against libptsnap.so. Api.*: no recording happens
// (suite unit); ApiEmulated.*: records fib under the emulator, ApiLive.*:
// samples it natively with perf_event_open (suite integration,
// tests/api/meson.build; needs EMU_PROGRAMS_DIR).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "ptsnap/decoder.h"
#include "ptsnap/probe.h"
#include "ptsnap/recording.h"

#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using ::ptsnap::testing::TempDir;

fs::path Program(const std::string& name) {
  const char* dir = std::getenv("EMU_PROGRAMS_DIR");
  if (dir == nullptr) return {};
  return fs::path(dir) / ("emu_" + name);
}

TEST(Api, VersionIsSet) { EXPECT_STREQ(ptsnap::Version(), "0.1.0"); }

TEST(Api, NoCommandAndNoPidsIsUsage) {
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  auto rec = ptsnap::Recording::Create(o);
  ASSERT_FALSE(rec);
  EXPECT_EQ(rec.error().kind(), ptsnap::ErrorKind::kUsage) << rec.error().ToString();
  EXPECT_FALSE(rec.error().ToString().empty());
}

// A callgraph mode belongs to sampling; checked before anything starts.
TEST(Api, CallgraphModeWithoutSamplingIsUsage) {
  ptsnap::RecordingOptions o;
  o.command = {"true"};
  o.collection = ptsnap::Collection::kEmulated;
  o.callgraph_mode = "fp";
  auto rec = ptsnap::Recording::Create(o);
  ASSERT_FALSE(rec);
  EXPECT_EQ(rec.error().kind(), ptsnap::ErrorKind::kUsage) << rec.error().ToString();
  EXPECT_NE(rec.error().ToString().find("--callgraph-mode only applies to --sampling"),
            std::string::npos)
      << rec.error().ToString();
}

TEST(Api, DecoderOpenOfAMissingDirectoryFails) {
  TempDir tmp;
  auto d = ptsnap::Decoder::Open(tmp.path() / "nope");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().ToString().find("nope"), std::string::npos) << d.error().ToString();
}

class Events final : public ptsnap::RecordingListener {
 public:
  void OnEvent(const ptsnap::RecordingEvent& e) override {
    if (e.kind == ptsnap::RecordingEvent::Kind::kSnapshot) ++snapshots;
    if (e.kind == ptsnap::RecordingEvent::Kind::kStarted) ++started;
  }
  std::atomic<int> snapshots{0}, started{0};
};

class Slices final : public ptsnap::DecodeListener {
 public:
  void OnThread(int32_t, int32_t, std::string_view) override { ++threads; }
  void OnSlice(const ptsnap::DecodedSlice& s) override {
    EXPECT_LE(s.begin_ns, s.end_ns);
    ++calls[std::string(s.name)];
  }
  int threads = 0;
  std::map<std::string, int> calls;
};

TEST(ApiEmulated, MissingTriggerSymbolIsReportedAtCreate) {
  ASSERT_FALSE(Program("fib").empty()) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  o.command = {Program("fib").string(), "5"};
  o.trigger = "no_such_function_anywhere";
  o.trace_dir = tmp.path() / "trace";
  auto rec = ptsnap::Recording::Create(o);
  ASSERT_FALSE(rec);
  EXPECT_EQ(rec.error().kind(), ptsnap::ErrorKind::kTrigger) << rec.error().ToString();
  EXPECT_NE(rec.error().ToString().find("no_such_function_anywhere"), std::string::npos);
  EXPECT_FALSE(fs::exists(o.trace_dir)) << "Create must not start anything";
}

// Records `o` until the program exits (status 0 expected), then decodes
// the whole trace into `slices`; `summary` gets the decode's summary.
void RecordToTheEndAndDecode(const ptsnap::RecordingOptions& o, Slices& slices,
                             std::optional<ptsnap::DecodeSummary>& summary) {
  auto rec = ptsnap::Recording::Create(o);
  ASSERT_TRUE(rec) << rec.error().ToString();
  auto started = rec->Start();
  ASSERT_TRUE(started) << started.error().ToString();
  auto result = rec->Wait();
  ASSERT_TRUE(result) << result.error().ToString();
  EXPECT_EQ(result->program_status, 0);
  auto decoder = ptsnap::Decoder::Open(o.trace_dir);
  ASSERT_TRUE(decoder) << decoder.error().ToString();
  auto decoded = decoder->Decode(slices);
  ASSERT_TRUE(decoded) << decoded.error().ToString();
  summary = std::move(*decoded);
}

// DecodeOptions::inline_frames (tests/programs/decode/inline.c, -O2 with
// DWARF: inl_step is inlined into loop_caller 7 times): frames by default,
// none with it false, as `ptsnap decode --no-inline`.
TEST(ApiEmulated, InlineFramesCanBeTurnedOff) {
  const char* prog = std::getenv("PTSNAP_DECODE_INLINE");
  ASSERT_NE(prog, nullptr) << "PTSNAP_DECODE_INLINE is set by meson";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  o.full_execution = true;
  o.command = {prog, "7"};
  o.trace_dir = tmp.path() / "trace";
  Slices slices;
  std::optional<ptsnap::DecodeSummary> summary;
  RecordToTheEndAndDecode(o, slices, summary);
  ASSERT_TRUE(summary);
  EXPECT_EQ(slices.calls["inl_step (inlined)"], 7);
  ptsnap::DecodeOptions d;
  d.inline_frames = false;
  auto decoder = ptsnap::Decoder::Open(o.trace_dir, d);
  ASSERT_TRUE(decoder) << decoder.error().ToString();
  Slices plain;
  ASSERT_TRUE(decoder->Decode(plain));
  EXPECT_EQ(plain.calls.count("inl_step (inlined)"), 0u);
  EXPECT_EQ(plain.calls["leaf_call"], 7);
}

// RecordingOptions::filter reaches the emulator: only work_a is traced.
TEST(ApiEmulated, FilterTracesOnlyTheFunction) {
  ASSERT_FALSE(Program("filter").empty()) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  o.command = {Program("filter").string()};
  o.trace_dir = tmp.path() / "trace";
  o.filter = "work_a";
  Slices slices;
  std::optional<ptsnap::DecodeSummary> summary;
  RecordToTheEndAndDecode(o, slices, summary);
  ASSERT_TRUE(summary);
  EXPECT_EQ(slices.calls["work_a"], 2);
  EXPECT_EQ(slices.calls.count("work_b"), 0u);
  EXPECT_EQ(summary->decode_errors, 0u);
  EXPECT_FALSE(summary->sampled.has_value()) << "a PT trace has no sample figures";
  // A typo is reported at Create, before anything starts.
  o.filter = "work_c";
  o.trace_dir = tmp.path() / "trace2";
  auto bad = ptsnap::Recording::Create(o);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find("no function named 'work_c'"), std::string::npos);
  EXPECT_FALSE(fs::exists(o.trace_dir));
}

TEST(ApiEmulated, SnapshotWhileRunningThenStopDecodes) {
  ASSERT_FALSE(Program("fib").empty()) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  o.command = {Program("fib").string(), "40"};
  o.trace_dir = tmp.path() / "trace";
  o.snapshot_size = 256 << 10;
  Events events;
  auto rec = ptsnap::Recording::Create(o, &events);
  ASSERT_TRUE(rec) << rec.error().ToString();
  EXPECT_EQ(rec->trace_dir(), o.trace_dir);
  auto started = rec->Start();
  ASSERT_TRUE(started) << started.error().ToString();
  EXPECT_EQ(events.started, 1);
  // Into fib's recursion (the loader and libc's start are done by then).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto snap = rec->Snapshot("x");
  ASSERT_TRUE(snap) << snap.error().ToString();
  EXPECT_GE(snap->seq, 1u);
  auto result = rec->Stop();
  ASSERT_TRUE(result) << result.error().ToString();
  EXPECT_TRUE(result->interrupted);
  EXPECT_EQ(result->program_status, 128 + SIGINT);
  EXPECT_GE(result->snapshots, 2u);  // ours and the one at the stop
  EXPECT_GE(events.snapshots, 1);

  ptsnap::DecodeOptions d;
  d.snapshot = snap->seq;
  auto decoder = ptsnap::Decoder::Open(o.trace_dir, d);
  ASSERT_TRUE(decoder) << decoder.error().ToString();
  Slices slices;
  auto summary = decoder->Decode(slices);
  ASSERT_TRUE(summary) << summary.error().ToString();
  EXPECT_GE(slices.threads, 1);
  EXPECT_GT(slices.calls["fib"], 100);
  EXPECT_GT(summary->slices, 100u);
  ASSERT_FALSE(summary->top_total.empty());

  auto again = ptsnap::Decoder::Open(o.trace_dir, d);
  ASSERT_TRUE(again) << again.error().ToString();
  auto written = again->WriteFile(tmp.path() / "out.json");
  ASSERT_TRUE(written) << written.error().ToString();
  EXPECT_EQ(written->format, "json");
  std::ifstream in(tmp.path() / "out.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"fib\""), std::string::npos);
  EXPECT_EQ(written->dropped_too_deep + written->dropped_too_short, 0u);
  EXPECT_GT(written->output_bytes, 0u);

  // Thinned as `ptsnap decode --max-depth 1`: the summary and its JSON
  // count what the file lacks.
  d.max_depth = 1;
  auto thin = ptsnap::Decoder::Open(o.trace_dir, d);
  ASSERT_TRUE(thin) << thin.error().ToString();
  auto thinned = thin->WriteFile(tmp.path() / "thin.json");
  ASSERT_TRUE(thinned) << thinned.error().ToString();
  EXPECT_GT(thinned->dropped_too_deep, 0u);
  EXPECT_LT(thinned->output_bytes, written->output_bytes);
  EXPECT_NE(
      thinned->ToJson().find("\"dropped_too_deep\": " + std::to_string(thinned->dropped_too_deep)),
      std::string::npos);
  EXPECT_NE(thinned->text.find("Thinned the timeline"), std::string::npos);
}

// A snapshot is in the trace directory when Snapshot() returns: it decodes
// while the program still runs under the emulator.
TEST(ApiEmulated, ASnapshotDecodesBeforeTheRecordingEnds) {
  ASSERT_FALSE(Program("fib").empty()) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kEmulated;
  o.command = {Program("fib").string(), "40"};
  o.trace_dir = tmp.path() / "trace";
  o.snapshot_size = 256 << 10;
  o.multi_snapshot = true;
  auto rec = ptsnap::Recording::Create(o);
  ASSERT_TRUE(rec) << rec.error().ToString();
  ASSERT_TRUE(rec->Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto first = rec->Snapshot("first");
  ASSERT_TRUE(first) << first.error().ToString();
  auto second = rec->Snapshot("second");
  ASSERT_TRUE(second) << second.error().ToString();
  EXPECT_EQ(first->seq, 1u);
  EXPECT_EQ(second->seq, 2u);

  ptsnap::DecodeOptions d;
  d.snapshot = second->seq;
  auto decoder = ptsnap::Decoder::Open(o.trace_dir, d);
  ASSERT_TRUE(decoder) << decoder.error().ToString();
  Slices slices;
  auto summary = decoder->Decode(slices);
  ASSERT_TRUE(summary) << summary.error().ToString();
  EXPECT_GT(slices.calls["fib"], 100);

  auto result = rec->Stop();
  ASSERT_TRUE(result) << result.error().ToString();
  EXPECT_EQ(result->snapshots, 3u);  // the two asked for and the one at the stop
}

// A sampled recording's decode summary carries the sample figures (a PT
// one's has none: ApiEmulated.FilterTracesOnlyTheFunction).
TEST(ApiLive, SampledDecodeSummaryHasTheSampleFigures) {
  ASSERT_FALSE(Program("fib").empty()) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  ptsnap::RecordingOptions o;
  o.collection = ptsnap::Collection::kSampled;
  o.callgraph_mode = "fp";
  o.timer_resolution = "sample:2000";
  o.full_execution = true;
  o.command = {Program("fib").string(), "34"};
  o.trace_dir = tmp.path() / "trace";
  Slices slices;
  std::optional<ptsnap::DecodeSummary> summary;
  RecordToTheEndAndDecode(o, slices, summary);
  ASSERT_TRUE(summary);
  ASSERT_TRUE(summary->sampled.has_value());
  EXPECT_EQ(summary->sampled->callgraph, "fp");
  EXPECT_FALSE(summary->sampled->event.empty());
  EXPECT_EQ(summary->sampled->period_ns, 500'000u);  // 2000 a second
  EXPECT_GT(summary->sampled->samples, 10u);
  EXPECT_LE(summary->sampled->unwound + summary->sampled->truncated, summary->sampled->samples);
  EXPECT_GT(slices.calls["fib"], 0);
  const std::string json = summary->ToJson();
  EXPECT_NE(json.find("\"callgraph\": \"fp\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"samples\": " + std::to_string(summary->sampled->samples)),
            std::string::npos)
      << json;
  // fp recordings carry the leaf mend's registers and stack copy.
  EXPECT_TRUE(summary->sampled->fp_checked);
  EXPECT_LE(summary->sampled->fp_mended + summary->sampled->fp_unmendable,
            summary->sampled->samples);
  EXPECT_NE(json.find("\"fp_mended\": " + std::to_string(summary->sampled->fp_mended)),
            std::string::npos)
      << json;
}

}  // namespace
