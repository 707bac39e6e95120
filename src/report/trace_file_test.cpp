#include "report/trace_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "base/file_util.h"
#include "output/fxt_writer.h"
#include "output/output_file.h"
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

void WriteFxt(const std::vector<model::Slice>& slices, const std::filesystem::path& path) {
  auto f = output::OutputFile::Open(path);
  ASSERT_THAT(f, HasValue());
  output::FxtWriter w(f->get());
  w.OnProcess(7, "prog [pid=7]");
  w.OnThread(7, 1, "main");
  w.OnThread(7, 2, "worker");
  for (const model::Slice& s : slices) w.OnSlice(s);
  w.OnProcess(output::kTriggerTrackPid, "Snapshot triggers");
  w.OnThread(output::kTriggerTrackPid, output::kTriggerTrackTid, "hits");
  w.Instant(output::kTriggerTrackPid, output::kTriggerTrackTid, 5000, "hit parse");
  ASSERT_THAT(w.Finish(), HasValue());
}

// The report of a decoded FXT file is the report of the slices it was
// written from: counts, totals, self times, percentiles, slowest calls and
// their trees, folded stacks, span. Plain and gzip.
TEST(TraceFile, FxtFileReportsWhatTheSlicesReport) {
  std::deque<std::string> names;
  const std::vector<model::Slice> slices = ModelSlices(names);
  ReportSink direct(Options());
  for (const model::Slice& s : slices) direct.OnSlice(s);
  ASSERT_THAT(direct.Finish(), HasValue());
  const Rendered want = Render(direct);
  EXPECT_THAT(want.text, HasSubstr("Slowest calls of parse"));
  EXPECT_THAT(want.folded, HasSubstr("main;loop;parse;parse;lex 20\n"));

  ::ptsnap::testing::TempDir tmp;
  for (const char* file : {"t.fxt", "t.fxt.gz"}) {
    const auto path = tmp.path() / file;
    WriteFxt(slices, path);
    EXPECT_EQ(Sniffed(path), TraceFileKind::kFxt) << file;
    ReportSink from_file(Options());
    ASSERT_THAT(ReadFxtSlices(path, &from_file), HasValue()) << file;
    const Rendered got = Render(from_file);
    EXPECT_EQ(got.text, want.text) << file;
    EXPECT_EQ(got.json, want.json) << file;
    EXPECT_EQ(got.folded, want.folded) << file;
    EXPECT_EQ(from_file.span_ns(), direct.span_ns()) << file;
  }
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
