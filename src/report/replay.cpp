#include "report/replay.h"

#include <cstdio>

namespace ptsnap::report {

std::string ReplayHeader() { return "# DURATION     TID     FUNCTION\n"; }

std::string CallText(const std::string& name) {
  if (name.starts_with('[') || name.find('(') != std::string::npos) return name;
  return name + "()";
}

std::string ReplayDuration(uint64_t ns) {
  char buf[32];
  if (ns < 1000000) {
    std::snprintf(buf, sizeof buf, "%7.3f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 1000000000) {
    std::snprintf(buf, sizeof buf, "%7.3f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%7.3f  s", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

bool ReplaySink::InWindow(uint64_t ts) const {
  const uint64_t origin = origin_.value_or(ts);
  if (ts < origin + options_.since_ns) return false;
  return !options_.until_ns || ts <= origin + *options_.until_ns;
}

void ReplaySink::OpenContext(int32_t tid, Thread& t) {
  for (size_t i = 0; i < t.stack.size(); ++i) {
    Frame& f = t.stack[i];
    if (f.shown || Deep(i)) continue;
    f.shown = true;
    Print(tid, std::nullopt, i, CallText(*f.name) + " { /* entered before the window */");
  }
}

void ReplaySink::Print(int32_t tid, std::optional<uint64_t> duration, size_t depth,
                       const std::string& text) {
  ++lines_;
  if (options_.limit != 0 && printed_ >= options_.limit) return;
  ++printed_;
  char head[64];
  std::snprintf(head, sizeof head, "%10s [%6d] | ",
                duration ? ReplayDuration(*duration).c_str() : "", static_cast<int>(tid));
  out_(std::string(head) + std::string(2 * depth, ' ') + text + "\n");
}

void ReplaySink::Line(int32_t tid, Thread& t, std::optional<uint64_t> duration, size_t depth,
                      const std::string& text) {
  OpenContext(tid, t);
  FlushPending(tid, t);
  Print(tid, duration, depth, text);
}

void ReplaySink::FlushPending(int32_t tid, Thread& t) {
  if (t.pending == std::string::npos) return;
  const size_t depth = t.pending;
  t.pending = std::string::npos;
  OpenContext(tid, t);
  Print(tid, std::nullopt, depth, CallText(*t.stack[depth].name) + " {");
}

void ReplaySink::CloseOpen(int32_t tid, Thread& t, const char* why) {
  FlushPending(tid, t);
  for (size_t i = t.stack.size(); i-- > 0;) {
    if (!t.stack[i].shown) continue;
    Print(tid, std::nullopt, i, "} /* " + *t.stack[i].name + ": " + why + " */");
  }
  t.stack.clear();
}

void ReplaySink::OnSlice(const model::Slice& s) {
  if (s.kind == model::Slice::kCounter) return;
  if (s.kind == model::Slice::kBegin && s.inferred) return;  // written after its end
  if (!origin_ && s.kind != model::Slice::kInstant)
    origin_ = s.kind == model::Slice::kEnd ? s.begin_ts : s.ts;
  if (options_.tid && s.tid != *options_.tid) return;
  saw_thread_ = true;
  Thread& t = threads_[s.tid];
  if (t.past) return;
  if (options_.until_ns && s.ts > origin_.value_or(s.ts) + *options_.until_ns) {
    // The window's end: what is still open runs past it.
    t.past = true;
    CloseOpen(s.tid, t, "still running at the window's end");
    return;
  }
  const bool in = InWindow(s.ts);
  switch (s.kind) {
    case model::Slice::kBegin: {
      const size_t depth = t.stack.size();
      const bool shown = in && !Deep(depth);
      if (shown) FlushPending(s.tid, t);
      t.stack.push_back({s.name, s.ts, shown});
      if (shown) t.pending = depth;
      return;
    }
    case model::Slice::kEnd: {
      const uint64_t dur = s.ts >= s.begin_ts ? s.ts - s.begin_ts : 0;
      if (s.inferred || t.stack.empty()) {
        // Its start was not seen: it was open when the trace began.
        if (in && !Deep(0))
          Line(s.tid, t, dur, 0, "} /* " + *s.name + " (entered before the trace) */");
        return;
      }
      const Frame f = t.stack.back();
      const size_t depth = t.stack.size() - 1;
      if (t.pending == depth) {  // nothing printed under it: one line
        t.pending = std::string::npos;
        t.stack.pop_back();
        Line(s.tid, t, dur, depth, CallText(*f.name) + ";");
        return;
      }
      // Entered before the window, ending in it: its opening is printed now.
      if (!f.shown && in && !Deep(depth)) OpenContext(s.tid, t);
      const bool shown = t.stack.back().shown;
      t.stack.pop_back();
      if (shown) Line(s.tid, t, dur, depth, "} /* " + *f.name + " */");
      return;
    }
    case model::Slice::kComplete: {
      const size_t depth = t.stack.size();
      if (in && !Deep(depth) && InWindow(s.end_ts))
        Line(s.tid, t, s.end_ts >= s.ts ? s.end_ts - s.ts : 0, depth, CallText(*s.name) + ";");
      return;
    }
    case model::Slice::kInstant: {
      const size_t depth = t.stack.size();
      if (in && !Deep(depth)) Line(s.tid, t, std::nullopt, depth, "/* " + *s.name + " */");
      return;
    }
    case model::Slice::kCounter: return;
  }
}

Result<void> ReplaySink::Finish() {
  for (auto& [tid, t] : threads_)
    if (!t.past) CloseOpen(tid, t, "still running at the trace's end");
  return Ok();
}

}  // namespace ptsnap::report
