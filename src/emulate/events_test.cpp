#include "emulate/events.h"

#include "emulate/emulate.h"

#include <gtest/gtest.h>

#include "ptsnap/result.h"
#include "tests/support/result_matchers.h"
#include "trace/perf_record.h"

namespace ptsnap::emulate {
namespace {

TEST(Events, BecomeTheRecordsTheKernelWouldWrite) {
  PluginEvents ev;
  ASSERT_TRUE(
      ParseEvents("comm 0 10 10 1 prog\n"
                  "mmap2 5 10 10 4194304 8192 4096 254 0 77 5 2 /bin/my prog\n"
                  "itrace 0 10 10\n"
                  "fork 90 10 10 11 10\n"
                  "exit 99 10 10 11 11\n"
                  "stream 1 10 10 1 1234 99 0 0 pt-10-10-1.pt\n"
                  "snapshot 1 100 10 trigger fib\n"
                  "done 120\n",
                  &ev));
  ASSERT_EQ(ev.records.size(), 5u);
  EXPECT_TRUE(ev.done);
  const auto& mm = std::get<trace::Mmap2>(ev.records[1].body);
  EXPECT_EQ(mm.addr, 0x400000u);
  EXPECT_EQ(mm.pgoff, 4096u);
  EXPECT_EQ(mm.filename, "/bin/my prog");
  EXPECT_EQ(ev.records[1].sample_id.time, 5u);
  // Round trip through the trace module's serializer and parser.
  std::string bytes;
  for (const auto& r : ev.records) bytes += trace::SerializeRecord(r);
  auto parsed = trace::ParseRecords(std::as_bytes(std::span(bytes)));
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->records.size(), 5u);
  EXPECT_EQ(parsed->records[0].type, PERF_RECORD_COMM);
  EXPECT_TRUE(std::get<trace::Comm>(parsed->records[0].body).exec);
  EXPECT_EQ(parsed->records[3].type, PERF_RECORD_FORK);
  EXPECT_EQ(parsed->records[4].type, PERF_RECORD_EXIT);
  ASSERT_EQ(ev.streams.size(), 1u);
  EXPECT_TRUE(ev.streams[0].wrapped);
  EXPECT_EQ(ev.streams[0].insns, 1234u);
  ASSERT_EQ(ev.snapshots.size(), 1u);
  EXPECT_EQ(ev.snapshots[0].reason, "trigger");
  EXPECT_EQ(ev.snapshots[0].detail, "fib");
}

TEST(Events, MalformedLineIsAnErrorNamingIt) {
  PluginEvents ev;
  auto r = ParseEvents("comm 0 10 10 1 prog\nmmap2 x\n", &ev);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseEvents("stream 1 2 3 0 5 6 0 0 ../escape.pt\n", &ev));
  EXPECT_FALSE(ParseEvents("bogus 1\n", &ev));
}

TEST(Events, TornLastLineIsIgnored) {
  PluginEvents ev;
  ASSERT_TRUE(ParseEvents("itrace 0 10 10\nmmap2 5 10", &ev));
  EXPECT_EQ(ev.records.size(), 1u);
}

}  // namespace
}  // namespace ptsnap::emulate

namespace ptsnap::emulate {
namespace {

// --timer-resolution under --emulate resolves as on a Kaby Lake with every
// timing feature (docs/emulation.md, "Time").
TEST(EmulatedPtAttr, PresetsResolveAsOnHardware) {
  record::TimerResolution t;
  t.preset = "normal";
  auto normal = EmulatedPtAttr(t);
  ASSERT_TRUE(normal.has_value());
  EXPECT_TRUE(normal.value().timing.tsc);
  EXPECT_TRUE(normal.value().timing.mtc);
  EXPECT_TRUE(normal.value().timing.cyc);
  EXPECT_EQ(normal.value().timing.mtc_period, 0u);
  EXPECT_EQ(normal.value().timing.cyc_thresh, 1u);
  EXPECT_EQ(normal.value().timing.psb_period, 3u);
  EXPECT_FALSE(normal.value().timing.noretcomp);
  t.preset = "low";
  auto low = EmulatedPtAttr(t);
  ASSERT_TRUE(low.has_value());
  EXPECT_TRUE(low.value().timing.mtc);
  EXPECT_FALSE(low.value().timing.cyc);
  EXPECT_EQ(low.value().timing.mtc_period, 3u);
  t.preset = "high";
  auto high = EmulatedPtAttr(t);
  ASSERT_TRUE(high.has_value());
  EXPECT_TRUE(high.value().timing.cyc);
  EXPECT_TRUE(high.value().timing.noretcomp);
}

TEST(EmulatedPtAttr, UnsupportedValuesAreTheHardwareErrors) {
  record::TimerResolution t;
  t.preset = "custom";
  t.mtc_period = 5;
  auto r = EmulatedPtAttr(t);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().ToString().find("mtc_period=5 is not supported by this CPU"),
            std::string::npos)
      << r.error().ToString();
  EXPECT_NE(r.error().ToString().find("0,3,6,9"), std::string::npos);
}

}  // namespace
}  // namespace ptsnap::emulate
