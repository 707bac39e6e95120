#include "report/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <deque>
#include <nlohmann/json.hpp>

#include "output/summary.h"
#include "report/diff.h"

namespace ptsnap::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Feeds a sink slices as the model emits them; names live as long as it.
class Feed {
 public:
  explicit Feed(model::SliceSink& sink) : sink_(sink) {}
  const std::string* Name(const std::string& n) {
    for (const std::string& s : names_)
      if (s == n) return &s;
    return &names_.emplace_back(n);
  }
  void Begin(int32_t tid, const std::string& name, uint64_t ts) {
    model::Slice s;
    s.kind = model::Slice::kBegin;
    s.pid = 1;
    s.tid = tid;
    s.ts = ts;
    s.name = Name(name);
    sink_.OnSlice(s);
  }
  void End(int32_t tid, const std::string& name, uint64_t begin, uint64_t ts,
           bool inferred = false) {
    model::Slice s;
    s.kind = model::Slice::kEnd;
    s.pid = 1;
    s.tid = tid;
    s.ts = ts;
    s.begin_ts = begin;
    s.inferred = inferred;
    s.name = Name(name);
    sink_.OnSlice(s);
  }
  // A whole call of `name` in the file `dso` (a path), nothing under it.
  void CallIn(int32_t tid, const std::string& name, const std::string& dso, uint64_t begin,
              uint64_t end) {
    for (auto kind : {model::Slice::kBegin, model::Slice::kEnd}) {
      model::Slice s;
      s.kind = kind;
      s.pid = 1;
      s.tid = tid;
      s.ts = kind == model::Slice::kBegin ? begin : end;
      s.begin_ts = begin;
      s.name = Name(name);
      s.dso = Name(dso);
      sink_.OnSlice(s);
    }
  }
  // A whole call with nothing under it.
  void Call(int32_t tid, const std::string& name, uint64_t begin, uint64_t end) {
    Begin(tid, name, begin);
    End(tid, name, begin, end);
  }
  // A zero-length marker, e.g. "[decode error: ...]".
  void Instant(int32_t tid, const std::string& name, uint64_t ts) {
    model::Slice s;
    s.kind = model::Slice::kInstant;
    s.pid = 1;
    s.tid = tid;
    s.ts = ts;
    s.name = Name(name);
    sink_.OnSlice(s);
  }
  // The deferred begin of an inferred frame (the segment is over).
  void InferredBegin(int32_t tid, const std::string& name, uint64_t ts) {
    model::Slice s;
    s.kind = model::Slice::kBegin;
    s.pid = 1;
    s.tid = tid;
    s.ts = ts;
    s.inferred = true;
    s.name = Name(name);
    sink_.OnSlice(s);
  }

 private:
  model::SliceSink& sink_;
  std::deque<std::string> names_;
};

const FunctionStats* Find(const ReportSink& r, const std::string& name, int32_t tid = 0) {
  for (const FunctionStats* f : r.Functions(SortKey::kName, 0))
    if (f->name == name && f->tid == tid) return f;
  return nullptr;
}

TEST(Report, RecursionIsCountedOnceInTotalAndSelfIsExclusive) {
  ReportSink r({});
  Feed f(r);
  // fib(0..100) { fib(10..60) { fib(20..30) } ; leaf(70..90) }
  f.Begin(1, "fib", 0);
  f.Begin(1, "fib", 10);
  f.Call(1, "fib", 20, 30);
  f.End(1, "fib", 10, 60);
  f.Call(1, "leaf", 70, 90);
  f.End(1, "fib", 0, 100);
  ASSERT_TRUE(r.Finish());
  const FunctionStats* fib = Find(r, "fib");
  ASSERT_NE(fib, nullptr);
  EXPECT_EQ(fib->calls, 3u);
  EXPECT_EQ(fib->total_ns, 100u);  // on the stack 0..100, not 100 + 50 + 10
  EXPECT_EQ(fib->self_ns, 30u + 40u + 10u);
  EXPECT_EQ(fib->durations.min(), 10u);
  EXPECT_EQ(fib->durations.max(), 100u);
  EXPECT_EQ(fib->durations.Quantile(0.5), 50u);
  EXPECT_EQ(Find(r, "leaf")->total_ns, 20u);
}

TEST(Report, PerThreadKeepsThreadsApartAndNamedMergesThem) {
  ReportOptions o;
  o.per_thread = true;
  o.functions = {"work"};
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "work", 0, 10);
  f.Call(2, "work", 5, 25);
  f.Call(2, "work", 30, 40);
  ASSERT_TRUE(r.Finish());
  ASSERT_NE(Find(r, "work", 1), nullptr);
  EXPECT_EQ(Find(r, "work", 1)->calls, 1u);
  EXPECT_EQ(Find(r, "work", 2)->calls, 2u);
  EXPECT_EQ(Find(r, "work", 2)->total_ns, 30u);
  auto named = r.Named();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].calls, 3u);
  EXPECT_EQ(named[0].durations.max(), 20u);
}

TEST(Report, TheWindowKeepsCallsThatLieInsideIt) {
  ReportOptions o;
  o.since_ns = 100;
  o.until_ns = 300;
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "a", 1000, 1050);  // the origin: offsets from 1000
  f.Call(1, "a", 1100, 1150);  // inside
  f.Call(1, "a", 1250, 1350);  // ends after 300
  ASSERT_TRUE(r.Finish());
  EXPECT_EQ(Find(r, "a")->calls, 1u);
  EXPECT_EQ(r.outside_window(), 2u);
}

TEST(Report, SlowestCallsComeWithTheTreeUnderThem) {
  ReportOptions o;
  o.functions = {"handle"};
  o.slowest = 2;
  o.tree_depth = 2;
  ReportSink r(o);
  Feed f(r);
  uint64_t t = 0;
  for (uint64_t len : {10, 50, 30, 70}) {
    f.Begin(1, "main", t);
    f.Begin(1, "handle", t + 1);
    f.Begin(1, "parse", t + 2);
    f.Call(1, "lex", t + 3, t + 4);
    f.Call(1, "lex", t + 4, t + 5);
    f.Begin(1, "deep", t + 5);
    f.Call(1, "deeper", t + 5, t + 6);  // level 3: below the tree's depth
    f.End(1, "deep", t + 5, t + 6);
    f.End(1, "parse", t + 2, t + 6);
    f.End(1, "handle", t + 1, t + 1 + len);
    f.End(1, "main", t, t + 2 + len);
    t += 100;
  }
  ASSERT_TRUE(r.Finish());
  auto slow = r.Slowest();
  ASSERT_EQ(slow.size(), 2u);
  EXPECT_EQ(slow[0].duration_ns, 70u);
  EXPECT_EQ(slow[0].begin_ns, 301u);
  EXPECT_EQ(slow[1].duration_ns, 50u);
  ASSERT_EQ(slow[0].tree.children.size(), 1u);
  const TreeNode& parse = slow[0].tree.children[0];
  EXPECT_EQ(parse.name, "parse");
  EXPECT_EQ(parse.total_ns, 4u);
  ASSERT_EQ(parse.children.size(), 2u);
  EXPECT_EQ(parse.children[0].name, "lex");  // 2 ns in two calls, before deep's 1 ns
  EXPECT_EQ(parse.children[0].calls, 2u);
  EXPECT_EQ(parse.children[1].name, "deep");
  EXPECT_TRUE(parse.children[1].children.empty());

  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr("Slowest calls of handle:"));
  EXPECT_THAT(text, HasSubstr("1. 70 ns at +301 ns, thread 1"));
  auto j = nlohmann::json::parse(FormatJson(r, SortKey::kTotal, 10));
  EXPECT_EQ(j["slowest"][0]["duration_ns"], 70);
  EXPECT_EQ(j["slowest"][0]["callees"][0]["name"], "parse");
}

// FUNC as users type it (elf/symbol_match.h): without parameters, mangled,
// a glob; an exact name wins; a miss suggests the nearest names.
TEST(Report, FuncIsMatchedAsUsersTypeNames) {
  ReportOptions o;
  o.functions = {"risky", "_Z5riskyi", "*parse*", "risky(double)", "riksy", "main"};
  o.slowest = 5;
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "main", 0);
  f.Call(1, "risky(int)", 1, 11);
  f.Call(1, "risky(int)", 11, 31);
  f.Call(1, "risky(double)", 31, 36);
  f.Call(1, "ns::Parser::parse_line(char const*)", 40, 47);
  f.End(1, "main", 0, 50);
  ASSERT_TRUE(r.Finish());
  const auto named = r.Named();
  ASSERT_EQ(named.size(), 6u);
  EXPECT_EQ(named[0].name, "risky [risky(double), risky(int)]");
  EXPECT_EQ(named[0].calls, 3u);
  EXPECT_EQ(named[1].name, "risky(int)");
  EXPECT_EQ(named[1].calls, 2u);
  EXPECT_EQ(named[2].name, "ns::Parser::parse_line(char const*)");
  EXPECT_EQ(named[2].calls, 1u);
  EXPECT_EQ(named[3].name, "risky(double)");
  EXPECT_EQ(named[3].calls, 1u);
  EXPECT_EQ(named[4].name, "riksy");
  EXPECT_EQ(named[4].calls, 0u);
  EXPECT_EQ(named[5].name, "main");
  // The slowest calls, per function named, under their real names.
  const auto slow = r.Slowest();
  ASSERT_GE(slow.size(), 3u);
  EXPECT_EQ(slow[0].name, "risky(double)");
  EXPECT_EQ(slow[1].name, "risky(int)");
  EXPECT_EQ(slow[1].duration_ns, 20u);
  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr("\nrisky [risky(double), risky(int)]: 3 calls, durations:"));
  EXPECT_THAT(text, HasSubstr("\nriksy: 0 calls (not in this trace)\n"
                              "  did you mean: risky(int), risky(double) (names are accepted"));
}

// A sampled trace's frames are spans of consecutive samples: the report
// counts spans, not calls, says what one is and how exact its times are,
// and --json carries the period.
TEST(Report, ASampledTraceCountsSpansNotCalls) {
  ReportOptions o;
  o.functions = {"main"};
  o.sampled = true;
  o.sample_period_ns = 250'000;
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "main", 0, 1'000'000);
  ASSERT_TRUE(r.Finish());
  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr(" thread(s), 1 spans."));
  EXPECT_THAT(text, HasSubstr("Sampled trace (one sample every 250.000 us): a span is a run of "
                              "consecutive samples that show the function on the stack, not a "
                              "call"));
  EXPECT_THAT(text, HasSubstr("so times are estimates, on the wall clock"));
  EXPECT_THAT(text, HasSubstr("    spans "));
  EXPECT_THAT(text, Not(HasSubstr("calls        total")));  // the column
  EXPECT_THAT(text, HasSubstr("\nmain: 1 spans, durations:"));
  auto j = nlohmann::json::parse(FormatJson(r, SortKey::kTotal, 10));
  EXPECT_EQ(j["sampled"]["period_ns"], 250'000);
  // A PT trace: calls, and no "sampled" in the JSON.
  ReportSink pt(ReportOptions{});
  Feed g(pt);
  g.Call(1, "main", 0, 10);
  ASSERT_TRUE(pt.Finish());
  EXPECT_THAT(FormatText(pt, SortKey::kTotal, 10), HasSubstr(" thread(s), 1 calls."));
  EXPECT_FALSE(nlohmann::json::parse(FormatJson(pt, SortKey::kTotal, 10)).contains("sampled"));
}

// Functions of several files that share a name (ld.so's _start and the
// program's) are a row each, shown as DSO:NAME, which FUNC takes too; a
// name in one file only is shown alone.
TEST(Report, OneNameInTwoFilesIsARowPerFile) {
  ReportOptions o;
  o.functions = {"_start", "ls:_start", "main"};
  o.slowest = 1;
  ReportSink r(o);
  Feed f(r);
  f.CallIn(1, "_start", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 0, 10);
  f.CallIn(1, "_start", "/usr/bin/ls", 10, 40);
  f.CallIn(1, "_start", "/usr/bin/ls", 40, 50);
  f.CallIn(1, "main", "/usr/bin/ls", 50, 60);
  ASSERT_TRUE(r.Finish());
  std::map<std::string, uint64_t> calls;
  for (const FunctionStats* s : r.Functions(SortKey::kName, 0)) calls[s->name] = s->calls;
  EXPECT_EQ(calls, (std::map<std::string, uint64_t>{
                       {"ld-linux-x86-64.so.2:_start", 1}, {"ls:_start", 2}, {"main", 1}}));
  const auto named = r.Named();
  ASSERT_EQ(named.size(), 3u);
  EXPECT_EQ(named[0].name, "_start [ld-linux-x86-64.so.2:_start, ls:_start]");
  EXPECT_EQ(named[0].calls, 3u);
  EXPECT_EQ(named[1].name, "ls:_start");
  EXPECT_EQ(named[1].calls, 2u);
  EXPECT_EQ(named[2].name, "main");
  // The slowest calls are the function's, by its name alone.
  const auto slow = r.Slowest();
  ASSERT_FALSE(slow.empty());
  EXPECT_EQ(slow[0].name, "_start");
  EXPECT_EQ(slow[0].duration_ns, 30u);
  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr("\nls:_start "));
  EXPECT_THAT(text, HasSubstr("\nld-linux-x86-64.so.2:_start "));
}

// A --trigger snapshot ends at the trigger's first instruction, so its
// function has no call in the trace: the report says why, for the trigger
// as recorded or typed another way, and nothing else with no calls.
TEST(Report, ATriggersOwnFunctionIsExplained) {
  ReportOptions o;
  o.functions = {"risky", "PyList_Append", "main", "riksy"};
  o.triggers = {"risky(int)", "PyList_App*"};
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "main", 0, 10);
  ASSERT_TRUE(r.Finish());
  EXPECT_EQ(r.TriggerNamed("risky"), "risky(int)");
  EXPECT_EQ(r.TriggerNamed("PyList_Append"), "PyList_App*");
  EXPECT_EQ(r.TriggerNamed("main"), "");
  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr("\nrisky: 0 calls (not in this trace: --trigger risky(int) took a "
                              "snapshot when it was called, so the trace ends at that call's "
                              "first instruction; --slower-than DURATION takes the snapshot when "
                              "the call returns, with the call in it)\n"));
  EXPECT_THAT(text,
              HasSubstr("\nPyList_Append: 0 calls (not in this trace: --trigger PyList_App*"));
  EXPECT_THAT(text, HasSubstr("\nriksy: 0 calls (not in this trace)\n"));
}

// A FUNC whose row --limit leaves out still gets its row, after the others
// (a new user expected `report TRACE loop_body` to show loop_body's).
TEST(Report, ANamedFunctionPastTheLimitKeepsItsRow) {
  ReportOptions o;
  o.functions = {"small"};
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "main", 0);
  f.Call(1, "big", 10, 90);
  f.Call(1, "small", 91, 92);
  f.End(1, "main", 0, 100);
  ASSERT_TRUE(r.Finish());
  const std::string text = FormatText(r, SortKey::kTotal, 2);
  EXPECT_THAT(text, HasSubstr("(past --limit 2, named:)\nsmall "));
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0), ::testing::Not(HasSubstr("past --limit")));
}

// [syscall] and [untraced] are no functions: where a table shows one, a
// line under it says what each is (a new user had to guess, #41).
TEST(Report, PseudoFramesAreExplainedWhereTheyShow) {
  ReportOptions o;
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "main", 0, 100);
  ASSERT_TRUE(r.Finish());
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 10), ::testing::Not(HasSubstr("[untraced]:")));
  ReportSink r2(o);
  Feed f2(r2);
  f2.Begin(1, "main", 0);
  f2.Call(1, "[untraced]", 10, 20);
  f2.End(1, "main", 0, 100);
  ASSERT_TRUE(r2.Finish());
  EXPECT_THAT(FormatText(r2, SortKey::kTotal, 10),
              HasSubstr("[untraced]: time where tracing stopped inside the function around it"));
}

// A call of 2^63 ns or more (a corrupt decoded file's times; found by
// report_fxt_fuzzer) lies in the histogram's top octave, [2^63, 2^64): its
// row ends at the largest duration, not at an out-of-range shift.
TEST(Report, TheHistogramsTopOctaveEndsAtTheLargestDuration) {
  ReportOptions o;
  o.functions = {"huge"};
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "huge", 0, uint64_t{1} << 63);
  f.Call(1, "huge", 0, UINT64_MAX);
  ASSERT_TRUE(r.Finish());
  const std::string text = FormatText(r, SortKey::kTotal, 10);
  EXPECT_THAT(text, HasSubstr("huge: 2 calls, durations:"));
  const std::string top = "[" + output::FormatDuration(uint64_t{1} << 63);
  EXPECT_THAT(text, HasSubstr(top));
  EXPECT_THAT(text, HasSubstr(output::FormatDuration(UINT64_MAX) + ")"));
}

TEST(Report, ARecursiveSlowCallShowsItsInnerCalls) {
  ReportOptions o;
  o.functions = {"fib"};
  o.slowest = 1;
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "fib", 0);
  f.Begin(1, "fib", 1);
  f.Call(1, "fib", 2, 3);
  f.End(1, "fib", 1, 5);
  f.End(1, "fib", 0, 9);
  ASSERT_TRUE(r.Finish());
  auto slow = r.Slowest();
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].duration_ns, 9u);
  ASSERT_EQ(slow[0].tree.children.size(), 1u);
  EXPECT_EQ(slow[0].tree.children[0].total_ns, 4u);
  ASSERT_EQ(slow[0].tree.children[0].children.size(), 1u);
  EXPECT_EQ(slow[0].tree.children[0].children[0].total_ns, 1u);
}

// A snapshot starts inside frames whose start was not seen: their ends
// come last, innermost first, then their deferred begins. The folded
// stacks put them under those frames, and their lengths stay out of the
// histograms.
TEST(Report, FoldedStacksPutSeenFramesUnderInferredOnes) {
  ReportOptions o;
  o.folded = true;
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "work", 10);
  f.Call(1, "leaf", 12, 15);
  f.End(1, "work", 10, 20);
  f.Call(1, "other", 30, 35);
  f.End(1, "loop", 0, 40, /*inferred=*/true);
  f.End(1, "main", 0, 50, /*inferred=*/true);
  f.InferredBegin(1, "main", 0);
  f.InferredBegin(1, "loop", 0);
  ASSERT_TRUE(r.Finish());
  EXPECT_EQ(r.FoldedStacks(),
            "main 10\n"
            "main;loop 25\n"
            "main;loop;other 5\n"
            "main;loop;work 7\n"
            "main;loop;work;leaf 3\n");
  const FunctionStats* loop = Find(r, "loop");
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->unseen_start, 1u);
  EXPECT_EQ(loop->durations.count(), 0u);
  EXPECT_EQ(loop->total_ns, 40u);
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0), HasSubstr("began before the trace did"));
  // Its durations are unknown: dashes, not 0 ns; null in JSON.
  std::string row;
  for (std::istringstream in(FormatText(r, SortKey::kTotal, 0)); std::getline(in, row);)
    if (row.starts_with("loop ")) break;
  EXPECT_THAT(
      row, ::testing::MatchesRegex("loop +1 +40 ns +[0-9.]+% +[0-9]+ ns +[0-9.]+% +- +- +- +- +-"));
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0), ::testing::Not(HasSubstr(" 0 ns ")));
  EXPECT_THAT(FormatJson(r, SortKey::kTotal, 0), HasSubstr("\"p50_ns\": null"));
}

// A snapshot that begins inside a recursion: the model infers each level,
// and every inferred frame begins at the trace's start, so each encloses
// the ones that ended before it. Recursion counted once: fib's total is
// the outermost level's 30 ns, not 10 + 20 + 30 (which exceeded the
// 30 ns span: before, a cut fib(22) trace gave fib 817 us in 253 us).
TEST(Report, InferredRecursionIsCountedOnce) {
  ReportSink r(ReportOptions{});
  output::SummarySink summary;
  model::TeeSink tee(&r, &summary);
  Feed f(tee);
  f.Call(1, "leaf", 2, 5);
  f.End(1, "fib", 0, 10, /*inferred=*/true);
  f.Call(1, "fib", 12, 15);  // a seen call inside the inferred levels
  f.End(1, "fib", 0, 20, /*inferred=*/true);
  f.End(1, "fib", 0, 30, /*inferred=*/true);
  f.InferredBegin(1, "fib", 0);
  f.InferredBegin(1, "fib", 0);
  f.InferredBegin(1, "fib", 0);
  ASSERT_TRUE(r.Finish());
  const FunctionStats* fib = Find(r, "fib");
  ASSERT_NE(fib, nullptr);
  EXPECT_EQ(fib->calls, 4u);
  EXPECT_EQ(fib->total_ns, 30u);
  EXPECT_EQ(summary.Top(1, false).at(0).total_ns, 30u);
  EXPECT_EQ(r.implausible().count(), 0u);
}

// The slices the model emits for a 100 ns call to slow that two decode
// errors cut (at 30 and 60; the stretches after them lost), as a damaged
// stream gives them: the frames open at each error end there, and after
// the resync the stack is inferred again. slow is one call, cut, its
// decoded time its total, and no duration; main's call after the damage
// is whole. (Each piece counted as a whole call: 3 calls of slow, with
// durations 20, 20 and 30 ns.)
// Marks (docs/report.md, "Marks"): a slow call names its thread's last
// mark before it began; --by-mark groups a function's calls by it. A mark
// cuts nothing (a decode error's cut call goes on past one).
TEST(Report, ASlowCallNamesTheMarkInForceAndByMarkGroupsCallsByIt) {
  ReportOptions o;
  o.functions = {"handle"};
  o.slowest = 1;
  o.by_mark = true;
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "handle", 0, 5);  // before any mark
  f.Instant(1, "[mark 0x7]", 10);
  f.Call(1, "handle", 11, 20);
  f.Instant(2, "[mark 0x6f6c6c6548 \"Hello\"]", 12);
  f.Instant(1, "[mark 0x8]", 30);
  f.Begin(1, "handle", 31);
  f.Instant(1, "[mark 0x9]", 40);  // inside the call: not the one in force at its start
  f.End(1, "handle", 31, 131);
  f.Call(2, "handle", 13, 23);
  f.Instant(1, "[mark 0x7]", 200);
  f.Call(1, "handle", 201, 231);
  ASSERT_TRUE(r.Finish());
  auto slow = r.Slowest();
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].begin_ns, 31u);
  EXPECT_EQ(slow[0].mark, "0x8");
  std::vector<std::string> groups;
  for (const MarkGroup* g : r.ByMark())
    groups.push_back(g->mark + " " + std::to_string(g->durations.count()) + " " +
                     std::to_string(g->durations.max()));
  EXPECT_THAT(groups, ::testing::ElementsAre(" 1 5", "0x7 2 30", "0x8 1 100",
                                             "0x6f6c6c6548 \"Hello\" 1 10"));
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0),
              HasSubstr("1. 100 ns at +31 ns, thread 1, mark 0x8"));
  EXPECT_THAT(FormatJson(r, SortKey::kTotal, 0), HasSubstr("\"mark\": \"0x8\""));
}

TEST(Report, ACallDecodeErrorsCutCountsOnceAndHasNoDuration) {
  ReportOptions o;
  o.functions = {"slow"};
  o.slowest = 3;
  ReportSink r(o);
  output::SummarySink summary;
  model::TeeSink tee(&r, &summary);
  Feed f(tee);
  f.Begin(1, "main", 0);
  f.Begin(1, "slow", 10);
  f.Instant(1, "[decode error: bad packet]", 30);
  f.End(1, "slow", 10, 30);
  f.End(1, "main", 0, 30);
  f.Instant(1, "[decode error: unknown opcode]", 60);  // after the resync at 40
  f.End(1, "slow", 40, 60, /*inferred=*/true);
  f.End(1, "main", 40, 60, /*inferred=*/true);
  f.InferredBegin(1, "main", 40);
  f.InferredBegin(1, "slow", 40);
  f.End(1, "slow", 80, 110, /*inferred=*/true);  // returns after the resync at 80
  f.Call(1, "main", 120, 130);
  f.End(1, "main", 80, 140, /*inferred=*/true);
  f.InferredBegin(1, "main", 80);
  f.InferredBegin(1, "slow", 80);
  ASSERT_TRUE(r.Finish());
  const FunctionStats* slow = Find(r, "slow");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(slow->calls, 1u);
  EXPECT_EQ(slow->cut, 1u);
  EXPECT_EQ(slow->total_ns, 20u + 20u + 30u);
  EXPECT_EQ(slow->durations.count(), 0u);
  EXPECT_TRUE(r.Slowest().empty());
  const FunctionStats* main_fn = Find(r, "main");
  ASSERT_NE(main_fn, nullptr);
  EXPECT_EQ(main_fn->calls, 2u);  // the cut one, and the whole one at 120
  EXPECT_EQ(main_fn->cut, 1u);
  EXPECT_EQ(main_fn->durations.count(), 1u);
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0), HasSubstr("were cut by decode errors"));
  EXPECT_THAT(FormatJson(r, SortKey::kTotal, 0), HasSubstr("\"cut\": 1"));
  // The decode summary counts the same.
  for (const auto& t : summary.Top(5, false)) {
    if (t.name == "slow") {
      EXPECT_EQ(t.calls, 1u);
      EXPECT_EQ(t.cut, 1u);
    }
  }
}

// Long names (#41: two rows both read `std::thread::_State_impl<std::thread:...`):
// the innermost lists collapse first, so what tells two instantiations
// apart stays as long as it fits; --full-names prints them whole.
TEST(Report, LongNamesAreShortenedInsideTheirLists) {
  EXPECT_EQ(ShortName("risky(int)", 40), "risky(int)");
  const std::string a =
      "std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)(int), int> > "
      ">::_M_run()";
  EXPECT_EQ(ShortName(a, 80),
            "std::thread::_State_impl<std::thread::_Invoker<std::tuple<...> > >::_M_run()");
  EXPECT_EQ(ShortName(a, 70), "std::thread::_State_impl<std::thread::_Invoker<...> >::_M_run()");
  EXPECT_EQ(ShortName(a, 40), "std::thread::_State_impl<...>::_M_run()");
  EXPECT_EQ(ShortName("ns::operator<<(std::ostream&, Foo const&)", 20), "ns::operator<<(...)");
  // Nothing left to collapse: cut in the middle.
  EXPECT_EQ(ShortName("a_very_long_function_name_without_any_list", 20), "a_very_l..._any_list");
  for (const std::string& n : {a, std::string(200, 'x'), std::string("f<<<<(((")})
    EXPECT_LE(ShortName(n, 40).size(), 40u) << n;

  ReportSink r({});
  Feed f(r);
  f.Call(7, a, 100, 300);
  ASSERT_TRUE(r.Finish());
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0),
              HasSubstr("std::thread::_State_impl<...>::_M_run()"));
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0), HasSubstr("--full-names prints them whole"));
  EXPECT_THAT(FormatText(r, SortKey::kTotal, 0, /*full_names=*/true), HasSubstr(a + " "));
}

TEST(Report, JsonHasTheDocumentedFields) {
  ReportSink r({});
  Feed f(r);
  f.Call(7, "x", 100, 300);
  ASSERT_TRUE(r.Finish());
  auto j = nlohmann::json::parse(FormatJson(r, SortKey::kTotal, 0));
  EXPECT_EQ(j["span_ns"], 200);
  ASSERT_EQ(j["functions"].size(), 1u);
  for (const char* k : {"name", "calls", "total_ns", "self_ns", "unseen_start", "min_ns", "p50_ns",
                        "p90_ns", "p99_ns", "max_ns"})
    EXPECT_TRUE(j["functions"][0].contains(k)) << k;
  EXPECT_EQ(j["functions"][0]["p99_ns"], 200);
  EXPECT_FALSE(j["functions"][0].contains("tid"));
}

// The percentages are of the time some frame was on a thread's stack,
// summed over threads: thread 1 has main [0, 100] with a gap-free f, thread
// 2 a lone g [0, 50]: 150 ns in all, 100 of it main's.
TEST(Report, PercentagesAreOfTheTimeFramesWereOnTheThreadsStacks) {
  ReportSink r({});
  Feed f(r);
  f.Begin(1, "main", 0);
  f.Call(1, "f", 10, 40);
  f.End(1, "main", 0, 100);
  f.Call(2, "g", 0, 50);
  ASSERT_TRUE(r.Finish());
  EXPECT_EQ(r.traced_ns(), 150u);
  const std::string text = FormatText(r, SortKey::kTotal, 0);
  EXPECT_THAT(text, HasSubstr("total% and self%: of 150 ns, the time some frame was on a thread's "
                              "stack, summed over the threads"));
  // main: total 100 of 150, self 70 of 150.
  EXPECT_THAT(text, HasSubstr("100 ns   66.7%        70 ns   46.7%"));
  auto j = nlohmann::json::parse(FormatJson(r, SortKey::kTotal, 0));
  EXPECT_EQ(j["traced_ns"], 150);
  EXPECT_EQ(j["functions"][0]["name"], "main");
  EXPECT_DOUBLE_EQ(j["functions"][0]["total_pct"].get<double>(), 66.67);
  EXPECT_DOUBLE_EQ(j["functions"][0]["self_pct"].get<double>(), 46.67);
  // Self times add up to 100%.
  double self = 0;
  for (const auto& fn : j["functions"]) self += fn["self_pct"].get<double>();
  EXPECT_NEAR(self, 100.0, 0.02);
}

const Neighbour* Row(const std::vector<Neighbours>& all, const std::string& fn,
                     const std::string& other) {
  for (const Neighbours& n : all)
    if (n.name == fn)
      for (const Neighbour& row : n.rows)
        if (row.name == other) return &row;
  return nullptr;
}

// main [0,100] { fib [10,60] { fib [20,30]; fib [35,55] { fib [40,50] } };
// leaf [70,80] }; other [100,120] { fib [105,115] }.
struct Recursion {
  explicit Recursion(ReportOptions o) : r(std::move(o)) {
    Feed f(r);
    f.Begin(1, "main", 0);
    f.Begin(1, "fib", 10);
    f.Call(1, "fib", 20, 30);
    f.Begin(1, "fib", 35);
    f.Call(1, "fib", 40, 50);
    f.End(1, "fib", 35, 55);
    f.End(1, "fib", 10, 60);
    f.Call(1, "leaf", 70, 80);
    f.End(1, "main", 0, 100);
    f.Begin(1, "other", 100);
    f.Call(1, "fib", 105, 115);
    f.End(1, "other", 100, 120);
    EXPECT_TRUE(r.Finish());
  }
  ReportSink r;
};

// FUNC as users type it (a name without its parameters, a glob) finds the
// callers and callees of the functions it names, as the rows do.
TEST(Report, CallersAndCalleesOfANameAsTyped) {
  ReportOptions o;
  o.functions = {"fib", "ma*"};
  o.callers = true;
  o.callees = true;
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "main(int, char**)", 0);
  f.Call(1, "fib(int)", 10, 30);
  f.Call(1, "leaf()", 40, 45);
  f.End(1, "main(int, char**)", 0, 50);
  ASSERT_TRUE(r.Finish());
  ASSERT_EQ(r.Callers().size(), 2u);
  EXPECT_EQ(r.Callers()[0].name, "fib(int)");
  ASSERT_EQ(r.Callers()[0].rows.size(), 1u);
  EXPECT_EQ(r.Callers()[0].rows[0].name, "main(int, char**)");
  EXPECT_EQ(r.Callers()[0].rows[0].total_ns, 20u);
  ASSERT_EQ(r.Callees().size(), 2u);
  EXPECT_EQ(r.Callees()[1].name, "main(int, char**)");
  ASSERT_EQ(r.Callees()[1].rows.size(), 2u);
  EXPECT_EQ(r.Callees()[1].rows[0].name, "fib(int)");
  EXPECT_EQ(r.Callees()[1].rows[1].name, "leaf()");
}

// A recursive call's time is its outermost activation's: given to that
// call's caller, so the callers add up to the function's total.
TEST(Report, CallersCountRecursionOnceWithTheOutermostCallsCaller) {
  ReportOptions o;
  o.functions = {"fib", "main"};
  o.callers = true;
  Recursion t(o);
  const auto& callers = t.r.Callers();
  ASSERT_EQ(callers.size(), 2u);
  EXPECT_EQ(callers[0].name, "fib");
  EXPECT_EQ(callers[0].total_ns, 60u);  // 50 + 10
  ASSERT_EQ(callers[0].rows.size(), 3u);
  EXPECT_EQ(callers[0].rows[0].name, "main");
  EXPECT_EQ(callers[0].rows[0].calls, 1u);
  EXPECT_EQ(callers[0].rows[0].total_ns, 50u);
  EXPECT_EQ(callers[0].rows[1].name, "other");
  EXPECT_EQ(callers[0].rows[1].total_ns, 10u);
  EXPECT_EQ(callers[0].rows[2].name, "fib");
  EXPECT_EQ(callers[0].rows[2].calls, 3u);
  EXPECT_EQ(callers[0].rows[2].total_ns, 0u);
  // main is the thread's outermost frame.
  ASSERT_NE(Row(callers, "main", "(root)"), nullptr);
  EXPECT_EQ(Row(callers, "main", "(root)")->total_ns, 100u);
  const std::string text = FormatText(t.r, SortKey::kTotal, 0);
  EXPECT_THAT(text, HasSubstr("Callers of fib (total 60 ns; share: of that total"));
  EXPECT_THAT(text, HasSubstr("  main                                             1        50 ns"
                              "   83.3%\n"));
  auto j = nlohmann::json::parse(FormatJson(t.r, SortKey::kTotal, 0));
  ASSERT_EQ(j["callers"].size(), 2u);
  EXPECT_EQ(j["callers"][0]["name"], "fib");
  EXPECT_EQ(j["callers"][0]["callers"][0]["name"], "main");
  EXPECT_EQ(j["callers"][0]["callers"][0]["calls"], 1);
  EXPECT_EQ(j["callers"][0]["callers"][0]["total_ns"], 50);
  EXPECT_DOUBLE_EQ(j["callers"][0]["callers"][0]["share_pct"].get<double>(), 83.33);
  EXPECT_FALSE(j.contains("callees"));
}

// A callee's frames inside its own frames under the function count once:
// fib under fib is [20,30] and [35,55], not also [40,50].
TEST(Report, CalleesCountACalleeInsideItselfOnce) {
  ReportOptions o;
  o.functions = {"fib", "main"};
  o.callees = true;
  Recursion t(o);
  const auto& callees = t.r.Callees();
  ASSERT_NE(Row(callees, "fib", "fib"), nullptr);
  EXPECT_EQ(Row(callees, "fib", "fib")->calls, 3u);
  EXPECT_EQ(Row(callees, "fib", "fib")->total_ns, 30u);
  EXPECT_EQ(Row(callees, "main", "fib")->total_ns, 50u);
  EXPECT_EQ(Row(callees, "main", "leaf")->total_ns, 10u);
  EXPECT_EQ(Row(callees, "main", "other"), nullptr);
  EXPECT_THAT(FormatText(t.r, SortKey::kTotal, 0), HasSubstr("Callees of main (total 100 ns"));
  auto j = nlohmann::json::parse(FormatJson(t.r, SortKey::kTotal, 0));
  EXPECT_EQ(j["callees"][1]["name"], "main");
  EXPECT_EQ(j["callees"][1]["callees"][0]["name"], "fib");
  EXPECT_DOUBLE_EQ(j["callees"][1]["callees"][0]["share_pct"].get<double>(), 50.0);
}

// Mutual recursion f [0,100] { g [10,90] { f [20,80] { g [30,70] } } }.
TEST(Report, MutualRecursionIsCountedOnceEitherWay) {
  ReportOptions o;
  o.functions = {"f"};
  o.callers = o.callees = true;
  ReportSink r(o);
  Feed feed(r);
  feed.Begin(1, "f", 0);
  feed.Begin(1, "g", 10);
  feed.Begin(1, "f", 20);
  feed.Call(1, "g", 30, 70);
  feed.End(1, "f", 20, 80);
  feed.End(1, "g", 10, 90);
  feed.End(1, "f", 0, 100);
  ASSERT_TRUE(r.Finish());
  EXPECT_EQ(Row(r.Callers(), "f", "(root)")->total_ns, 100u);
  EXPECT_EQ(Row(r.Callers(), "f", "g")->calls, 1u);
  EXPECT_EQ(Row(r.Callers(), "f", "g")->total_ns, 0u);
  EXPECT_EQ(Row(r.Callees(), "f", "g")->calls, 2u);
  EXPECT_EQ(Row(r.Callees(), "f", "g")->total_ns, 80u);
}

// A snapshot begun inside the recursion: main > fib > fib were open (their
// starts not seen). Inferred frames end innermost first and are the callers
// of what ended with no seen caller before them: fib [10,20] ends under the
// inner fib (ends 30), fib [40,50] under the outer one (ends 60).
TEST(Report, InferredFramesAreTheCallersOfWhatEndedInsideThem) {
  ReportOptions o;
  o.functions = {"fib"};
  o.callers = o.callees = true;
  ReportSink r(o);
  Feed f(r);
  f.Call(1, "fib", 10, 20);
  f.End(1, "fib", 0, 30, /*inferred=*/true);
  f.Call(1, "fib", 40, 50);
  f.End(1, "fib", 0, 60, /*inferred=*/true);
  f.End(1, "main", 0, 100, /*inferred=*/true);
  f.InferredBegin(1, "main", 0);
  f.InferredBegin(1, "fib", 0);
  f.InferredBegin(1, "fib", 0);
  ASSERT_TRUE(r.Finish());
  ASSERT_EQ(r.Named()[0].total_ns, 60u);
  // Every call's time (Call::total_ns) with its caller: they add up to 60.
  const Neighbour* main = Row(r.Callers(), "fib", "main");
  const Neighbour* fib = Row(r.Callers(), "fib", "fib");
  ASSERT_NE(main, nullptr);
  ASSERT_NE(fib, nullptr);
  EXPECT_EQ(main->calls, 1u);
  EXPECT_EQ(fib->calls, 3u);
  EXPECT_EQ(main->total_ns + fib->total_ns, 60u);
  // fib under fib: [0,30] (the inner inferred frame) and [40,50].
  ASSERT_NE(Row(r.Callees(), "fib", "fib"), nullptr);
  EXPECT_EQ(Row(r.Callees(), "fib", "fib")->calls, 3u);
  EXPECT_EQ(Row(r.Callees(), "fib", "fib")->total_ns, 40u);
}

// A frame with no seen caller encloses frames of the same edge: fib
// [10,50] { fib [20,30] } ends inside an inferred fib [0,60] that main
// called. fib under fib is [10,50], not 40 + 10.
TEST(Report, AFrameWithNoSeenCallerEnclosesItsEdgesFramesOnce) {
  ReportOptions o;
  o.functions = {"fib"};
  o.callers = o.callees = true;
  ReportSink r(o);
  Feed f(r);
  f.Begin(1, "fib", 10);
  f.Call(1, "fib", 20, 30);
  f.End(1, "fib", 10, 50);
  f.End(1, "fib", 0, 60, /*inferred=*/true);
  f.End(1, "main", 0, 100, /*inferred=*/true);
  f.InferredBegin(1, "main", 0);
  f.InferredBegin(1, "fib", 0);
  ASSERT_TRUE(r.Finish());
  ASSERT_EQ(r.Named()[0].total_ns, 60u);
  ASSERT_NE(Row(r.Callees(), "fib", "fib"), nullptr);
  EXPECT_EQ(Row(r.Callees(), "fib", "fib")->calls, 2u);
  EXPECT_EQ(Row(r.Callees(), "fib", "fib")->total_ns, 40u);
  EXPECT_EQ(Row(r.Callers(), "fib", "main")->total_ns + Row(r.Callers(), "fib", "fib")->total_ns,
            60u);
}

TEST(Report, SortKeysAreSpelledAsDocumented) {
  for (const char* k : {"total", "self", "calls", "p99", "max", "name"})
    EXPECT_TRUE(SortKeyFrom(k)) << k;
  EXPECT_FALSE(SortKeyFrom("speed"));
}

// --diff: A (the baseline) main { f; g; h }, B main { f; f; k }.
// Totals: main 100 -> 200, f 20 -> 90, g 20 -> gone, h 10 -> gone, k new 30.
struct TwoTraces {
  explicit TwoTraces(ReportOptions o = {}) : a(o), b(o) {
    Feed fa(a);
    fa.Begin(1, "main", 0);
    fa.Call(1, "f", 10, 30);
    fa.Call(1, "g", 40, 60);
    fa.Call(1, "h", 70, 80);
    fa.End(1, "main", 0, 100);
    Feed fb(b);
    fb.Begin(2, "main", 0);
    fb.Call(2, "f", 10, 90);
    fb.Call(2, "f", 100, 110);
    fb.Call(2, "k", 120, 150);
    fb.End(2, "main", 0, 200);
    EXPECT_TRUE(a.Finish());
    EXPECT_TRUE(b.Finish());
  }
  std::vector<std::string> Order(SortKey key, size_t limit = 0) const {
    std::vector<std::string> names;
    for (const DiffRow& r : DiffFunctions(a, b, key, limit)) names.push_back(r.name);
    return names;
  }
  ReportSink a, b;
};

TEST(ReportDiff, RowsHoldBothSidesAndTheChangeOfTotal) {
  TwoTraces t;
  const auto rows = DiffFunctions(t.a, t.b, SortKey::kTotal, 0);
  ASSERT_EQ(rows.size(), 5u);
  const DiffRow& f = rows[1];
  ASSERT_EQ(f.name, "f");
  ASSERT_NE(f.a, nullptr);
  ASSERT_NE(f.b, nullptr);
  EXPECT_EQ(f.a->calls, 1u);
  EXPECT_EQ(f.b->calls, 2u);
  EXPECT_EQ(f.a->total_ns, 20u);
  EXPECT_EQ(f.b->total_ns, 90u);
  EXPECT_EQ(f.total_change_ns(), 70);
  EXPECT_EQ(rows[0].name, "main");
  EXPECT_EQ(rows[0].a->self_ns, 50u);
  EXPECT_EQ(rows[0].b->self_ns, 80u);
}

TEST(ReportDiff, NewAndGoneFunctionsHaveOneSideAndCountTheOtherAsZero) {
  TwoTraces t;
  for (const DiffRow& r : DiffFunctions(t.a, t.b, SortKey::kName, 0)) {
    if (r.name == "k") {
      EXPECT_EQ(r.a, nullptr);
      ASSERT_NE(r.b, nullptr);
      EXPECT_EQ(r.total_change_ns(), 30);
    } else if (r.name == "g" || r.name == "h") {
      EXPECT_EQ(r.b, nullptr) << r.name;
      EXPECT_EQ(r.total_change_ns(), r.name == "g" ? -20 : -10);
    }
  }
  const std::string text = FormatDiffText({"a.fxt", &t.a}, {"b.fxt", &t.b}, SortKey::kTotal, 0);
  auto line = [&text](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? std::string()
                                   : text.substr(at + 1, text.find('\n', at + 1) - at);
  };
  EXPECT_THAT(line("k"), HasSubstr("+30 ns      new"));
  EXPECT_THAT(line("g"), HasSubstr("-20 ns     gone"));
  EXPECT_THAT(line("f"), HasSubstr("+70 ns  +350.0%"));
  EXPECT_THAT(line("main"), HasSubstr("+100 ns  +100.0%"));
  EXPECT_THAT(text, HasSubstr("('-': the function is not in that trace"));
}

TEST(ReportDiff, SortedByTheAbsoluteChangeOfTheSortKeyAndLimited) {
  TwoTraces t;
  using V = std::vector<std::string>;
  EXPECT_EQ(t.Order(SortKey::kTotal), (V{"main", "f", "k", "g", "h"}));
  // self: f +70, k +30 and main +30 (ties by name), g -20, h -10.
  EXPECT_EQ(t.Order(SortKey::kSelf), (V{"f", "k", "main", "g", "h"}));
  // calls: main 1 -> 1 changes least.
  EXPECT_EQ(t.Order(SortKey::kCalls).back(), "main");
  EXPECT_EQ(t.Order(SortKey::kName), (V{"f", "g", "h", "k", "main"}));
  EXPECT_EQ(t.Order(SortKey::kTotal, 2), (V{"main", "f"}));
}

TEST(ReportDiff, TextNamesBothTracesAndTheBaseline) {
  ReportOptions o;
  o.functions = {"f", "absent"};
  TwoTraces t(o);
  const std::string text =
      FormatDiffText({"/x/a.fxt", &t.a}, {"/y/b.json", &t.b}, SortKey::kTotal, 0);
  EXPECT_THAT(text, HasSubstr("A (baseline) /x/a.fxt: span 100 ns, 1 thread(s), 4 calls\n"));
  EXPECT_THAT(text, HasSubstr("B            /y/b.json: span 200 ns, 1 thread(s), 4 calls\n"));
  EXPECT_THAT(text, HasSubstr("calls A   calls B"));
  EXPECT_THAT(text, HasSubstr("p99 B"));
  // The named function's histograms side by side.
  EXPECT_THAT(text, HasSubstr("\nf: 1 calls in A, 2 in B, durations:\n"));
  EXPECT_THAT(text, HasSubstr("  [      16 ns,       32 ns) #########################        1 "
                              "                                 0\n"));
  EXPECT_THAT(text, HasSubstr("\nabsent: 0 calls in A, 0 in B (in neither trace)\n"));
}

TEST(ReportDiff, JsonHasTheDocumentedFields) {
  TwoTraces t;
  auto j =
      nlohmann::json::parse(FormatDiffJson({"a.fxt", &t.a}, {"b.fxt", &t.b}, SortKey::kTotal, 3));
  EXPECT_EQ(j["a"]["path"], "a.fxt");
  EXPECT_EQ(j["a"]["span_ns"], 100);
  EXPECT_EQ(j["b"]["span_ns"], 200);
  for (const char* k : {"threads", "calls", "outside_window"}) EXPECT_TRUE(j["b"].contains(k)) << k;
  ASSERT_EQ(j["functions"].size(), 3u);
  const auto& f = j["functions"][1];
  EXPECT_EQ(f["name"], "f");
  EXPECT_EQ(f["total_change_ns"], 70);
  EXPECT_EQ(f["a"],
            (nlohmann::json{
                {"calls", 1}, {"total_ns", 20}, {"self_ns", 20}, {"p50_ns", 20}, {"p99_ns", 20}}));
  EXPECT_EQ(f["b"]["calls"], 2);
  const auto& k = j["functions"][2];
  EXPECT_EQ(k["name"], "k");
  EXPECT_TRUE(k["a"].is_null());
  EXPECT_EQ(k["b"]["total_ns"], 30);
  EXPECT_EQ(k["total_change_ns"], 30);
  auto gone = nlohmann::json::parse(
      FormatDiffJson({"a.fxt", &t.a}, {"b.fxt", &t.b}, SortKey::kName, 0))["functions"][1];
  EXPECT_EQ(gone["name"], "g");
  EXPECT_TRUE(gone["b"].is_null());
  EXPECT_EQ(gone["total_change_ns"], -20);
}

TEST(ReportDiff, DiffFoldedHasBothSelfTimesPerStack) {
  ReportOptions o;
  o.folded = true;
  TwoTraces t(o);
  EXPECT_EQ(DiffFolded(t.a, t.b),
            "main 50 80\n"
            "main;f 20 90\n"
            "main;g 20 0\n"
            "main;h 10 0\n"
            "main;k 0 30\n");
}

}  // namespace
}  // namespace ptsnap::report
