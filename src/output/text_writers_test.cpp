#include "output/text_writers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "decode/pt_decoder.h"  // kPowerPwre
#include "decode/symbols.h"
#include "decode/test_stream.h"
#include "output/summary.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::output {
namespace {

using ::ptsnap::testing::HasValue;

model::Slice S(model::Slice::Kind k, uint64_t ts, const std::string* name) {
  model::Slice s;
  s.kind = k;
  s.pid = 7;
  s.tid = 8;
  s.ts = ts;
  s.name = name;
  return s;
}

TEST(TextWritersTest, JsonFileAndLineArgsFromDwarf) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.json";
  decode::Symbolizer symbolizer;
  uint64_t target = decode::testing::MapSrcline(&symbolizer, 7, PTSNAP_DECODE_SRCLINE);
  ASSERT_NE(target, 0u);
  std::string fn = "srcline_target", other = "other";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    JsonWriter w(out->get());
    w.SetSourceLookup([&](int32_t pid, uint64_t a) { return symbolizer.SourceLine(pid, a); });
    w.OnProcess(7, "srcline [pid=7]");
    w.OnThread(7, 8, "srcline");
    auto e = S(model::Slice::kEnd, 2000, &fn);
    e.begin_ts = 1000;
    e.address = target;
    w.OnSlice(e);
    auto o = S(model::Slice::kEnd, 3000, &other);
    o.begin_ts = 2500;
    o.address = 0x1000;
    w.OnSlice(o);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto text = base::ReadFile(path);
  ASSERT_THAT(text, HasValue());
  nlohmann::json j = nlohmann::json::parse(*text);
  auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2]["name"], "srcline_target");
  EXPECT_EQ(std::filesystem::path(ev[2]["args"]["file"].get<std::string>()).filename(),
            "srcline.c");
  EXPECT_EQ(ev[2]["args"]["line"], 5);
  EXPECT_TRUE(ev[2]["args"].contains("address"));
  EXPECT_EQ(ev[3]["name"], "other");
  EXPECT_FALSE(ev[3]["args"].contains("file"));
  EXPECT_FALSE(ev[3]["args"].contains("line"));
}

TEST(TextWritersTest, JsonIsObjectFormWithXAndMEvents) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.json";
  std::string a = "a\"quoted\"", b = "b", bad = "bad\xff utf8";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    JsonWriter w(out->get());
    w.OnProcess(7, "prog [pid=7]");
    w.OnThread(7, 8, "prog");
    w.OnSlice(S(model::Slice::kBegin, 1000, &a));
    w.OnSlice(S(model::Slice::kBegin, 1500, &b));
    auto eb = S(model::Slice::kEnd, 2500, &b);
    eb.begin_ts = 1500;
    w.OnSlice(eb);
    auto ea = S(model::Slice::kEnd, 3001, &a);
    ea.begin_ts = 1000;
    ea.inferred = true;
    w.OnSlice(ea);
    w.OnSlice(S(model::Slice::kInstant, 3001, &bad));
    auto c = S(model::Slice::kCounter, 3002, &b);
    c.value = 3600;
    w.OnSlice(c);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto text = base::ReadFile(path);
  ASSERT_THAT(text, HasValue());
  nlohmann::json j = nlohmann::json::parse(*text);  // throws (fails the test) if invalid
  ASSERT_TRUE(j.is_object());
  auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[0]["ph"], "M");
  EXPECT_EQ(ev[0]["name"], "process_name");
  EXPECT_EQ(ev[0]["args"]["name"], "prog [pid=7]");
  EXPECT_EQ(ev[1]["name"], "thread_name");
  EXPECT_EQ(ev[2]["ph"], "X");
  EXPECT_EQ(ev[2]["name"], "b");
  EXPECT_DOUBLE_EQ(ev[2]["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(ev[2]["dur"].get<double>(), 1.0);
  EXPECT_EQ(ev[3]["name"], "a\"quoted\"");
  EXPECT_DOUBLE_EQ(ev[3]["dur"].get<double>(), 2.001);
  EXPECT_EQ(ev[3]["args"]["inferred_start_time"], true);
  EXPECT_EQ(ev[4]["ph"], "i");
  EXPECT_EQ(ev[5]["ph"], "C");  // a counter: the core clock
  EXPECT_EQ(ev[5]["args"]["value"], 3600);
}

// A "[C-state Cn]" frame is one X event whose args hold the entry's state
// (an MWAIT's hint here: C2, sub-state 1) and the PWRX's that ended it.
TEST(TextWritersTest, JsonCStateFrameCarriesItsStatesAsArgs) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.json";
  std::string idle = "[C-state C2]";
  {
    auto out = OutputFile::Open(path);
    JsonWriter w(out->get());
    auto b = S(model::Slice::kBegin, 1000, &idle);
    b.idle = true;
    b.value = 0x11;
    w.OnSlice(b);
    auto e = S(model::Slice::kEnd, 2000, &idle);
    e.idle = true;
    e.begin_ts = 1000;
    e.value = b.value;
    e.power_exit = model::kPowerExitSeen | 0xf | 2 << 8 | 1 << 16 | 1 << 17;
    w.OnSlice(e);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  nlohmann::json j = nlohmann::json::parse(*base::ReadFile(path));
  auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["ph"], "X");
  EXPECT_EQ(ev[0]["args"],
            nlohmann::json::parse(R"({"c_state":"C2","sub_state":"1","last_c_state":"C0",
                                      "deepest_c_state":"C3","wake":"interrupt,store"})"));
}

// What the times are (#41): the JSON file says it in "otherData", and a
// virtual clock also in the process names Perfetto shows.
TEST(TextWritersTest, JsonSaysWhatTheClockIs) {
  for (bool in_names : {false, true}) {
    ::ptsnap::testing::TempDir dir;
    auto path = dir.path() / "t.json";
    {
      auto out = OutputFile::Open(path);
      ASSERT_THAT(out, HasValue());
      JsonWriter w(out->get());
      w.SetClock("virtual clock", in_names);
      w.OnProcess(7, "prog [pid=7]");
      ASSERT_THAT(w.Finish(), HasValue());
    }
    auto text = base::ReadFile(path);
    ASSERT_THAT(text, HasValue());
    nlohmann::json j = nlohmann::json::parse(*text);
    EXPECT_EQ(j["otherData"]["clock"], "virtual clock");
    EXPECT_EQ(j["traceEvents"][0]["args"]["name"],
              in_names ? "prog [pid=7] (virtual clock)" : "prog [pid=7]");
  }
}

TEST(TextWritersTest, EventsLines) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.events";
  std::string a = "a", u = "[unknown]", dso = "/bin/prog", clock = "[core clock MHz]",
              idle = "[C-state C6]";
  {
    auto out = OutputFile::Open(path);
    EventsWriter w(out->get());
    w.OnProcess(7, "prog [pid=7]");
    w.OnThread(7, 8, "prog");
    w.OnSlice(S(model::Slice::kBegin, 10, &a));
    auto e = S(model::Slice::kEnd, 20, &a);
    e.begin_ts = 10;
    w.OnSlice(e);
    auto c = S(model::Slice::kBegin, 21, &a);
    c.via = model::Via::kCall;
    c.dso = &dso;
    w.OnSlice(c);
    auto r = S(model::Slice::kEnd, 22, &a);
    r.begin_ts = 21;
    r.via = model::Via::kJump;
    r.dso = &dso;
    w.OnSlice(r);
    auto x = S(model::Slice::kComplete, 5, &u);
    x.end_ts = 9;
    x.inferred = true;
    w.OnSlice(x);
    auto k = S(model::Slice::kCounter, 23, &clock);
    k.value = 2000;
    w.OnSlice(k);
    // A "[C-state Cn]" frame: the PWRE's state where it begins, the PWRX's where it ends.
    auto ib = S(model::Slice::kBegin, 30, &idle);
    ib.idle = true;
    ib.via = model::Via::kIdle;
    ib.value = decode::kPowerPwre | 5;
    w.OnSlice(ib);
    auto ie = S(model::Slice::kEnd, 40, &idle);
    ie.idle = true;
    ie.via = model::Via::kResume;
    ie.begin_ts = 30;
    ie.value = ib.value;
    ie.power_exit = model::kPowerExitSeen | 5 | 5 << 8 | 1 << 17;
    w.OnSlice(ie);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  EXPECT_EQ(*base::ReadFile(path),
            "# ptsnap events v3\nP 7 prog [pid=7]\nT 7 8 prog\n10 7 8 B a\n20 7 8 E a begin=10\n"
            "21 7 8 B a via=call dso=/bin/prog\n22 7 8 E a begin=21 via=jump dso=/bin/prog\n"
            "5 7 8 X [unknown] end=9 inferred\n23 7 8 C [core clock MHz] value=2000\n"
            "30 7 8 B [C-state C6] via=idle c_state=C6 sub_state=0 hardware_initiated=false\n"
            "40 7 8 E [C-state C6] begin=30 via=resume last_c_state=C6 deepest_c_state=C6 "
            "wake=store\n");
}

TEST(SummaryTest, SelfAndTotalTime) {
  SummarySink s;
  std::string f = "f", g = "g", rec = "rec";
  s.OnThread(7, 8, "t");
  auto end = [&](const std::string* n, uint64_t b, uint64_t e, bool inferred = false) {
    auto x = S(model::Slice::kEnd, e, n);
    x.begin_ts = b;
    x.inferred = inferred;
    s.OnSlice(x);
  };
  s.OnSlice(S(model::Slice::kBegin, 0, &f));
  s.OnSlice(S(model::Slice::kBegin, 10, &g));
  end(&g, 10, 40);
  s.OnSlice(S(model::Slice::kBegin, 50, &rec));
  s.OnSlice(S(model::Slice::kBegin, 60, &rec));
  end(&rec, 60, 70);
  end(&rec, 50, 80);
  end(&f, 0, 100);
  auto total = s.Top(3, false);
  auto self = s.Top(3, true);
  ASSERT_EQ(total.size(), 3u);
  EXPECT_EQ(total[0].name, "f");
  EXPECT_EQ(total[0].total_ns, 100u);
  EXPECT_EQ(total[1].name, "g");
  EXPECT_EQ(total[2].name, "rec");
  EXPECT_EQ(total[2].total_ns, 30u);  // recursion counted once
  EXPECT_EQ(total[2].calls, 2u);
  EXPECT_EQ(self[0].name, "f");
  EXPECT_EQ(self[0].self_ns, 40u);
  EXPECT_EQ(self[2].name, "rec");
  EXPECT_EQ(self[2].self_ns, 30u);
  EXPECT_EQ(s.first_ns(), 0u);
  EXPECT_EQ(s.last_ns(), 100u);
  EXPECT_EQ(FormatDuration(1500), "1.500 us");
}

// ld.so's _start and the program's are two functions of one name: two rows,
// FILE:NAME, as `ptsnap report` shows them (the summary once merged them:
// "_start 2 calls" beside report's two rows, in #41's no-docs session).
TEST(SummaryTest, OneNameInTwoFilesIsTwoRows) {
  SummarySink s;
  std::string start = "_start", main_fn = "main";
  std::string ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", prog = "/tmp/prog";
  s.OnThread(7, 8, "t");
  auto frame = [&](const std::string* n, const std::string* dso, uint64_t b, uint64_t e) {
    auto x = S(model::Slice::kBegin, b, n);
    x.dso = dso;
    s.OnSlice(x);
    auto y = S(model::Slice::kEnd, e, n);
    y.begin_ts = b;
    y.dso = dso;
    s.OnSlice(y);
  };
  frame(&start, &ld, 0, 10);
  frame(&start, &prog, 20, 100);
  frame(&main_fn, &prog, 120, 130);
  auto total = s.Top(5, false);
  ASSERT_EQ(total.size(), 3u);
  EXPECT_EQ(total[0].name, "prog:_start");
  EXPECT_EQ(total[0].calls, 1u);
  EXPECT_EQ(total[0].total_ns, 80u);
  EXPECT_EQ(total[1].name, "ld-linux-x86-64.so.2:_start");
  EXPECT_EQ(total[2].name, "main");  // one file: the name alone
}

}  // namespace
}  // namespace ptsnap::output
