// `ptsnap report FILE.json`: Chrome JSON (as output/text_writers.h's
// JsonWriter writes it) back into the slice stream (report/trace_file.h).
//
// The text is read once, through nlohmann's SAX interface (never held as a
// DOM); per thread only the frames are kept (interned name, begin, end, the
// event's byte offset, flags). A frame's callers are only known once the
// thread's outermost frame ends ("X" events come as frames end), so the
// frames are put back in begin/end order at the end: sorted by begin, the
// longer first, they nest like a stack; an inferred frame (its start was not
// seen: "inferred_start_time") gets no begin, and the segment's deferred
// begins and "[unknown]" spans come once its frames have ended, as the model
// emits them (model/call_stack.cpp, ResetAll).
#include <zlib.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "output/fxt_writer.h"
#include "report/trace_file.h"

namespace ptsnap::report {

namespace {

// Bytes from a gzip (or plain) file or from memory, one at a time, counting
// them: the parser's position for error messages.
class ByteSource {
 public:
  explicit ByteSource(std::string_view bytes) : data_(bytes.data()), len_(bytes.size()) {}
  explicit ByteSource(gzFile f) : file_(f), buf_(kChunk) {}

  // -1 at the end of the input (or on a read error: error()).
  int Next() {
    if (pos_ == len_ && !Refill()) return -1;
    ++consumed_;
    return static_cast<unsigned char>(data_[pos_++]);
  }
  [[nodiscard]] bool AtEnd() { return pos_ == len_ && !Refill(); }
  [[nodiscard]] uint64_t consumed() const { return consumed_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  static constexpr size_t kChunk = size_t{1} << 16;
  bool Refill() {
    if (file_ == nullptr || !error_.empty()) return false;
    const int got = gzread(file_, buf_.data(), static_cast<unsigned>(buf_.size()));
    if (got <= 0) {
      int code = Z_OK;
      const char* msg = gzerror(file_, &code);
      if (got < 0 || (code != Z_OK && code != Z_STREAM_END))
        error_ = std::string("corrupt gzip data: ") + (msg != nullptr ? msg : "read error");
      return false;
    }
    data_ = buf_.data();
    len_ = static_cast<size_t>(got);
    pos_ = 0;
    return true;
  }

  gzFile file_ = nullptr;
  std::vector<char> buf_;
  const char* data_ = nullptr;
  size_t len_ = 0, pos_ = 0;
  uint64_t consumed_ = 0;
  std::string error_;
};

// An input iterator over a ByteSource, as nlohmann's iterator input adapter
// reads it (`*it`, `++it`, `it != end`).
class ByteIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  ByteIterator() = default;
  explicit ByteIterator(ByteSource* src) : src_(src) {}
  char operator*() {
    if (!have_) {
      cur_ = src_->Next();
      have_ = true;
    }
    return static_cast<char>(cur_);
  }
  ByteIterator& operator++() {
    if (!have_) (void)src_->Next();
    have_ = false;
    return *this;
  }
  bool operator==(const ByteIterator& o) const {
    const bool end_a = src_ == nullptr || (!have_ && src_->AtEnd());
    const bool end_b = o.src_ == nullptr || (!o.have_ && o.src_->AtEnd());
    return end_a && end_b;
  }
  bool operator!=(const ByteIterator& o) const { return !(*this == o); }

 private:
  ByteSource* src_ = nullptr;
  int cur_ = 0;
  bool have_ = false;
};

// Microseconds as JSON writes them ("12.345", "12", "1.5e3") to exact ns;
// digits below the nanosecond are rounded. nullopt: negative, not a number
// or past 2^64 ns.
std::optional<uint64_t> MicrosToNs(std::string_view s) {
  if (s.empty() || s[0] == '-') return std::nullopt;
  std::string digits;
  int exp10 = 3;  // the value is digits * 10^(exp10) ns
  size_t i = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (!(digits.empty() && c == '0')) digits += c;
      if (dot) --exp10;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E') return std::nullopt;
    ++i;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    int e = 0;
    if (i == s.size()) return std::nullopt;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      e = std::min(e * 10 + (s[i] - '0'), 100000);
    }
    exp10 += neg ? -e : e;
  }
  if (digits.empty()) return 0;
  // Drop the digits below 1 ns, rounding half up.
  bool round_up = false;
  if (exp10 < 0) {
    const size_t drop = static_cast<size_t>(-exp10);
    if (drop > digits.size()) return 0;
    round_up = digits[digits.size() - drop] >= '5';
    digits.resize(digits.size() - drop);
    exp10 = 0;
  }
  if (digits.size() + static_cast<size_t>(exp10) > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  for (int k = 0; k < exp10; ++k) {
    if (v > UINT64_MAX / 10) return std::nullopt;
    v *= 10;
  }
  if (round_up) {
    if (v == UINT64_MAX) return std::nullopt;
    ++v;
  }
  return v;
}

struct Frame {
  uint64_t begin = 0, end = 0;
  uint64_t offset = 0;  // of the event's '{': file order, and for errors
  uint32_t name = 0;
  bool inferred = false, inlined = false;
  bool unknown = false;  // a "[unknown]" span, not a frame
};
// docs/report.md gives the memory per "X" event.
static_assert(sizeof(Frame) == 32);

struct ThreadFrames {
  int32_t pid = 0;
  std::vector<Frame> frames;
  // "[unknown]" spans (the model's kComplete), kept out of the nesting.
  std::vector<Frame> unknowns;
  std::vector<Frame> open;  // "B" events not yet ended
  std::optional<uint64_t> first_instant, last_instant;
};

// What one event said, as its fields come.
struct Event {
  uint64_t offset = 0;
  std::string ph, name;
  int64_t pid = 0, tid = 0;
  std::optional<uint64_t> ts, dur;
  bool inferred = false, inlined = false;
};

class TraceSax {
 public:
  using json = nlohmann::json;

  explicit TraceSax(ByteSource* src) : src_(src) {}

  bool null() { return Scalar(Value{}); }
  bool boolean(bool b) { return Scalar(Value{.kind = Value::kBool, .b = b}); }
  bool number_integer(json::number_integer_t v) {
    if (v < 0) return Scalar(Value{.kind = Value::kNegative});
    return number_unsigned(static_cast<uint64_t>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Scalar(Value{.kind = Value::kUnsigned, .u = v});
  }
  bool number_float(json::number_float_t /*v*/, const json::string_t& s) {
    return Scalar(Value{.kind = Value::kFloat, .text = &s});
  }
  bool string(json::string_t& s) { return Scalar(Value{.kind = Value::kString, .text = &s}); }
  bool binary(json::binary_t& /*b*/) { return Scalar(Value{}); }
  bool key(json::string_t& k) {
    if (depth_ == 1 && top_ == Top::kObject) top_key_ = k;
    if (in_event_ && depth_ == events_depth_ + 1) event_key_ = k;
    if (in_args_ && depth_ == events_depth_ + 2) args_key_ = k;
    return true;
  }
  bool start_object(std::size_t /*n*/) {
    const uint64_t at = src_->consumed() - 1;
    if (depth_ == 0) {
      top_ = Top::kObject;
    } else if (in_events_ && depth_ == events_depth_) {
      ev_ = Event{};
      ev_.offset = at;
      in_event_ = true;
      event_key_.clear();
    } else if (in_event_ && depth_ == events_depth_ + 1 && event_key_ == "args") {
      in_args_ = true;
      args_key_.clear();
    }
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    if (in_args_ && depth_ == events_depth_ + 1) in_args_ = false;
    if (in_event_ && depth_ == events_depth_) {
      in_event_ = false;
      return EndEvent();
    }
    if (depth_ == 0 && !saw_events_)
      return Fail(src_->consumed() - 1,
                  "not a Chrome trace: the object has no \"traceEvents\" array");
    return true;
  }
  bool start_array(std::size_t /*n*/) {
    const uint64_t at = src_->consumed() - 1;
    if (depth_ == 0) {
      top_ = Top::kArray;
      in_events_ = saw_events_ = true;
      events_depth_ = 1;
    } else if (depth_ == 1 && top_ == Top::kObject && top_key_ == "traceEvents") {
      in_events_ = saw_events_ = true;
      events_depth_ = 2;
    } else if (in_events_ && depth_ == events_depth_) {
      return Fail(at, "not a Chrome trace: an event is not an object");
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    if (in_events_ && depth_ == events_depth_ - 1) in_events_ = false;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 7: syntax error ..."
    if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    // nlohmann counts the byte it stopped at: the offset is the one before.
    return Fail(position > 0 ? position - 1 : 0, what);
  }

  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] uint64_t error_offset() const { return error_offset_; }
  std::unordered_map<int32_t, ThreadFrames>& threads() { return threads_; }
  const std::deque<std::string>& names() const { return names_; }

 private:
  struct Value {
    enum Kind { kNull, kBool, kUnsigned, kNegative, kFloat, kString } kind = kNull;
    bool b = false;
    uint64_t u = 0;
    const std::string* text = nullptr;
  };
  enum class Top { kNone, kObject, kArray };

  bool Fail(uint64_t offset, std::string what) {
    if (error_.empty()) {
      error_ = std::move(what);
      error_offset_ = offset;
    }
    return false;
  }

  bool Scalar(const Value& v) {
    const uint64_t at = src_->consumed() - 1;
    if (depth_ == 0)
      return Fail(at, "not a Chrome trace: neither an object with \"traceEvents\" nor an array");
    if (in_events_ && depth_ == events_depth_)
      return Fail(at, "not a Chrome trace: an event is not an object");
    if (in_event_ && depth_ == events_depth_ + 1) return Field(v);
    if (in_args_ && depth_ == events_depth_ + 2 && v.kind == Value::kBool && v.b) {
      if (args_key_ == "inferred_start_time") ev_.inferred = true;
      if (args_key_ == "inlined") ev_.inlined = true;
    }
    if (depth_ == 1 && top_ == Top::kObject && top_key_ == "traceEvents")
      return Fail(at, "not a Chrome trace: \"traceEvents\" is not an array");
    return true;
  }

  bool Field(const Value& v) {
    const std::string& k = event_key_;
    if (k == "ph" || k == "name") {
      if (v.kind != Value::kString)
        return Fail(ev_.offset, "not a Chrome trace: \"" + k + "\" is not a string");
      (k == "ph" ? ev_.ph : ev_.name) = *v.text;
    } else if (k == "pid" || k == "tid") {
      // Chrome's pids and tids are numbers; ptsnap's are 32-bit.
      if (v.kind != Value::kUnsigned && v.kind != Value::kNegative)
        return Fail(ev_.offset, "not a Chrome trace: \"" + k + "\" is not an integer");
      const int64_t id = v.kind == Value::kUnsigned ? static_cast<int64_t>(v.u) : -1;
      (k == "pid" ? ev_.pid : ev_.tid) = id;
    } else if (k == "ts" || k == "dur") {
      std::optional<uint64_t> ns;
      if (v.kind == Value::kUnsigned && v.u <= UINT64_MAX / 1000) ns = v.u * 1000;
      if (v.kind == Value::kFloat) ns = MicrosToNs(*v.text);
      if (!ns)
        return Fail(ev_.offset, "\"" + k +
                                    "\" is not a time in microseconds that ptsnap can hold "
                                    "(a number from 0 to 2^64 ns)");
      (k == "ts" ? ev_.ts : ev_.dur) = *ns;
    }
    return true;
  }

  uint32_t Intern(const std::string& name) {
    auto [it, added] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(name);
    return it->second;
  }

  bool EndEvent() {
    const std::string& ph = ev_.ph;
    if (ph.empty()) return Fail(ev_.offset, "not a Chrome trace: an event has no \"ph\"");
    const bool frame = ph == "X" || ph == "B" || ph == "E";
    const bool instant = ph == "i" || ph == "I";
    if (!frame && !instant) return true;  // metadata, counters, flows: not calls
    if (!ev_.ts) return Fail(ev_.offset, "\"" + ph + "\" event without \"ts\"");
    if (ev_.pid == output::kTriggerTrackPid) return true;  // trigger hits: not the program's
    if (ev_.pid < INT32_MIN || ev_.pid > INT32_MAX || ev_.tid < INT32_MIN || ev_.tid > INT32_MAX)
      return Fail(ev_.offset, "\"pid\" or \"tid\" is out of range");
    ThreadFrames& t = threads_[static_cast<int32_t>(ev_.tid)];
    t.pid = static_cast<int32_t>(ev_.pid);
    const uint64_t ts = *ev_.ts;
    if (instant) {
      t.first_instant = std::min(t.first_instant.value_or(ts), ts);
      t.last_instant = std::max(t.last_instant.value_or(ts), ts);
      return true;
    }
    Frame f;
    f.begin = ts;
    f.offset = ev_.offset;
    f.inferred = ev_.inferred;
    f.inlined = ev_.inlined;
    if (ph == "B") {
      f.name = Intern(ev_.name);
      t.open.push_back(f);
      return true;
    }
    if (ph == "E") {
      if (t.open.empty())
        return Fail(ev_.offset,
                    "an \"E\" event with no open \"B\" on thread " + std::to_string(ev_.tid));
      Frame b = t.open.back();
      t.open.pop_back();
      if (ts < b.begin) return Fail(ev_.offset, "an \"E\" event before its \"B\"");
      b.end = ts;
      b.offset = ev_.offset;  // where it ended: the order "X" events have
      t.frames.push_back(b);
      return true;
    }
    if (!ev_.dur) return Fail(ev_.offset, "\"X\" event without \"dur\"");
    if (*ev_.dur > UINT64_MAX - ts) return Fail(ev_.offset, "\"X\" event ends past 2^64 ns");
    f.end = ts + *ev_.dur;
    f.name = Intern(ev_.name);
    // The model's "[unknown]" spans (a return with no known frame, from the
    // segment's start) are complete slices, not frames: they enclose nothing.
    f.unknown = f.inferred && ev_.name == "[unknown]";
    (f.unknown ? t.unknowns : t.frames).push_back(f);
    return true;
  }

  ByteSource* src_;
  int depth_ = 0;
  Top top_ = Top::kNone;
  std::string top_key_, event_key_, args_key_;
  bool in_events_ = false, saw_events_ = false, in_event_ = false, in_args_ = false;
  int events_depth_ = 0;
  Event ev_;
  std::string error_;
  uint64_t error_offset_ = 0;
  std::unordered_map<std::string, uint32_t> ids_;
  std::deque<std::string> names_;  // by id; a deque: pointers stay valid
  std::unordered_map<int32_t, ThreadFrames> threads_;
};

// One thread's frames as the slice stream the model wrote them from.
class Replay {
 public:
  Replay(int32_t tid, ThreadFrames& t, const std::deque<std::string>& names, model::SliceSink* sink)
      : tid_(tid), t_(t), names_(names), sink_(sink) {}

  // Error: two frames overlap without nesting (the offset of the later).
  Result<void> Run(uint64_t* bad_offset) {
    if (t_.first_instant) Instant(*t_.first_instant);
    if (t_.last_instant) Instant(*t_.last_instant);
    std::vector<Frame>& frames = t_.frames;
    // By begin; the enclosing frame first: the longer, then the inferred,
    // then the one that ended later (written later).
    std::sort(frames.begin(), frames.end(), [](const Frame& a, const Frame& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end > b.end;
      if (a.inferred != b.inferred) return a.inferred;
      return a.offset > b.offset;
    });
    Segments();
    for (const Frame& f : frames) {
      while (!stack_.empty() && !Encloses(*stack_.back(), f)) Pop();
      if (!stack_.empty() && f.end > stack_.back()->end) {
        const Frame& top = *stack_.back();
        *bad_offset = std::max(f.offset, top.offset);
        return Error("frames overlap without nesting on thread " + std::to_string(tid_) + ": \"" +
                     names_[f.name] + "\" [" + std::to_string(f.begin) + ", " +
                     std::to_string(f.end) + "] ns begins inside \"" + names_[top.name] + "\" [" +
                     std::to_string(top.begin) + ", " + std::to_string(top.end) +
                     "] ns and ends after it");
      }
      while (stack_.empty() && next_segment_ < segments_.size() &&
             segments_[next_segment_].close <= f.begin &&
             segments_[next_segment_].start < f.begin) {
        Deferred(segments_[next_segment_++]);
      }
      if (!f.inferred) Emit(model::Slice::kBegin, f, f.begin);
      stack_.push_back(&f);
    }
    while (!stack_.empty()) Pop();
    while (next_segment_ < segments_.size()) Deferred(segments_[next_segment_++]);
    return Ok();
  }

 private:
  // The frames that begin where the segment began (the model's reset time):
  // inferred ones and "[unknown]" spans, whose begins and spans come, in
  // reverse order of when they happened, once all its frames have ended.
  struct Segment {
    uint64_t start = 0, close = 0;
    std::vector<const Frame*> deferred;  // in the order they happened
  };

  static bool Encloses(const Frame& outer, const Frame& f) {
    return f.begin < outer.end || f.begin == outer.begin;
  }

  void Segments() {
    std::vector<const Frame*> all;
    for (const Frame& f : t_.frames)
      if (f.inferred) all.push_back(&f);
    for (const Frame& f : t_.unknowns) all.push_back(&f);
    // A span ends at the return that found no frame: after the inferred
    // frame that ended then.
    std::sort(all.begin(), all.end(), [](const Frame* a, const Frame* b) {
      if (a->begin != b->begin) return a->begin < b->begin;
      if (a->end != b->end) return a->end < b->end;
      const bool ua = a->unknown, ub = b->unknown;
      if (ua != ub) return ub;
      return a->offset < b->offset;
    });
    for (const Frame* f : all) {
      if (segments_.empty() || segments_.back().start != f->begin)
        segments_.push_back({f->begin, f->begin, {}});
      segments_.back().close = std::max(segments_.back().close, f->end);
      segments_.back().deferred.push_back(f);
    }
  }
  void Pop() {
    const Frame& f = *stack_.back();
    stack_.pop_back();
    Emit(model::Slice::kEnd, f, f.end);
  }

  void Deferred(const Segment& seg) {
    for (auto it = seg.deferred.rbegin(); it != seg.deferred.rend(); ++it) {
      if ((*it)->unknown) {
        Emit(model::Slice::kComplete, **it, (*it)->begin);
      } else {
        Emit(model::Slice::kBegin, **it, (*it)->begin);
      }
    }
  }

  void Emit(model::Slice::Kind kind, const Frame& f, uint64_t ts) {
    model::Slice s;
    s.kind = kind;
    s.pid = t_.pid;
    s.tid = tid_;
    s.ts = ts;
    s.begin_ts = f.begin;
    s.end_ts = f.end;
    s.name = &names_[f.name];
    s.inferred = f.inferred;
    s.inlined = f.inlined;
    sink_->OnSlice(s);
  }

  void Instant(uint64_t ts) {
    static const std::string kMarker = "[marker]";
    model::Slice s;
    s.kind = model::Slice::kInstant;
    s.pid = t_.pid;
    s.tid = tid_;
    s.ts = ts;
    s.name = &kMarker;
    sink_->OnSlice(s);
  }

  int32_t tid_;
  ThreadFrames& t_;
  const std::deque<std::string>& names_;
  model::SliceSink* sink_;
  std::vector<const Frame*> stack_;
  std::vector<Segment> segments_;
  size_t next_segment_ = 0;
};

Result<void> ReadJson(ByteSource* src, const std::string& label, model::SliceSink* sink) {
  auto fail = [&](uint64_t offset, const std::string& what) {
    return Error(label + ": JSON at offset " + std::to_string(offset) + ": " + what);
  };
  TraceSax sax(src);
  const bool parsed = nlohmann::json::sax_parse(ByteIterator(src), ByteIterator(), &sax);
  if (!src->error().empty()) return fail(src->consumed(), src->error());
  if (!parsed) return fail(sax.error_offset(), sax.error());
  // Threads in the order they began, so that the report's zero (the first
  // call seen starting) is the one the decode gives.
  auto& threads = sax.threads();
  std::vector<std::pair<uint64_t, int32_t>> order;
  order.reserve(threads.size());
  for (auto& [tid, t] : threads) {
    uint64_t first = UINT64_MAX;
    for (const Frame& f : t.frames) first = std::min(first, f.begin);
    order.emplace_back(first, tid);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [first, tid] : order) {
    uint64_t bad = 0;
    Replay replay(tid, threads.at(tid), sax.names(), sink);
    if (auto r = replay.Run(&bad); !r) return fail(bad, r.error().ToString());
  }
  return sink->Finish();  // while the names live
}

}  // namespace

Result<void> ReadJsonSlices(const std::filesystem::path& path, model::SliceSink* sink) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (f == nullptr) return Error::FromErrno("opening " + path.string());
  ByteSource src(f.get());
  return ReadJson(&src, path.string(), sink);
}

Result<void> ReadJsonSlicesFromBytes(std::string_view bytes, model::SliceSink* sink) {
  ByteSource src(bytes);
  return ReadJson(&src, "JSON trace", sink);
}

}  // namespace ptsnap::report
