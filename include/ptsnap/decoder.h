// ptsnap::Decoder: a trace directory (or one snapshot of it) decoded into
// every function call, written as a file (Perfetto FXT, Chrome JSON, the
// .events text) or streamed to a listener. docs/api.md has an example.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/export.h"
#include "ptsnap/result.h"

namespace ptsnap {

// One call of a function on one thread, [begin_ns, end_ns] on the trace's
// clock (perf time; emulated traces: one tick per retired instruction).
struct DecodedSlice {
  int32_t pid = 0, tid = 0;
  uint64_t begin_ns = 0, end_ns = 0;
  std::string_view name;  // function, or a pseudo frame: "[syscall]", "[unknown]"
  std::string_view dso;   // the file it is in; may be empty
  uint64_t address = 0;   // the function's entry; 0 for pseudo frames
  // Its start was not seen (it began before the trace or a decode error):
  // begin_ns is where the trace picks it up.
  bool inferred = false;
};

// A point in time: a snapshot's end, a decode error.
struct DecodedMarker {
  int32_t pid = 0, tid = 0;
  uint64_t ts_ns = 0;
  std::string_view name;
};

// A mark (docs/decoding.md, "Marks"): a value the program wrote with
// ptsnap_mark() (ptsnap/mark.h) or PTWRITE, on its thread at `ts_ns`. Also
// reported as a marker named "[mark 0x...]".
struct DecodedMark {
  int32_t pid = 0, tid = 0;
  uint64_t ts_ns = 0;
  uint64_t value = 0;
};

// Strings are valid only during the call. Calls come per thread in time
// order of the slices' ends (a caller ends after its callees); a process
// and a thread are named before their first slice.
class DecodeListener {
 public:
  virtual ~DecodeListener() = default;
  virtual void OnProcess(int32_t /*pid*/, std::string_view /*name*/) {}
  virtual void OnThread(int32_t /*pid*/, int32_t /*tid*/, std::string_view /*name*/) {}
  virtual void OnSlice(const DecodedSlice& /*slice*/) {}
  virtual void OnMarker(const DecodedMarker& /*marker*/) {}
  // Each mark, right after its OnMarker.
  virtual void OnMark(const DecodedMark& /*mark*/) {}
};

struct FunctionTime {
  std::string name;
  uint64_t total_ns = 0, self_ns = 0, calls = 0;
};

struct DecodeSummary {
  uint64_t first_ns = 0, last_ns = 0;  // the slices' span
  uint64_t threads = 0, slices = 0;
  uint64_t streams = 0, missing_streams = 0;
  uint64_t pt_bytes = 0, instructions = 0;
  uint64_t decode_errors = 0, overflows = 0;
  uint64_t undecoded_bytes = 0;  // PT bytes before a sync point (PSB): nothing decoded from them
  uint64_t lost_records = 0, aux_truncated = 0, lost_bytes = 0;
  std::vector<FunctionTime> top_total, top_self;  // hottest first
  // Sampled traces (collection kSampled): the stack samples the slices were
  // built from. Each slice edge is known to within one period
  // (docs/decoding.md, "Sampled traces"). Empty for PT traces.
  struct Sampled {
    std::string event;      // "cpu-clock", "cycles"
    std::string callgraph;  // "fp", "dwarf", "lbr"
    uint64_t period_ns = 0;
    uint64_t samples = 0;    // read
    uint64_t unwound = 0;    // stacks followed to their outermost frame
    uint64_t truncated = 0;  // stacks cut short (unwind error, stack copy or depth cap)
    uint64_t bad_records = 0, torn_bytes = 0;  // skipped: fields that did not fit, torn tails
    uint64_t gaps = 0;  // a thread not sampled for over 10 periods: its frames ended there
    // Callgraph fp: stacks whose caller the kernel's frame-pointer walk
    // skipped (the sampled code had no frame of its own) and that were
    // mended from the sample's stack copy, and stacks that could not be
    // checked (no CFI at the IP, or the return address outside the copy).
    // Both 0 for recordings without the registers and stack copy
    // (`fp_checked` false) and for other callgraphs.
    bool fp_checked = false;
    uint64_t fp_mended = 0, fp_unmendable = 0;
    // Of fp_mended: stacks whose inserted caller keeps no frame pointer
    // either, so the frames above it are not to be trusted.
    uint64_t fp_caller_no_frame = 0;
  };
  std::optional<Sampled> sampled;
  std::vector<std::string> warnings;
  std::filesystem::path output;  // WriteFile: the file written
  std::string format;            // WriteFile: "fxt", "json" or "events"
  uint64_t output_bytes = 0;     // WriteFile: the file's size before compression
  // WriteFile with DecodeOptions::max_depth / min_duration_ns: the spans
  // left out of the file (Decode's listener always gets every span).
  uint64_t dropped_too_deep = 0, dropped_too_short = 0;
  std::string text;  // what `ptsnap decode` prints: several lines
  [[nodiscard]] std::string ToJson() const;
};

// Which decoder turns PT into control flow (`ptsnap decode --decoder`,
// docs/decoding.md "Decoders"): ptsnap's own, or libipt's; the same output.
enum class PtDecoderKind : uint8_t { kOurs, kLibipt };

struct DecodeOptions {
  uint32_t snapshot = 0;  // only this snapshot's streams; 0: all of them
  PtDecoderKind decoder = PtDecoderKind::kOurs;
  size_t top = 5;  // entries in top_total and top_self
  // Called now and then with (PT bytes decoded, total PT bytes).
  std::function<void(uint64_t, uint64_t)> progress;
  // WriteFile only: thin the timeline as `ptsnap decode --max-depth N
  // --min-duration D` (docs/decoding.md); 0: no limit.
  size_t max_depth = 0;
  uint64_t min_duration_ns = 0;
  // Inlined calls as frames named "NAME (inlined)" where the binary has
  // DWARF (docs/decoding.md, "Inline frames"); false as `ptsnap decode
  // --no-inline`. WriteFile and Decode alike.
  bool inline_frames = true;
  // Folders of separate debug files, searched before /usr/lib/debug for the
  // symbols of stripped binaries, as `ptsnap decode --debug-dir` (by
  // build-id: DIR/.build-id/xx/yyyy.debug; by .gnu_debuglink: DIR/NAME).
  std::vector<std::filesystem::path> debug_dirs;
};

class PTSNAP_API Decoder {
 public:
  // Reads the manifest; errors: not a trace directory, a corrupt manifest,
  // no such snapshot.
  static Result<Decoder> Open(const std::filesystem::path& trace_dir, DecodeOptions options = {});

  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  ~Decoder();

  // `format` "fxt", "json" or "events"; "" picks it from the suffix (.fxt,
  // .json, .events, each optionally .gz).
  Result<DecodeSummary> WriteFile(const std::filesystem::path& output,
                                  std::string_view format = "");
  Result<DecodeSummary> Decode(DecodeListener& listener);

  [[nodiscard]] const std::filesystem::path& trace_dir() const;
  // The options Open was given; set_options changes them for the next
  // WriteFile or Decode (the snapshot is not checked again).
  [[nodiscard]] const DecodeOptions& options() const;
  void set_options(DecodeOptions options);

 private:
  struct Impl;
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptsnap
