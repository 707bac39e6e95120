#include "report/trace_file.h"

#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "output/fxt_reader.h"
#include "output/fxt_writer.h"

namespace ptsnap::report {

Result<TraceFileKind> SniffTraceFile(const std::filesystem::path& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (f == nullptr) return Error::FromErrno("opening " + path.string());
  char head[64];
  const int got = gzread(f.get(), head, sizeof head);
  if (got < 0) return Error(path.string() + ": corrupt gzip data");
  const auto n = static_cast<size_t>(got);
  if (n >= 8 && std::memcmp(head, "\x10\x00\x04\x46\x78\x54\x16\x00", 8) == 0)
    return TraceFileKind::kFxt;
  for (size_t i = 0; i < n; ++i) {
    if (std::isspace(static_cast<unsigned char>(head[i])) != 0) continue;
    return head[i] == '{' || head[i] == '[' ? TraceFileKind::kJson : TraceFileKind::kOther;
  }
  return TraceFileKind::kOther;
}

namespace {

// Turns FXT events back into the model's slices, per thread.
class FxtSlices {
 public:
  explicit FxtSlices(model::SliceSink* sink) : sink_(sink) {}

  void OnEvent(const output::FxtEvent& e) {
    const auto pid = static_cast<int32_t>(e.pid);
    const auto tid = static_cast<int32_t>(e.tid);
    if (pid == output::kTriggerTrackPid) return;  // trigger hits: not the program's
    Thread& t = threads_[tid];
    if (!t.seen_since_segment) {
      t.seen_since_segment = true;
      t.segment_start = e.ts;
    }
    model::Slice s;
    s.pid = pid;
    s.tid = tid;
    s.ts = e.ts;
    s.inferred = e.args.count("inferred_start_time") != 0;
    s.inlined = e.args.count("inlined") != 0;
    switch (e.type) {
      case 2:  // duration begin
        s.kind = model::Slice::kBegin;
        s.name = Name(e.name);
        if (s.inferred) {
          // The deferred begin of an inferred frame: the segment is over.
          t.seen_since_segment = false;
        } else {
          t.open.push_back({s.name, e.ts});
        }
        break;
      case 3:  // duration end: the thread's top open frame
        s.kind = model::Slice::kEnd;
        if (!t.open.empty()) {
          s.name = t.open.back().name;
          s.begin_ts = t.open.back().begin;
          t.open.pop_back();
        } else {
          s.inferred = true;
          s.name = Name(e.name.empty() ? "[inferred frame]" : e.name);
          auto begin = e.args.find("inferred_begin");
          s.begin_ts = begin != e.args.end() ? begin->second.value : t.segment_start;
        }
        break;
      case 0:  // instant
        s.kind = model::Slice::kInstant;
        s.name = Name(e.name);
        break;
      case 4:  // duration complete: "[unknown]" spans; markers have no length and no args
        s.name = Name(e.name);
        if (e.end_ts == e.ts && e.args.empty()) {
          s.kind = model::Slice::kInstant;
        } else {
          s.kind = model::Slice::kComplete;
          s.end_ts = e.end_ts;
        }
        break;
      default: return;
    }
    sink_->OnSlice(s);
  }

 private:
  struct Open {
    const std::string* name;
    uint64_t begin;
  };
  struct Thread {
    std::vector<Open> open;  // begins not yet ended, outermost first
    bool seen_since_segment = false;
    uint64_t segment_start = 0;  // for inferred ends of files without "inferred_begin"
  };
  const std::string* Name(const std::string& n) { return &*names_.insert(n).first; }

  model::SliceSink* sink_;
  std::unordered_set<std::string> names_;  // node-based: pointers stay valid
  std::unordered_map<int32_t, Thread> threads_;
};

}  // namespace

Result<void> ReadFxtSlices(const std::filesystem::path& path, model::SliceSink* sink) {
  FxtSlices slices(sink);
  output::FxtTrace meta;
  PTSNAP_TRY(output::ReadFxtFile(path, &meta, [&](output::FxtEvent&& e) { slices.OnEvent(e); }));
  return sink->Finish();  // while the names live
}

Result<void> ReadFxtSlicesFromBytes(std::string_view bytes, model::SliceSink* sink) {
  FxtSlices slices(sink);
  output::FxtTrace meta;
  PTSNAP_TRY(output::StreamFxt(bytes, &meta, [&](output::FxtEvent&& e) { slices.OnEvent(e); }));
  return sink->Finish();
}

}  // namespace ptsnap::report
