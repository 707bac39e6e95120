#include "report/trace_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "base/file_util.h"
#include "output/fxt_reader.h"
#include "output/fxt_writer.h"
#include "output/output_file.h"
#include "output/text_writers.h"
#include "report/report.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::report {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;

// Slices as the model emits them: two threads, inferred frames (their end
// first, their begin deferred to the segment's end), a marker, an
// "[unknown]" span, two segments on thread 1, recursion.
std::vector<model::Slice> ModelSlices(std::deque<std::string>& names) {
  auto name = [&](const std::string& n) -> const std::string* {
    for (const std::string& s : names)
      if (s == n) return &s;
    return &names.emplace_back(n);
  };
  std::vector<model::Slice> out;
  auto add = [&](model::Slice::Kind kind, int32_t tid, const std::string& n, uint64_t ts,
                 uint64_t other = 0, bool inferred = false) {
    model::Slice s;
    s.kind = kind;
    s.pid = 7;
    s.tid = tid;
    s.ts = ts;
    s.name = name(n);
    s.inferred = inferred;
    if (kind == model::Slice::kEnd) s.begin_ts = other;
    if (kind == model::Slice::kComplete) s.end_ts = other;
    out.push_back(s);
  };
  using K = model::Slice;
  // Thread 1, segment 1 (from 100): inside "loop" whose start was not seen.
  add(K::kBegin, 1, "parse", 110);
  add(K::kBegin, 1, "parse", 120);
  add(K::kBegin, 1, "lex", 130);
  add(K::kEnd, 1, "lex", 150, 130);
  add(K::kEnd, 1, "parse", 160, 120);
  add(K::kEnd, 1, "parse", 200, 110);
  add(K::kEnd, 1, "loop", 260, 100, true);  // returns into main, also not seen
  add(K::kBegin, 2, "worker", 205);         // another thread in between
  add(K::kBegin, 2, "parse", 210);
  add(K::kEnd, 2, "parse", 290, 210);
  add(K::kBegin, 1, "parse", 270);
  add(K::kEnd, 1, "parse", 300, 270);
  add(K::kEnd, 1, "main", 320, 100, true);
  add(K::kBegin, 1, "main", 100, 0, true);  // deferred begins, outermost first
  add(K::kBegin, 1, "loop", 100, 0, true);
  add(K::kComplete, 1, "[unknown]", 100, 105, true);
  add(K::kInstant, 1, "[snapshot 1: signal]", 330);
  // Thread 1, segment 2 (from 1000).
  add(K::kBegin, 1, "lex", 1010);
  add(K::kEnd, 1, "lex", 1500, 1010);
  add(K::kEnd, 1, "parse", 1600, 1000, true);
  add(K::kBegin, 1, "parse", 1000, 0, true);
  add(K::kEnd, 2, "worker", 1700, 205);
  return out;
}

TraceFileKind Sniffed(const std::filesystem::path& path) {
  auto k = SniffTraceFile(path);
  EXPECT_THAT(k, HasValue());
  return k ? *k : TraceFileKind::kOther;
}

ReportOptions Options() {
  ReportOptions o;
  o.functions = {"parse"};
  o.slowest = 3;
  o.folded = true;
  return o;
}

struct Rendered {
  std::string text, json, folded;
};

Rendered Render(const ReportSink& r) {
  return {FormatText(r, SortKey::kTotal, 0), FormatJson(r, SortKey::kTotal, 0), r.FoldedStacks()};
}

// What `ptsnap decode -o FILE` writes from these slices, with FxtWriter or
// JsonWriter (gzip for .gz), the trigger track included.
template <typename Writer>
void WriteTrace(const std::vector<model::Slice>& slices, const std::filesystem::path& path) {
  auto f = output::OutputFile::Open(path, path.extension() == ".gz");
  ASSERT_THAT(f, HasValue());
  Writer w(f->get());
  w.OnProcess(7, "prog [pid=7]");
  w.OnThread(7, 1, "main");
  w.OnThread(7, 2, "worker");
  for (const model::Slice& s : slices) w.OnSlice(s);
  w.OnProcess(output::kTriggerTrackPid, "Snapshot triggers");
  w.OnThread(output::kTriggerTrackPid, output::kTriggerTrackTid, "hits");
  w.Instant(output::kTriggerTrackPid, output::kTriggerTrackTid, 5000, "hit parse");
  ASSERT_THAT(w.Finish(), HasValue());
}
void WriteFxt(const std::vector<model::Slice>& slices, const std::filesystem::path& path) {
  WriteTrace<output::FxtWriter>(slices, path);
}
void WriteJson(const std::vector<model::Slice>& slices, const std::filesystem::path& path) {
  WriteTrace<output::JsonWriter>(slices, path);
}

using Reader = Result<void> (*)(const std::filesystem::path&, model::SliceSink*);

// The report of a decoded file is the report of the slices it was written
// from: counts, totals, self times, percentiles, slowest calls and their
// trees, folded stacks, span, threads; merged and per thread.
void ExpectFileReportsWhatTheSlicesReport(void (*write)(const std::vector<model::Slice>&,
                                                        const std::filesystem::path&),
                                          Reader read, TraceFileKind kind,
                                          const std::vector<std::string>& files) {
  std::deque<std::string> names;
  const std::vector<model::Slice> slices = ModelSlices(names);
  for (const bool per_thread : {false, true}) {
    ReportOptions o = Options();
    o.per_thread = per_thread;
    ReportSink direct(o);
    for (const model::Slice& s : slices) direct.OnSlice(s);
    ASSERT_THAT(direct.Finish(), HasValue());
    const Rendered want = Render(direct);
    EXPECT_THAT(want.text, HasSubstr("Slowest calls of parse"));
    EXPECT_THAT(want.folded, HasSubstr("main;loop;parse;parse;lex 20\n"));
    EXPECT_THAT(want.folded, HasSubstr("[unknown] 5\n"));

    ::ptsnap::testing::TempDir tmp;
    for (const std::string& file : files) {
      const auto path = tmp.path() / file;
      write(slices, path);
      EXPECT_EQ(Sniffed(path), kind) << file;
      ReportSink from_file(o);
      ASSERT_THAT(read(path, &from_file), HasValue()) << file;
      const Rendered got = Render(from_file);
      EXPECT_EQ(got.text, want.text) << file;
      EXPECT_EQ(got.json, want.json) << file;
      EXPECT_EQ(got.folded, want.folded) << file;
      EXPECT_EQ(from_file.span_ns(), direct.span_ns()) << file;
      EXPECT_EQ(from_file.threads(), 2u) << file;
    }
  }
}

// FXT, plain and gzip.
TEST(TraceFile, FxtFileReportsWhatTheSlicesReport) {
  ExpectFileReportsWhatTheSlicesReport(WriteFxt, ReadFxtSlices, TraceFileKind::kFxt,
                                       {"t.fxt", "t.fxt.gz"});
}

// The same for Chrome JSON, whose "X" events come as frames end: the
// frames are put back in begin/end order, inferred frames (no begin) and
// the "[unknown]" span settled at their segment's end, as the model wrote
// them; two threads, recursion, two segments.
TEST(TraceFile, JsonFileReportsWhatTheSlicesReport) {
  ExpectFileReportsWhatTheSlicesReport(WriteJson, ReadJsonSlices, TraceFileKind::kJson,
                                       {"t.json", "t.json.gz"});
}

ReportOptions SlowestF() {
  ReportOptions o;
  o.functions = {"f"};
  o.slowest = 1;
  return o;
}

// JsonWriter writes microseconds with three decimals: perf-clock times
// (about 2^60 ns) come back to the nanosecond, where a double would lose
// them. Other writers' forms (integers, exponents, more decimals) are read
// too, rounded to the nanosecond. "B"/"E" pairs are frames; a top-level
// array is a trace.
TEST(TraceFile, JsonTimesAreExactNanoseconds) {
  ReportSink exact(SlowestF());
  Result<void> r = ReadJsonSlicesFromBytes(
      R"({"traceEvents":[{"ph":"X","name":"g","pid":1,"tid":1,"ts":1733280000123456.790,"dur":0.003},
{"ph":"X","name":"f","pid":1,"tid":1,"ts":1733280000123456.789,"dur":0.012}]})",
      &exact);
  ASSERT_THAT(r, HasValue());
  ASSERT_EQ(exact.Slowest().size(), 1u);
  EXPECT_EQ(exact.Slowest()[0].begin_ns, 1733280000123456789u);
  EXPECT_EQ(exact.Slowest()[0].duration_ns, 12u);
  ASSERT_EQ(exact.Slowest()[0].tree.children.size(), 1u);
  EXPECT_EQ(exact.Slowest()[0].tree.children[0].name, "g");
  EXPECT_EQ(exact.span_ns(), 12u);

  ReportSink forms(SlowestF());
  r = ReadJsonSlicesFromBytes(
      R"([{"ph":"B","name":"f","pid":1,"tid":1,"ts":2},
{"ph":"X","name":"g","pid":1,"tid":1,"ts":2.0004,"dur":1.5e-3},
{"ph":"E","pid":1,"tid":1,"ts":0.4e1}])",
      &forms);
  ASSERT_THAT(r, HasValue());
  ASSERT_EQ(forms.Slowest().size(), 1u);
  EXPECT_EQ(forms.Slowest()[0].begin_ns, 2000u);
  EXPECT_EQ(forms.Slowest()[0].duration_ns, 2000u);
  ASSERT_EQ(forms.Slowest()[0].tree.children.size(), 1u);
  EXPECT_EQ(forms.Slowest()[0].tree.children[0].total_ns,
            2u);  // 2000..2002 (0.0004 us rounds to 0)
}

// What is not a trace, or not a whole one: the byte offset of the event
// or the character that is wrong.
TEST(TraceFile, JsonErrorsNameTheOffset) {
  const std::string x0 = R"({"ph":"X","name":"f","pid":1,"tid":1,"ts":0,"dur":10})";
  const std::string x5 = R"({"ph":"X","name":"g","pid":1,"tid":1,"ts":5,"dur":10})";
  const std::string head = R"({"traceEvents":[)";
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {head + x0, "JSON at offset " + std::to_string(head.size() + x0.size()) +
                      ": syntax error while parsing array - unexpected end of input"},
      {head + x0.substr(0, 20), "JSON at offset " + std::to_string(head.size() + 20) + ": "},
      {R"({"events": []})", "not a Chrome trace: the object has no \"traceEvents\" array"},
      // A misplaced value: where the parser stood once it had read it.
      {"[1]", "JSON at offset 2: not a Chrome trace: an event is not an object"},
      {"\"x\"", "JSON at offset 2: not a Chrome trace: neither an object"},
      {R"({"traceEvents": 3})", "\"traceEvents\" is not an array"},
      {head + R"({"ph":"X","name":"f","ts":1}]})",
       "JSON at offset " + std::to_string(head.size()) + ": \"X\" event without \"dur\""},
      {head + R"({"ph":"X","name":"f","ts":-1,"dur":1}]})", "\"ts\" is not a time in microseconds"},
      {head + R"({"ph":"X","name":"f","ts":"1","dur":1}]})", "\"ts\" is not a time"},
      {head + R"({"ph":"X","name":"f","ts":1e30,"dur":1}]})", "\"ts\" is not a time"},
      {head + R"({"name":"f","ts":1}]})", "an event has no \"ph\""},
      {head + R"({"ph":"E","ts":1}]})", "an \"E\" event with no open \"B\" on thread 0"},
      {head + x0 + "," + x5 + "]}",
       "JSON at offset " + std::to_string(head.size() + x0.size() + 1) +
           ": frames overlap without nesting on thread 1: \"g\" [5000, 15000] ns begins inside "
           "\"f\" [0, 10000] ns and ends after it"},
  };
  for (const Case& c : cases) {
    ReportSink sink(SlowestF());
    EXPECT_THAT(ReadJsonSlicesFromBytes(c.text, &sink), HasErrorContaining(c.error)) << c.text;
  }
  // From a file: its name, and the offset of a cut in the uncompressed text.
  std::deque<std::string> names;
  ::ptsnap::testing::TempDir tmp;
  const auto path = tmp.path() / "t.json.gz";
  WriteJson(ModelSlices(names), path);
  auto text = output::ReadMaybeGzip(path);
  ASSERT_THAT(text, HasValue());
  const auto cut = tmp.path() / "cut.json";
  ASSERT_THAT(base::WriteFileAtomic(cut, text->substr(0, 300), 0644), HasValue());
  ReportSink r({});
  EXPECT_THAT(ReadJsonSlices(cut, &r),
              HasErrorContaining(cut.string() + ": JSON at offset 300: syntax error"));
  auto gz = base::ReadFile(path);
  ASSERT_THAT(gz, HasValue());
  const auto bad_gz = tmp.path() / "bad.json.gz";
  ASSERT_THAT(base::WriteFileAtomic(bad_gz, gz->substr(0, gz->size() / 2), 0644), HasValue());
  EXPECT_THAT(ReadJsonSlices(bad_gz, &r),
              HasErrorContaining(bad_gz.string() + ": JSON at offset "));
  EXPECT_THAT(ReadJsonSlices(tmp.path() / "none.json", &r), HasErrorContaining("none.json"));
}

// A file cut short, or not FXT: an error naming the file and, for a cut,
// the byte offset of the record that runs past the end.
TEST(TraceFile, TruncatedAndForeignFilesAreErrorsWithTheOffset) {
  std::deque<std::string> names;
  ::ptsnap::testing::TempDir tmp;
  const auto path = tmp.path() / "t.fxt";
  WriteFxt(ModelSlices(names), path);
  auto bytes = base::ReadFile(path);
  ASSERT_THAT(bytes, HasValue());
  const auto cut = tmp.path() / "cut.fxt";
  ASSERT_THAT(base::WriteFileAtomic(cut, bytes->substr(0, bytes->size() - 16), 0644), HasValue());
  ReportSink r({});
  EXPECT_THAT(ReadFxtSlices(cut, &r), HasErrorContaining("record runs past the end"));
  EXPECT_THAT(ReadFxtSlices(cut, &r), HasErrorContaining(cut.string()));
  EXPECT_THAT(ReadFxtSlices(cut, &r), HasErrorContaining("FXT record at offset "));
  const auto odd = tmp.path() / "odd.fxt";
  ASSERT_THAT(base::WriteFileAtomic(odd, *bytes + "abc", 0644), HasValue());
  EXPECT_THAT(ReadFxtSlices(odd, &r),
              HasErrorContaining("FXT record at offset " + std::to_string(bytes->size()) +
                                 ": trailing bytes that are not a whole word"));
  const auto json = tmp.path() / "t.json";
  ASSERT_THAT(base::WriteFileAtomic(json, " {\"traceEvents\": []}", 0644), HasValue());
  EXPECT_EQ(Sniffed(json), TraceFileKind::kJson);
  EXPECT_EQ(Sniffed(cut), TraceFileKind::kFxt);
  EXPECT_THAT(ReadFxtSlices(json, &r), HasErrorContaining("not an FXT file"));
  EXPECT_THAT(SniffTraceFile(tmp.path() / "none"), HasErrorContaining("none"));
}

}  // namespace
}  // namespace ptsnap::report
