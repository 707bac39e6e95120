#include "pipeline/track_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ptsnap::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// Every process and thread name it was given, as "P pid name" / "T pid tid name".
class NameSink : public model::SliceSink {
 public:
  void OnProcess(int32_t pid, const std::string& name) override {
    names.push_back("P " + std::to_string(pid) + " " + name);
  }
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override {
    names.push_back("T " + std::to_string(pid) + " " + std::to_string(tid) + " " + name);
  }
  void OnSlice(const model::Slice&) override {}
  Result<void> Finish() override { return Ok(); }
  std::vector<std::string> names;
};

trace::Record CommRecord(uint32_t tid, std::string comm, uint64_t time) {
  trace::Record r;
  r.sample_id.time = time;
  r.body = trace::Comm{.pid = tid, .tid = tid, .comm = std::move(comm)};
  return r;
}

trace::Record ExitRecord(uint32_t tid, uint64_t time) {
  trace::Record r;
  r.sample_id.time = time;
  r.body = trace::Task{.exit = true, .pid = tid, .tid = tid};
  return r;
}

TEST(TrackNames, SidebandThreadsKeepTheLastCommAndTheExitTimes) {
  const std::vector<trace::Record> records = {CommRecord(7, "sh", 500),
                                              CommRecord(7, "server", 300),
                                              CommRecord(8, "worker", 900), ExitRecord(8, 1200)};
  const SidebandThreads t = ReadSidebandThreads(records);
  // The last in record order, not the latest in time.
  EXPECT_THAT(t.comms, ElementsAre(Pair(7, "server"), Pair(8, "worker")));
  EXPECT_THAT(t.exits, ElementsAre(Pair(8, 1200u)));
  EXPECT_EQ(t.earliest_ns, 300u);
  EXPECT_EQ(ReadSidebandThreads({}).earliest_ns, UINT64_MAX);
}

TEST(TrackNames, ProcessNameIsTheCommandForTheFirstPidElseItsComm) {
  trace::Manifest m;
  m.command = {"./server", "--port", "80"};
  m.pids = {42};
  const std::map<int32_t, std::string> comms = {{42, "server"}, {43, "helper"}};
  EXPECT_EQ(ProcessTrackName(m, comms, 42), "./server --port 80 [pid=42]");
  EXPECT_EQ(ProcessTrackName(m, comms, 43), "helper [pid=43]");
  EXPECT_EQ(ProcessTrackName(m, comms, 0), "cpus [pid=0]");
  EXPECT_EQ(ProcessTrackName(m, comms, 44), "process [pid=44]");
  m.command.clear();  // attached: no command line
  EXPECT_EQ(ProcessTrackName(m, comms, 42), "server [pid=42]");
}

TEST(TrackNames, EachProcessAndThreadIsNamedOnceInStreamOrder) {
  trace::Manifest m;
  const std::map<int32_t, std::string> comms = {{10, "main"}, {11, "worker"}};
  NameSink sink;
  TrackNamer namer(m, comms, sink);
  namer.NameStream({.pid = 10, .tid = 10, .snapshot = 1});
  namer.NameStream({.pid = 10, .tid = 11, .snapshot = 1});
  namer.NameStream({.pid = 10, .tid = 11, .snapshot = 2});  // a later snapshot: no new names
  namer.NameStream({.pid = 12, .tid = -1});                 // per-process: the pid's track
  namer.NameStream({.pid = -1, .tid = -1});                 // neither: pid 0
  EXPECT_THAT(sink.names, ElementsAre("P 10 main [pid=10]", "T 10 10 main", "T 10 11 worker",
                                      "P 12 process [pid=12]", "T 12 12 thread", "P 0 cpus [pid=0]",
                                      "T 0 0 thread"));
}

TEST(TrackNames, CpuStreamNamesItsThreadsAndItsOwnTrack) {
  trace::Manifest m;
  const std::map<int32_t, std::string> comms = {{10, "main"}, {20, "other"}};
  NameSink sink;
  TrackNamer namer(m, comms, sink);
  namer.NameCpuStream(3, {{.pid = 10, .tid = 10}, {.pid = 0, .tid = -4}, {.pid = 20, .tid = 21}});
  namer.NameCpuStream(4, {{.pid = 10, .tid = 10}});  // on another CPU too: named once
  EXPECT_THAT(sink.names, ElementsAre("P 10 main [pid=10]", "T 10 10 main", "P 0 cpus [pid=0]",
                                      "T 0 -4 cpu 3", "P 20 other [pid=20]", "T 20 21 thread"));
}

}  // namespace
}  // namespace ptsnap::pipeline
