// Perf sideband records: the kernel's data-ring layout (uapi perf_event.h),
// as stored in a trace directory's `sideband.data`.
//
// Every record is `struct perf_event_header` + body + a `sample_id` trailer.
// ptsnap always opens events with sample_id_all=1 and
// sample_type = TID | TIME | CPU | IDENTIFIER (kSampleType), so the trailer is
// exactly kSampleIdSize bytes: { u32 pid, tid; u64 time; u32 cpu, res; u64 id }.
// The emulated source writes the same bytes, so one parser serves both.
//
// Parsing is pure and never trusts sizes: a truncated or corrupt record
// yields an error for that record, not a crash (fuzzed in perf_record_fuzzer).
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::trace {

inline constexpr uint64_t kSampleType =
    PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;

// The trailer ptsnap's kSampleType produces, in kernel order.
struct SampleId {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time = 0;  // perf clock ns
  uint32_t cpu = 0;
  uint32_t res = 0;
  uint64_t id = 0;  // PERF_SAMPLE_IDENTIFIER: which event wrote it
  friend bool operator==(const SampleId&, const SampleId&) = default;
};
inline constexpr size_t kSampleIdSize = 32;
static_assert(sizeof(SampleId) == kSampleIdSize, "trailer layout must match kSampleType");

// PERF_RECORD_TEXT_POKE and PERF_RECORD_AUX_OUTPUT_HW_ID may be missing from
// old uapi headers.
inline constexpr uint32_t kRecordTextPoke = 20;
inline constexpr uint16_t kMiscMmapBuildId = 1 << 14;  // PERF_RECORD_MISC_MMAP_BUILD_ID
inline constexpr uint16_t kMiscCommExec = 1 << 13;     // PERF_RECORD_MISC_COMM_EXEC
inline constexpr uint16_t kMiscSwitchOut = 1 << 13;    // PERF_RECORD_MISC_SWITCH_OUT

struct Mmap2 {
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  // Either device/inode (build_id empty) or a build-id (misc has kMiscMmapBuildId).
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0, ino_generation = 0;
  std::string build_id;  // raw bytes, up to 20
  uint32_t prot = 0, flags = 0;
  std::string filename;
  friend bool operator==(const Mmap2&, const Mmap2&) = default;
};
struct Mmap {  // PERF_RECORD_MMAP (kernel text, old kernels)
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  std::string filename;
  friend bool operator==(const Mmap&, const Mmap&) = default;
};
struct Comm {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  bool exec = false;  // kMiscCommExec
  friend bool operator==(const Comm&, const Comm&) = default;
};
struct Task {  // PERF_RECORD_FORK or PERF_RECORD_EXIT
  bool exit = false;
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
  friend bool operator==(const Task&, const Task&) = default;
};
struct Lost {
  uint64_t id = 0, lost = 0;
  friend bool operator==(const Lost&, const Lost&) = default;
};
struct Aux {
  uint64_t aux_offset = 0, aux_size = 0, flags = 0;  // PERF_AUX_FLAG_*
  friend bool operator==(const Aux&, const Aux&) = default;
};
struct ItraceStart {
  uint32_t pid = 0, tid = 0;
  friend bool operator==(const ItraceStart&, const ItraceStart&) = default;
};
struct Switch {  // PERF_RECORD_SWITCH, or SWITCH_CPU_WIDE with next/prev ids
  bool out = false;
  bool cpu_wide = false;
  uint32_t next_prev_pid = 0, next_prev_tid = 0;
  friend bool operator==(const Switch&, const Switch&) = default;
};
struct TextPoke {
  uint64_t addr = 0;
  std::string old_bytes, new_bytes;
  friend bool operator==(const TextPoke&, const TextPoke&) = default;
};
struct Ksymbol {
  uint64_t addr = 0;
  uint32_t len = 0;
  uint16_t ksym_type = 0, flags = 0;
  std::string name;
  friend bool operator==(const Ksymbol&, const Ksymbol&) = default;
};
// Any other type: kept as raw body bytes.
struct OtherRecord {
  std::string body;
  friend bool operator==(const OtherRecord&, const OtherRecord&) = default;
};

using RecordBody = std::variant<Mmap2, Mmap, Comm, Task, Lost, Aux, ItraceStart, Switch, TextPoke,
                                Ksymbol, OtherRecord>;

struct Record {
  uint32_t type = 0;  // PERF_RECORD_*
  uint16_t misc = 0;
  SampleId sample_id;
  RecordBody body;
  friend bool operator==(const Record&, const Record&) = default;
};

// Parses one record from the start of `bytes`. On success also returns the
// number of bytes consumed (header.size). Errors name the record type and the
// field that did not fit.
struct ParsedRecord {
  Record record;
  size_t size = 0;
};
Result<ParsedRecord> ParseRecord(std::span<const std::byte> bytes);

// Parses a whole stream of records (a sideband.data file). A trailing partial
// record (a recording cut short) is not an error: `truncated_tail` counts its
// bytes. A record whose header is corrupt (size < header + trailer) stops
// parsing with an error that says at which offset.
struct RecordStream {
  std::vector<Record> records;
  size_t truncated_tail = 0;
};
Result<RecordStream> ParseRecords(std::span<const std::byte> bytes);

// As ParseRecords, but never fails: parsing stops at the first corrupt record
// and says where (used by TraceReader to tolerate a zero-filled torn tail).
struct RecordScan {
  RecordStream stream;
  std::optional<size_t> corrupt_offset;  // set when a corrupt record stopped the scan
  std::string corrupt_error;             // ParseRecord's error for it
};
RecordScan ScanRecords(std::span<const std::byte> bytes);

// Serialises a record, with header and trailer, exactly as the kernel would
// (8-byte aligned, strings NUL-padded). Used by the emulated source, by
// `attach` to synthesise mmap2 records from /proc/PID/maps, and by tests.
//
// The body decides what is written: the header type comes from the body
// (Task::exit picks EXIT or FORK, Switch::cpu_wide SWITCH or SWITCH_CPU_WIDE;
// `record.type` is used only for OtherRecord), and the misc bits the body
// models (Comm::exec, Switch::out, and for Mmap2 the build-id form, chosen
// when build_id is non-empty or misc already has kMiscMmapBuildId) override
// `record.misc`. Strings end at their first NUL; a build_id is cut to 20
// bytes; a record that would exceed the u16 size limit has its string or
// byte fields cut so that it fits.
std::string SerializeRecord(const Record& record);

// Human-readable one-liner ("MMAP2 pid 12 tid 12 0x5555..+0x1000 r-xp /bin/ls").
std::string DescribeRecord(const Record& record);

}  // namespace ptsnap::trace
