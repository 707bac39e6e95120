// A minimal ptsnap agent: records PROGRAM, snapshots when a line arrives on
// stdin, decodes that snapshot while the program still runs, prints the
// five functions with the most total time, then stops.
//
//   agent PROGRAM [ARGS...]         (AGENT_HARDWARE=1: Intel PT, else emulated)
//   c++ -std=c++20 agent.cpp $(pkg-config --cflags --libs ptsnap) -o agent
#include <ptsnap/decoder.h>
#include <ptsnap/recording.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

class Printer final : public ptsnap::RecordingListener {
 public:
  void OnEvent(const ptsnap::RecordingEvent& e) override {
    if (e.kind == ptsnap::RecordingEvent::Kind::kWarning ||
        e.kind == ptsnap::RecordingEvent::Kind::kDataLost)
      std::fprintf(stderr, "agent: warning: %.*s\n", static_cast<int>(e.message.size()),
                   e.message.data());
  }
};

struct Stats {
  uint64_t calls = 0, total_ns = 0;
};

class Counter final : public ptsnap::DecodeListener {
 public:
  void OnSlice(const ptsnap::DecodedSlice& s) override {
    Stats& st = by_name[std::string(s.name)];
    ++st.calls;
    st.total_ns += s.end_ns - s.begin_ns;
    ++slices;
  }
  std::map<std::string, Stats> by_name;
  uint64_t slices = 0;
};

int Fail(const char* what, const ptsnap::Error& e) {
  std::fprintf(stderr, "agent: %s: %s\n", what, e.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: agent PROGRAM [ARGS...]\n");
    return 2;
  }
  ptsnap::RecordingOptions options;
  options.command.assign(argv + 1, argv + argc);
  const char* hw = std::getenv("AGENT_HARDWARE");
  options.collection = hw != nullptr && std::string(hw) == "1" ? ptsnap::Collection::kHardware
                                                               : ptsnap::Collection::kEmulated;
  if (const char* dir = std::getenv("AGENT_TRACE_DIR")) options.trace_dir = dir;

  Printer printer;
  auto rec = ptsnap::Recording::Create(options, &printer);
  if (!rec) return Fail("cannot record", rec.error());
  if (auto started = rec->Start(); !started) return Fail("start", started.error());
  std::printf("recording %s into %s; send a line to snapshot\n", argv[1], rec->trace_dir().c_str());
  std::fflush(stdout);

  std::string line;
  std::getline(std::cin, line);  // "snap" (or end of input)
  auto snap = rec->Snapshot("stdin");
  if (!snap) return Fail("snapshot", snap.error());
  std::printf("snapshot %u taken\n", snap->seq);

  // The snapshot is complete in the trace directory already: decode it
  // while the recording goes on.
  auto decoder = ptsnap::Decoder::Open(rec->trace_dir(), {.snapshot = snap->seq});
  if (!decoder) return Fail("open", decoder.error());
  Counter counter;
  auto summary = decoder->Decode(counter);
  if (!summary) return Fail("decode", summary.error());

  std::vector<std::pair<std::string, Stats>> top(counter.by_name.begin(), counter.by_name.end());
  std::sort(top.begin(), top.end(),
            [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  std::printf("%llu slices in snapshot %u; hottest functions by total time:\n",
              static_cast<unsigned long long>(counter.slices), snap->seq);
  for (size_t i = 0; i < top.size() && i < 5; ++i)
    std::printf("  %-30s %10llu calls %14llu ns\n", top[i].first.c_str(),
                static_cast<unsigned long long>(top[i].second.calls),
                static_cast<unsigned long long>(top[i].second.total_ns));

  auto result = rec->Stop();
  if (!result) return Fail("stop", result.error());
  std::printf("recording stopped; program exited with status %d\n", result->program_status);
  return 0;
}
