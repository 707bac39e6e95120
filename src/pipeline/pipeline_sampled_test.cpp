// DecodeTraceDir on a synthesized sampled trace directory (source
// "sampled"): samples streams of hand-built PERF_RECORD_SAMPLE records with
// fp callchains, names from a JIT map copy, through to FXT, JSON and
// .events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/string_util.h"
#include "output/fxt_reader.h"
#include "pipeline/pipeline.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {
namespace {

using ::ptsnap::testing::HasValue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kPid = 4242;
constexpr uint64_t kPeriod = 1000;  // ns: cpu-clock with a fixed period
constexpr uint64_t kSampleType = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                                 PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                                 PERF_SAMPLE_CALLCHAIN;
constexpr uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);

// A sample with an fp callchain `ips`, innermost first (the IP first).
std::string SampleRecord(uint32_t tid, uint64_t time, const std::vector<uint64_t>& ips) {
  std::vector<uint64_t> body = {7,
                                ips.front(),
                                (static_cast<uint64_t>(tid) << 32) | kPid,
                                time,
                                0,
                                kPeriod,
                                ips.size() + 1,
                                kUser};
  body.insert(body.end(), ips.begin(), ips.end());
  perf_event_header h{PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER,
                      static_cast<uint16_t>(sizeof h + body.size() * 8)};
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(reinterpret_cast<const char*>(body.data()), body.size() * 8);
  return out;
}

trace::Record Comm(uint32_t tid, const std::string& name) {
  trace::Record r;
  r.sample_id = {kPid, tid, 1, 0, 0, 0};
  r.body = trace::Comm{kPid, tid, name, false};
  return r;
}

// main [0x1000, 0x1100), outer [0x2000, 0x2100), hot [0x3000, 0x3100),
// other [0x4000, 0x4100), named by the trace's JIT map copy.
struct SampledTrace {
  std::filesystem::path dir;
  ::ptsnap::testing::TempDir tmp;

  // `streams[k]` holds snapshot k + 1's samples (snapshot mode when more
  // than one).
  explicit SampledTrace(const std::vector<std::string>& streams) {
    dir = tmp.path() / "trace";
    trace::Manifest m;
    m.source = trace::Source::kSampled;
    m.mode = streams.size() > 1 ? trace::Mode::kSnapshot : trace::Mode::kFull;
    m.command = {"prog", "--fast"};
    m.pids = {kPid};
    trace::Sampling sa;
    sa.event = "cpu-clock";
    sa.type = PERF_TYPE_SOFTWARE;
    sa.config = PERF_COUNT_SW_CPU_CLOCK;
    sa.sample_type = kSampleType;
    sa.period = kPeriod;
    sa.callgraph = "fp";
    m.sampling = sa;
    auto w = trace::TraceWriter::Create(dir, m);
    EXPECT_THAT(w, HasValue());
    std::string sb = trace::SerializeRecord(Comm(kPid, "prog")) +
                     trace::SerializeRecord(Comm(kPid + 1, "worker"));
    EXPECT_THAT(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))), HasValue());
    for (size_t k = 0; k < streams.size(); ++k) {
      trace::Stream s;
      s.kind = trace::StreamKind::kSamples;
      s.pid = kPid;
      s.tid = kPid;
      s.snapshot = streams.size() > 1 ? static_cast<uint32_t>(k + 1) : 0;
      EXPECT_THAT(w->AddStream(s, std::as_bytes(std::span(streams[k].data(), streams[k].size()))),
                  HasValue());
      if (streams.size() > 1) {
        EXPECT_THAT(w->AddSnapshot({static_cast<uint32_t>(k + 1), trace::SnapshotReason::kSignal,
                                    "SIGUSR2", 100000 * (k + 1), 0}),
                    HasValue());
      }
    }
    std::filesystem::path maps = tmp.path() / "maps";
    std::filesystem::create_directories(maps);
    tmp.Write("maps/perf-" + std::to_string(kPid) + ".map",
              "1000 100 main\n2000 100 outer\n3000 100 hot\n4000 100 other\n");
    const int32_t pids[] = {kPid};
    EXPECT_THAT(w->CopyPerfMaps(pids, maps), HasValue());
    EXPECT_THAT(w->Finish(), HasValue());
  }
};

// One stream: main -> outer -> hot for three samples, then main -> other,
// a gap, main again; a second thread in main -> hot.
std::string OneStream() {
  return SampleRecord(kPid, 10000, {0x3001, 0x2010, 0x1010}) +
         SampleRecord(kPid + 1, 10500, {0x3002, 0x1030}) +
         SampleRecord(kPid, 11000, {0x3050, 0x2010, 0x1010}) +
         SampleRecord(kPid, 12000, {0x3002, 0x2010, 0x1010}) +
         SampleRecord(kPid, 13000, {0x4001, 0x1020}) +
         // 20 periods later: a gap
         SampleRecord(kPid, 33000, {0x1001});
}

std::vector<std::string> Lines(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  for (auto l : base::Split(text, '\n')) {
    if (l.find(needle) != std::string_view::npos) out.emplace_back(l);
  }
  return out;
}

TEST(PipelineSampledTest, SpansFromSamplesInEveryFormat) {
  SampledTrace t({OneStream()});
  DecodeOptions o;
  o.output = t.tmp.path() / "out.events";
  auto r = DecodeTraceDir(t.dir, o);
  ASSERT_THAT(r, HasValue());
  EXPECT_TRUE(r->sampled.sampled);
  EXPECT_EQ(r->sampled.period_ns, kPeriod);
  EXPECT_FALSE(r->sampled.period_measured);
  EXPECT_EQ(r->sampled.samples, 6u);
  EXPECT_EQ(r->sampled.unwound, 6u);
  EXPECT_EQ(r->sampled.gaps, 1u);
  EXPECT_EQ(r->threads, 2u);
  EXPECT_EQ(r->streams, 1u);
  auto text = base::ReadFile(o.output);
  ASSERT_THAT(text, HasValue());
  // hot: the first sample that shows it (10000) to the first that does
  // not (13000); outer likewise; main until the gap (13000 + one period).
  auto ends = Lines(*text, " E ");
  std::string all = base::Join(ends, "\n");
  EXPECT_THAT(all, HasSubstr("hot"));
  auto hot = Lines(*text, "E hot");
  ASSERT_EQ(hot.size(), 2u) << *text;  // one per thread
  auto outer = Lines(*text, "E outer");
  ASSERT_EQ(outer.size(), 1u);
  auto main_ends = Lines(*text, "E main");
  ASSERT_EQ(main_ends.size(), 3u) << *text;  // two on the main thread (the gap), one on the worker
  EXPECT_EQ(Lines(*text, "B other").size(), 1u);

  std::string summary = FormatReport(*r);
  EXPECT_THAT(summary, HasSubstr("6 stack samples (cpu-clock, callgraph fp)"));
  EXPECT_THAT(summary, HasSubstr("one sample every 1.000 us"));
  EXPECT_THAT(summary, HasSubstr("known to within that"));
  EXPECT_THAT(summary, ::testing::Not(HasSubstr("bytes of PT")));
  // Its frames are spans of samples: the hottest functions count spans.
  EXPECT_THAT(summary, ::testing::ContainsRegex("[0-9] spans  main\n"));
  EXPECT_THAT(summary, ::testing::Not(HasSubstr(" calls  ")));
  // Recorded without user registers and a stack copy (before the leaf
  // mend): the chains are taken as the kernel walked them, and said so.
  EXPECT_FALSE(r->sampled.fp_checked);
  EXPECT_EQ(r->sampled.fp_mended + r->sampled.fp_unmendable, 0u);
  EXPECT_THAT(summary, HasSubstr("Frame-pointer stacks: not checked for a skipped caller"));
  // Lost records are said with what they were and the way out (a new user
  // saw "Lost sideband records: 793" on a sampled attach and no more).
  EXPECT_THAT(summary, HasSubstr("Lost records: 0.\n"));
  DecodeReport lossy = *r;
  lossy.lost_records = 793;
  EXPECT_THAT(FormatReport(lossy),
              HasSubstr("Lost records: 793 (the kernel dropped them while a ring was full: "
                        "samples, and the mmap and comm records"));
  EXPECT_THAT(FormatReport(lossy), HasSubstr("--callgraph-mode fp (no stack copy per sample)"));

  // FXT: the same spans with their times; processes and threads named.
  o.output = t.tmp.path() / "trace.fxt";
  ASSERT_THAT(DecodeTraceDir(t.dir, o), HasValue());
  auto bytes = output::ReadMaybeGzip(o.output);
  ASSERT_THAT(bytes, HasValue());
  auto fxt = output::ParseFxt(*bytes);
  ASSERT_THAT(fxt, HasValue());
  EXPECT_EQ(fxt->processes.at(kPid), "prog --fast [pid=4242]");
  EXPECT_EQ(fxt->threads.at(kPid).name, "prog");
  EXPECT_EQ(fxt->threads.at(kPid + 1).name, "worker");
  std::vector<std::string> main_thread;
  for (const auto& e : fxt->events) {
    if (e.tid != static_cast<uint64_t>(kPid) || (e.type != 2 && e.type != 3)) continue;
    main_thread.push_back((e.type == 2 ? "B " : "E ") + e.name + " " + std::to_string(e.ts));
  }
  // FXT times are relative to nothing here: compare differences.
  ASSERT_EQ(main_thread.size(), 10u);
  auto ts = [&](size_t i) { return std::stoull(main_thread[i].substr(main_thread[i].rfind(' '))); };
  auto name = [&](size_t i) { return main_thread[i].substr(0, main_thread[i].rfind(' ')); };
  EXPECT_THAT(std::vector<std::string>({name(0), name(1), name(2), name(3), name(4), name(5),
                                        name(6), name(7), name(8), name(9)}),
              ElementsAre("B main", "B outer", "B hot", "E ", "E ", "B other", "E ", "E ", "B main",
                          "E "));   // FXT ends name no frame
  EXPECT_EQ(ts(3) - ts(0), 3000u);  // hot: 10000 .. 13000
  EXPECT_EQ(ts(7) - ts(0), 4000u);  // main: until 13000 + one period (the gap)
  EXPECT_EQ(ts(8) - ts(0), 23000u);
  EXPECT_EQ(ts(9) - ts(8), kPeriod);

  // JSON: complete events.
  o.output = t.tmp.path() / "trace.json";
  ASSERT_THAT(DecodeTraceDir(t.dir, o), HasValue());
  auto json = nlohmann::json::parse(*base::ReadFile(o.output));
  int hot_x = 0;
  for (const auto& e : json["traceEvents"]) hot_x += e["ph"] == "X" && e["name"] == "hot";
  EXPECT_EQ(hot_x, 2);
}

TEST(PipelineSampledTest, SnapshotsEndTheirSpansAndSkipTheRepeatedSamples) {
  // Snapshot 2's ring still holds snapshot 1's last sample (12000).
  std::string first = SampleRecord(kPid, 10000, {0x3001, 0x2010, 0x1010}) +
                      SampleRecord(kPid, 12000, {0x3001, 0x2010, 0x1010});
  std::string second = SampleRecord(kPid, 12000, {0x3001, 0x2010, 0x1010}) +
                       SampleRecord(kPid, 50000, {0x4001, 0x1010});
  SampledTrace t({first, second});
  DecodeOptions o;
  o.output = t.tmp.path() / "out.events";
  auto r = DecodeTraceDir(t.dir, o);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->sampled.samples, 3u);
  EXPECT_EQ(r->overlap_events_skipped, 1u);
  auto text = base::ReadFile(o.output);
  ASSERT_THAT(text, HasValue());
  EXPECT_EQ(Lines(*text, "[snapshot 1: signal SIGUSR2]").size(), 1u);
  EXPECT_EQ(Lines(*text, "[snapshot 2: signal SIGUSR2]").size(), 1u);
  EXPECT_EQ(Lines(*text, "B main").size(), 2u);
  EXPECT_THAT(FormatReport(*r), HasSubstr("1 samples already shown by an earlier snapshot"));

  // --snapshot 2: only its stream.
  o.snapshot = 2;
  r = DecodeTraceDir(t.dir, o);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->sampled.samples, 2u);
  EXPECT_EQ(r->streams, 1u);
}

TEST(PipelineSampledTest, BadAndTornRecordsAreCountedNotFatal) {
  std::string good = SampleRecord(kPid, 10000, {0x3001, 0x2010, 0x1010});
  std::string bad = good;
  // Claims a 1000-entry callchain.
  uint64_t nr = 1000;
  std::memcpy(bad.data() + 8 + 6 * 8, &nr, 8);
  SampledTrace t({good + bad + SampleRecord(kPid, 11000, {0x1001}) + good.substr(0, 30)});
  DecodeOptions o;
  o.output = t.tmp.path() / "out.json";
  auto r = DecodeTraceDir(t.dir, o);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->sampled.samples, 2u);
  EXPECT_EQ(r->sampled.bad_records, 1u);
  EXPECT_EQ(r->sampled.torn_bytes, 30u);
  EXPECT_THAT(base::Join(r->warnings, "\n"), HasSubstr("CALLCHAIN does not fit"));
  EXPECT_THAT(FormatReport(*r), HasSubstr("unreadable sample records: 1, torn bytes: 30"));
}

// An idle program sampled: no samples, and the summary says why instead of
// "one sample every 0 ns" (the new-user session of #41 met it attaching to
// `sleep`).
TEST(PipelineSampledTest, NoSamplesIsSaidNotAZeroPeriod) {
  SampledTrace t({std::string()});
  DecodeOptions o;
  o.output = t.tmp.path() / "out.json";
  auto r = DecodeTraceDir(t.dir, o);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->sampled.samples, 0u);
  const std::string text = FormatReport(*r);
  EXPECT_THAT(text, HasSubstr("Sampled: no stack samples: the traced threads did not run"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("every 0 ns")));
}

}  // namespace
}  // namespace ptsnap::pipeline
