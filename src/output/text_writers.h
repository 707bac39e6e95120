// The two text outputs: Chrome JSON (object form, "X" complete events and
// "M" metadata names, style-and-formats.md B.3) and the `.events` dump, one
// line per slice event, documented in docs/decoding.md ("The .events
// format") and kept stable for golden tests and other tools. Both stream.
#pragma once

#include <string>
#include <string_view>

#include "model/slice.h"
#include "output/output_file.h"
#include "output/source_lookup.h"

namespace ptsnap::output {

class JsonWriter : public model::SliceSink {
 public:
  explicit JsonWriter(OutputFile* out);
  void OnProcess(int32_t pid, const std::string& name) override;
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override;
  // Frames become "X" events when they end (their kBegin is not needed).
  void OnSlice(const model::Slice& s) override;
  // Adds "file" and "line" args to frames whose source location is known.
  void SetSourceLookup(SourceLookup lookup) { source_lookup_ = std::move(lookup); }
  // What the times are (docs/decoding.md, "Timestamps"): written
  // as the trace's "otherData" {"clock": ...}; `in_names` also appends it
  // to each process name, where Perfetto shows it (an emulated clock).
  void SetClock(std::string clock, bool in_names) {
    clock_ = std::move(clock);
    clock_in_names_ = in_names;
  }
  void Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name);
  Result<void> Finish() override;

 private:
  void Event(const std::string& body);
  OutputFile* out_;
  bool first_ = true;
  SourceLookup source_lookup_;
  std::string clock_;
  bool clock_in_names_ = false;
};

class EventsWriter : public model::SliceSink {
 public:
  explicit EventsWriter(OutputFile* out);
  void OnProcess(int32_t pid, const std::string& name) override;
  void OnThread(int32_t pid, int32_t tid, const std::string& name) override;
  void OnSlice(const model::Slice& s) override;
  void Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name);
  Result<void> Finish() override;

 private:
  OutputFile* out_;
};

// JSON string literal with escapes; invalid UTF-8 is replaced, never thrown.
std::string JsonString(std::string_view s);
// Nanoseconds as JSON microseconds with three decimals ("12.345").
std::string Micros(uint64_t ns);

}  // namespace ptsnap::output
