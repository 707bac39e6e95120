#include "output/fxt_writer.h"
#include "output/power_args.h"

#include <cstring>
#include <vector>

namespace ptsnap::output {

namespace {
// The most args a "[C-state Cn]" frame's begin or end has (decode::PowerEntryArgs, PowerExitArgs).
constexpr size_t kMaxPowerArgs = 3;
// Record types ([0..3] of every header).
constexpr uint64_t kMetadata = 0, kInitialization = 1, kStringRecord = 2, kThreadRecord = 3,
                   kEventRecord = 4, kKernelObject = 7;
// Event types.
constexpr int kCounterEvent = 1, kDurationBegin = 2, kDurationEnd = 3, kDurationComplete = 4;
// Argument types.
constexpr uint64_t kArgInt32 = 1, kArgUint64 = 4, kArgString = 6, kArgPointer = 7, kArgKoid = 8;
constexpr uint64_t kObjProcess = 1, kObjThread = 2;

uint64_t Words(size_t bytes) { return (bytes + 7) / 8; }
uint64_t Header(uint64_t type, uint64_t size_words) { return type | (size_words << 4); }
// Slots 1..9 hold the fixed argument names; the rest are reused round-robin.
constexpr uint16_t kFirstReusable = 10;
}  // namespace

FxtWriter::FxtWriter(OutputFile* out) : out_(out) {
  string_slots_.resize(size_t{kFxtMaxStringIndex} + 1);
  slot_owner_.resize(size_t{kFxtMaxStringIndex} + 1, nullptr);
  thread_slots_.resize(256, ~uint64_t{0});
  Word(kFxtMagic);
  // Provider info (metadata type 1): provider 0, named "ptsnap".
  std::string_view provider = "ptsnap";
  Word(Header(kMetadata, 1 + Words(provider.size())) | (uint64_t{1} << 16) |
       (uint64_t{provider.size()} << 52));
  Stream(provider);
  // Provider section (metadata type 2): provider 0.
  Word(Header(kMetadata, 1) | (uint64_t{2} << 16));
  // Initialization: ticks per second. Ticks are perf-clock nanoseconds.
  Word(Header(kInitialization, 2));
  Word(1000000000ull);
  process_arg_ = String("process");
  address_arg_ = String("address");
  dso_arg_ = String("dso");
  inferred_arg_ = String("inferred_start_time");
  true_ = String("true");
  file_arg_ = String("file");
  line_arg_ = String("line");
  inlined_arg_ = String("inlined");
  inferred_begin_arg_ = String("inferred_begin");
}

void FxtWriter::Stream(std::string_view s) {
  out_->Write(s);
  static constexpr char kZeros[8] = {};
  size_t pad = (8 - s.size() % 8) % 8;
  out_->Write(std::string_view(kZeros, pad));
}

uint16_t FxtWriter::StringPtr(const std::string* s) {
  // Names come interned from the Symbolizer: look them up by address first
  // (no hashing of the text), in a direct-mapped cache, then in by_ptr_,
  // checking the slot still holds that string.
  PtrCacheEntry& c = ptr_cache_[(reinterpret_cast<uintptr_t>(s) >> 4) % kPtrCacheSize];
  if (c.ptr == s && slot_owner_[c.index] == s) return c.index;
  auto it = by_ptr_.find(s);
  if (it != by_ptr_.end() && slot_owner_[it->second] == s) {
    c = {s, it->second};
    return it->second;
  }
  uint16_t index = String(*s);
  if (index != 0) {
    slot_owner_[index] = s;
    by_ptr_[s] = index;
    c = {s, index};
  }
  return index;
}

bool FxtWriter::CurrentPtr(uint16_t ref, const std::string* s) const {
  // StringPtr made `s` the owner of `ref`; a later string record for the
  // slot clears the owner. An owner that moved to another pointer with the
  // same text is checked by text.
  if (ref == 0) return s->empty();
  return slot_owner_[ref] == s || Current(ref, *s);
}

uint16_t FxtWriter::String(std::string_view s) {
  if (s.empty()) return 0;  // ref 0 is the empty string
  if (s.size() > kFxtMaxStringBytes) s = s.substr(0, kFxtMaxStringBytes);
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second;
  uint16_t index = next_string_;
  if (++next_string_ > max_string_index_) next_string_ = kFirstReusable;
  // A new string record for a used index replaces the old entry; readers
  // (and Perfetto) resolve refs at the time they read a record.
  if (!string_slots_[index].empty()) strings_.erase(string_slots_[index]);
  string_slots_[index] = std::string(s);
  slot_owner_[index] = nullptr;
  strings_.emplace(std::string(s), index);
  Word(Header(kStringRecord, 1 + Words(s.size())) | (uint64_t{index} << 16) |
       (uint64_t{s.size()} << 32));
  Stream(s);
  return index;
}

uint8_t FxtWriter::Thread(int32_t pid, int32_t tid) {
  uint64_t key = (uint64_t{static_cast<uint32_t>(pid)} << 32) | static_cast<uint32_t>(tid);
  // Slices come in runs of one thread: the last one first.
  if (last_thread_ != 0 && key == last_thread_key_) return last_thread_;
  auto it = threads_.find(key);
  if (it != threads_.end()) {
    last_thread_key_ = key;
    last_thread_ = it->second;
    return it->second;
  }
  uint8_t index = next_thread_;
  next_thread_ = next_thread_ == 255 ? 1 : static_cast<uint8_t>(next_thread_ + 1);
  if (thread_slots_[index] != ~uint64_t{0}) threads_.erase(thread_slots_[index]);
  thread_slots_[index] = key;
  threads_.emplace(key, index);
  Word(Header(kThreadRecord, 3) | (uint64_t{index} << 16));
  Word(static_cast<uint64_t>(pid));
  Word(static_cast<uint64_t>(tid));
  last_thread_key_ = key;  // a reused slot may have been the last thread's
  last_thread_ = index;
  return index;
}

void FxtWriter::OnProcess(int32_t pid, const std::string& name) {
  // (The trigger track is no process of the program's.)
  uint16_t n =
      String(clock_.empty() || pid == kTriggerTrackPid ? name : name + " (" + clock_ + ")");
  Word(Header(kKernelObject, 2) | (kObjProcess << 16) | (uint64_t{n} << 24));
  Word(static_cast<uint64_t>(pid));
}

void FxtWriter::OnThread(int32_t pid, int32_t tid, const std::string& name) {
  uint16_t n = String(name);
  // Perfetto takes the owning process from a koid argument named "process".
  Word(Header(kKernelObject, 4) | (kObjThread << 16) | (uint64_t{n} << 24) | (uint64_t{1} << 40));
  Word(static_cast<uint64_t>(tid));
  Word(kArgKoid | (uint64_t{2} << 4) | (uint64_t{process_arg_} << 16));
  Word(static_cast<uint64_t>(pid));
}

void FxtWriter::Event(int type, uint8_t thread, uint16_t name, uint64_t ts, const Arg* args,
                      size_t nargs, const uint64_t* end_ts) {
  // One record is at most 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 1 words (+ 3 for a "[C-state]"
  // frame's power args): built here, written once.
  uint64_t w[16];
  size_t n = 2;
  w[1] = ts;
  for (size_t i = 0; i < nargs; ++i) {
    const Arg& a = args[i];
    if (a.type == Arg::kPointer || a.type == Arg::kUint64) {
      w[n++] = (a.type == Arg::kPointer ? kArgPointer : kArgUint64) | (uint64_t{2} << 4) |
               (uint64_t{a.name} << 16);
      w[n++] = a.value;
    } else if (a.type == Arg::kInt32) {
      w[n++] = kArgInt32 | (uint64_t{1} << 4) | (uint64_t{a.name} << 16) |
               ((a.value & 0xffffffffull) << 32);
    } else {
      w[n++] = kArgString | (uint64_t{1} << 4) | (uint64_t{a.name} << 16) | (a.value << 32);
    }
  }
  if (end_ts != nullptr) w[n++] = *end_ts;
  w[0] = Header(kEventRecord, n) | (uint64_t(type) << 16) | (uint64_t{nargs} << 20) |
         (uint64_t{thread} << 24) | (uint64_t{name} << 48);
  out_->Write(std::string_view(reinterpret_cast<const char*>(w), n * 8));
}

// A counter event: one uint64 argument, "value", and the counter id
// (Perfetto: a counter track per process and name).
void FxtWriter::Counter(const model::Slice& s) {
  uint16_t name = 0, value = 0;
  static const std::string kValue = "value";
  for (int pass = 0; pass < 3; ++pass) {
    name = StringPtr(s.name);
    value = StringPtr(&kValue);
    if (CurrentPtr(name, s.name) && CurrentPtr(value, &kValue)) break;
  }
  const Arg arg{Arg::kUint64, value, s.value};
  const uint64_t counter_id = 1;
  Event(kCounterEvent, Thread(s.pid, s.tid), name, s.ts, &arg, 1, &counter_id);
}

void FxtWriter::OnSlice(const model::Slice& s) {
  if (s.kind == model::Slice::kCounter) return Counter(s);
  // Intern every string before the thread ref: a string record written
  // between the thread record and the event is fine, but the thread slot
  // must not be reused by an eviction in between (threads never evict
  // strings, so order only matters for readability).
  uint16_t name = 0, dso = 0, file = 0;
  bool want_args = s.kind == model::Slice::kBegin || s.kind == model::Slice::kComplete;
  bool want_dso = want_args && s.dso != nullptr && !s.dso->empty();
  // Source locations only for frames that reach the output, looked up (and
  // cached) by the Symbolizer: never on the decoder's per-branch path.
  const decode::SourceLocation* loc =
      want_args && s.address != 0 && source_lookup_
          ? source_lookup_(s.space != 0 ? s.space : s.pid, s.address)
          : nullptr;
  if (loc != nullptr && (loc->file.empty() || loc->line == 0)) loc = nullptr;
  // Slot reuse may evict a string interned a moment ago for this record;
  // intern again until every ref of the record is current (at most twice,
  // since the victims advance round-robin).
  // The end of an inferred frame carries its name and begin time: its
  // begin record only comes at the segment's end, and a streaming reader
  // (`ptsnap report FILE.fxt`) needs both when the frame ends. Perfetto
  // matches ends to begins by nesting alone and ignores both.
  const bool named = s.kind != model::Slice::kEnd || s.inferred;
  // A "[C-state Cn]" frame: the entry's state on its begin, the exit's on
  // its end where a PWRX ended it (Perfetto adds an end's args to the slice).
  // (The named end of an inferred frame has none.)
  const std::vector<decode::PowerArg> power = s.kind == model::Slice::kEnd && s.inferred
                                                  ? std::vector<decode::PowerArg>{}
                                                  : PowerArgsOf(s, /*whole_frame=*/false);
  uint16_t power_refs[2 * kMaxPowerArgs] = {};
  for (int pass = 0; pass < 3; ++pass) {
    if (named) name = StringPtr(s.name);
    if (want_dso) dso = StringPtr(s.dso);
    if (loc != nullptr) file = StringPtr(&loc->file);
    for (size_t i = 0; i < power.size(); ++i) {
      power_refs[2 * i] = StringPtr(power[i].name);
      power_refs[2 * i + 1] = StringPtr(power[i].value);
    }
    // ("true" sits in a fixed slot, never reused.)
    bool ok = (!named || CurrentPtr(name, s.name)) && (!want_dso || CurrentPtr(dso, s.dso)) &&
              (loc == nullptr || CurrentPtr(file, &loc->file));
    for (size_t i = 0; ok && i < power.size(); ++i) {
      ok = CurrentPtr(power_refs[2 * i], power[i].name) &&
           CurrentPtr(power_refs[2 * i + 1], power[i].value);
    }
    if (ok) break;
  }
  Arg args[6 + kMaxPowerArgs];
  size_t nargs = 0;
  for (size_t i = 0; i < power.size(); ++i)
    args[nargs++] = {Arg::kString, power_refs[2 * i], power_refs[2 * i + 1]};
  if (want_args) {
    if (s.address != 0) args[nargs++] = {Arg::kPointer, address_arg_, s.address};
    if (want_dso) args[nargs++] = {Arg::kString, dso_arg_, dso};
    if (loc != nullptr) {
      args[nargs++] = {Arg::kString, file_arg_, file};
      args[nargs++] = {Arg::kInt32, line_arg_, loc->line};
    }
    if (s.inferred) args[nargs++] = {Arg::kString, inferred_arg_, true_};
    if (s.inlined) args[nargs++] = {Arg::kString, inlined_arg_, true_};
  }
  uint8_t thread = Thread(s.pid, s.tid);
  switch (s.kind) {
    case model::Slice::kBegin:
      Event(kDurationBegin, thread, name, s.ts, args, nargs, nullptr);
      break;
    case model::Slice::kEnd:
      if (s.inferred) {
        const Arg begin{Arg::kUint64, inferred_begin_arg_, s.begin_ts};
        Event(kDurationEnd, thread, name, s.ts, &begin, 1, nullptr);
      } else {
        Event(kDurationEnd, thread, 0, s.ts, args, power.size(), nullptr);
      }
      break;
    case model::Slice::kComplete:
      Event(kDurationComplete, thread, name, s.ts, args, nargs, &s.end_ts);
      break;
    case model::Slice::kInstant:
      // A zero-length complete event: visible in every Perfetto version
      // (magic-trace does the same for decode errors).
      Event(kDurationComplete, thread, name, s.ts, args, nargs, &s.ts);
      break;
    case model::Slice::kCounter: break;  // above
  }
}

bool FxtWriter::Current(uint16_t ref, std::string_view s) const {
  if (s.size() > kFxtMaxStringBytes) s = s.substr(0, kFxtMaxStringBytes);
  return ref == 0 ? s.empty() : string_slots_[ref] == s;
}

void FxtWriter::Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name) {
  uint16_t n = String(name);
  uint8_t thread = Thread(pid, tid);
  Event(kDurationComplete, thread, n, ts, nullptr, 0, &ts);
}

Result<void> FxtWriter::Finish() { return out_->Close(); }

}  // namespace ptsnap::output
