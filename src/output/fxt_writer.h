// Fuchsia Trace Format writer, as Perfetto's importer reads it
// (style-and-formats.md B.2; fuchsia.dev trace-format). Streams: memory is
// bounded by the string and thread tables (slots are reused, so traces with
// more than 32k distinct names work), not by trace length.
//
// Layout written: magic number record, provider info/section metadata,
// initialization record (1e9 ticks per second: ticks are perf-clock ns),
// then string/thread records on demand, kernel-object records naming each
// process ("cmdline [pid=P]") and thread (with the "process" koid
// argument), and event records (args: address, dso, file and line when
// known, inferred_start_time, inlined): duration begin/end for frames (the
// end of an inferred frame named, with its begin time in an "inferred_begin"
// uint64 arg), duration complete for "[unknown]" spans and zero-length
// markers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/slice.h"
#include "output/output_file.h"
#include "output/source_lookup.h"

namespace ptsnap::output {

inline constexpr uint64_t kFxtMagic = 0x0016547846040010ull;
inline constexpr uint16_t kFxtMaxStringIndex = 0x7fff;
inline constexpr size_t kFxtMaxStringBytes = 32000;
// The process and thread koids of the "Snapshot triggers" track (trigger
// hits, written by the pipeline in FXT and JSON): far above Linux's pid_max.
inline constexpr int32_t kTriggerTrackPid = 0x40000000;
inline constexpr int32_t kTriggerTrackTid = 0x40000001;

class FxtWriter : public model::SliceSink {
 public:
  // Writes the header records at once. `out` outlives the writer.
  explicit FxtWriter(OutputFile* out);

  void OnProcess(int32_t pid, const std::string& name) override;
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override;
  void OnSlice(const model::Slice& s) override;
  // Adds "file" (string) and "line" (int32) args to frames whose function
  // has a known source location.
  void SetSourceLookup(SourceLookup lookup) { source_lookup_ = std::move(lookup); }
  // What the times are, appended to each process name, where Perfetto shows
  // it (FXT has no free-form metadata): an emulated trace's virtual clock.
  void SetClockInNames(std::string clock) { clock_ = std::move(clock); }
  // Writes a zero-length marker on its own thread (e.g. trigger hits on a
  // "Snapshot triggers" track): allocate the thread with OnThread first.
  void Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name);

 private:
  void Counter(const model::Slice& s);

 public:
  Result<void> Finish() override;

  // Slot count of the string table, for tests of slot reuse.
  void SetStringSlotsForTest(uint16_t n) { max_string_index_ = n; }

 private:
  uint16_t String(std::string_view s);
  uint16_t StringPtr(const std::string* s);
  [[nodiscard]] bool Current(uint16_t ref, std::string_view s) const;
  // Whether `ref` (from StringPtr(s)) still holds *s.
  [[nodiscard]] bool CurrentPtr(uint16_t ref, const std::string* s) const;
  uint8_t Thread(int32_t pid, int32_t tid);
  void Word(uint64_t w) { out_->Write(std::string_view(reinterpret_cast<const char*>(&w), 8)); }
  void Stream(std::string_view s);
  struct Arg {
    enum Type { kString, kPointer, kInt32, kUint64 } type = kString;
    uint16_t name = 0;
    uint64_t value = 0;  // pointer value, or string ref
  };
  void Event(int type, uint8_t thread, uint16_t name, uint64_t ts, const Arg* args, size_t nargs,
             const uint64_t* end_ts);

  OutputFile* out_;
  uint16_t max_string_index_ = kFxtMaxStringIndex;
  std::unordered_map<std::string, uint16_t> strings_;
  std::vector<std::string> string_slots_;       // index -> content ("" = free)
  std::vector<const std::string*> slot_owner_;  // index -> interned pointer, if any
  std::unordered_map<const std::string*, uint16_t> by_ptr_;
  // In front of by_ptr_: the last slot seen for a pointer, by its address.
  struct PtrCacheEntry {
    const std::string* ptr = nullptr;
    uint16_t index = 0;
  };
  static constexpr size_t kPtrCacheSize = 4096;
  std::vector<PtrCacheEntry> ptr_cache_ = std::vector<PtrCacheEntry>(kPtrCacheSize);
  uint16_t next_string_ = 1;                       // next slot to (re)use; wraps to kFirstReusable
  std::unordered_map<uint64_t, uint8_t> threads_;  // (pid << 32 | tid) -> index
  std::vector<uint64_t> thread_slots_;
  uint8_t next_thread_ = 1;
  uint64_t last_thread_key_ = 0;  // Thread()'s last answer (index 0: none)
  uint8_t last_thread_ = 0;
  uint16_t process_arg_ = 0, address_arg_ = 0, dso_arg_ = 0, inferred_arg_ = 0, true_ = 0,
           file_arg_ = 0, line_arg_ = 0, inlined_arg_ = 0, inferred_begin_arg_ = 0;
  SourceLookup source_lookup_;
  std::string clock_;
};

}  // namespace ptsnap::output
