// perf.data (file mode, "PERFILE2") layouts, a writer and a reader.
//
// Layout: tools/perf/Documentation/perf.data-file-format.txt in the Linux
// tree; record bodies: tools/lib/perf/include/perf/event.h; feature numbers:
// tools/perf/util/header.h. What Debian's perf 6.1 needs of a file, measured
// field by field: shared/reference/perf-data.md.
//
// A file is: the 104-byte header, an attrs section (perf_file_attr[]: a
// 128-byte perf_event_attr followed by the file section of its ids), the id
// arrays, the data section (records), then for each feature bit set in the
// header, in bit order, one perf_file_section and after that table the
// feature bodies.
//
// PerfDataWriter builds such a file in memory; ParsePerfData reads one back
// (header, attrs, ids, records, feature bodies). The reader never trusts a
// size or offset: corrupt input gives an error naming the field, never a
// crash (fuzzed in perf_data_fuzzer).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/le_bytes.h"
#include "ptsnap/result.h"

namespace ptsnap::exporter {

inline constexpr uint64_t kPerfMagic2 = 0x32454c4946524550ULL;  // "PERFILE2"
inline constexpr uint64_t kFileHeaderSize = 104;
// perf 6.1 rejects attr.size larger than what it knows; 128 (PERF_ATTR_SIZE_VER7)
// is accepted by every perf since 5.x.
inline constexpr uint32_t kAttrSize = 128;
inline constexpr uint64_t kFileAttrSize = kAttrSize + 16;  // attr + ids section

// perf.data-only records (tools/lib/perf/include/perf/event.h).
inline constexpr uint32_t kRecordFinishedRound = 68;
inline constexpr uint32_t kRecordAuxtraceInfo = 70;
inline constexpr uint32_t kRecordAuxtrace = 71;
inline constexpr uint32_t kRecordTimeConv = 79;
// struct perf_record_auxtrace without its payload; header.size is this, the
// payload (`size` bytes) follows and is not counted in header.size.
inline constexpr uint32_t kAuxtraceRecordSize = 48;
inline constexpr uint32_t kAuxtraceTypeIntelPt = 1;  // PERF_AUXTRACE_INTEL_PT

// Feature bits (tools/perf/util/header.h, enum HEADER_*).
inline constexpr int kFeatBuildId = 2;
inline constexpr int kFeatOsRelease = 4;
inline constexpr int kFeatCmdline = 11;
inline constexpr int kFeatEventDesc = 12;
inline constexpr int kFeatAuxtrace = 18;
inline constexpr int kFeatDirFormat = 24;

// The fields of perf_event_attr ptsnap writes; everything else is zero.
struct Attr {
  uint32_t type = 0;
  uint64_t config = 0;
  // sample_period, or sample_freq when `flags` has kAttrFreq. perf record
  // uses 1 for intel_pt.
  uint64_t sample_period = 1;
  uint64_t sample_type = 0;
  // Bits of the flags word (bit 0 disabled ... see uapi perf_event.h).
  uint64_t flags = 0;
  uint64_t branch_sample_type = 0;  // PERF_SAMPLE_BRANCH_* (BRANCH_STACK samples)
  uint64_t sample_regs_user = 0;    // REGS_USER samples: which registers
  uint32_t sample_stack_user = 0;   // STACK_USER samples: bytes of stack asked for
  uint16_t sample_max_stack = 0;    // CALLCHAIN depth cap, 0 = the kernel's default
  std::string name;                 // for the event-description feature
  std::vector<uint64_t> ids;        // sample ids that name this event
  friend bool operator==(const Attr&, const Attr&) = default;
};
// perf_event_attr flag bits used here (uapi perf_event.h bitfield order).
inline constexpr uint64_t kAttrDisabled = 1ULL << 0;
inline constexpr uint64_t kAttrExcludeKernel = 1ULL << 5;
inline constexpr uint64_t kAttrExcludeHv = 1ULL << 6;
inline constexpr uint64_t kAttrMmap = 1ULL << 8;
inline constexpr uint64_t kAttrComm = 1ULL << 9;
inline constexpr uint64_t kAttrFreq = 1ULL << 10;
inline constexpr uint64_t kAttrEnableOnExec = 1ULL << 12;
inline constexpr uint64_t kAttrTask = 1ULL << 13;
inline constexpr uint64_t kAttrSampleIdAll = 1ULL << 18;
inline constexpr uint64_t kAttrExcludeCallchainUser = 1ULL << 22;
inline constexpr uint64_t kAttrMmap2 = 1ULL << 23;
inline constexpr uint64_t kAttrCommExec = 1ULL << 24;
inline constexpr uint64_t kAttrContextSwitch = 1ULL << 26;

// One record of the data section. For AUXTRACE, `bytes` is the 48-byte
// record and `payload` the trace bytes that follow it.
struct DataRecord {
  uint64_t file_offset = 0;
  uint32_t type = 0;
  uint16_t misc = 0;
  std::string bytes;    // header included
  std::string payload;  // AUXTRACE only
};

// Builds a perf.data file in memory. Usage: add attrs, then records in file
// order, then features; Finish() lays the file out.
class PerfDataWriter {
 public:
  void AddAttr(Attr attr) { attrs_.push_back(std::move(attr)); }
  // A complete record (header included, header.size correct).
  void AddRecord(std::string record);
  // An AUXTRACE record followed by `payload`, zero-padded to 8 bytes; its
  // file offset goes into the AUXTRACE index feature.
  void AddAuxtrace(uint64_t offset, uint64_t reference, uint32_t idx, uint32_t tid, uint32_t cpu,
                   std::string_view payload);
  void SetFeature(int bit, std::string body) { features_[bit] = std::move(body); }
  // Lays out the file. The AUXTRACE index (feature 18) is written whenever
  // there are AUXTRACE records; the event description (12) from the attrs.
  std::string Finish();

 private:
  struct Pending {
    std::string bytes;
    bool auxtrace = false;
  };
  std::vector<Attr> attrs_;
  std::vector<Pending> records_;
  std::map<int, std::string> features_;
};

// Record builders (bodies per tools/lib/perf/include/perf/event.h).
std::string MakeHeader(uint32_t type, uint16_t misc, uint16_t size);
std::string MakeFinishedRound();
// priv[] as perf's intel_pt_info_fill() orders it (INTEL_PT_PMU_TYPE ...
// INTEL_PT_FILTER_STR_LEN), then the filter string NUL-padded to 8 bytes.
std::string MakeAuxtraceInfo(std::span<const uint64_t> priv, std::string_view filter);
std::string MakeTimeConv(uint64_t time_shift, uint64_t time_mult, uint64_t time_zero,
                         bool cap_user_time_zero);
// perf_header_string: u32 len (NUL-terminated, padded to 64), then bytes.
std::string HeaderString(std::string_view s);
// HEADER_BUILD_ID body entry: perf_record_header_build_id for one file.
std::string MakeBuildIdEntry(std::string_view raw_build_id, std::string_view filename, bool kernel);

// PERF_RECORD_SAMPLE records (the samples streams of a sampled trace, laid
// out by the sampling event's sample_type; uapi perf_event.h gives the field
// order: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, ...).
struct SampleRef {
  std::string_view bytes;  // the whole record, header included; points into the stream
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
};
struct SplitSamples {
  std::vector<SampleRef> samples;
  uint64_t other_records = 0;  // records of other types, skipped
  uint64_t torn_bytes = 0;     // a cut-short last record or a header that cannot be right
};
// Splits a samples stream into its records. Pure, never reads past
// `stream`; needs TID and TIME in `sample_type` (else an error naming them).
Result<SplitSamples> SplitSampleStream(std::string_view stream, uint64_t sample_type);
// `record` (a PERF_RECORD_SAMPLE laid out by `sample_type`) with its
// IDENTIFIER and ID fields set to `id`; a record too short for them is
// returned unchanged.
std::string WithSampleId(std::string_view record, uint64_t sample_type, uint64_t id);

// `record` (a PERF_RECORD_SAMPLE laid out by `sample_type`, whose
// REGS_USER holds the registers of `regs_user`) without its REGS_USER and
// STACK_USER fields, the header's size shrunk to match: the sample as a
// recording without those bits lays it out. nullopt when the fields before
// them do not fit the record, or `sample_type` has READ or BRANCH_STACK
// (not laid out here). Pure.
std::optional<std::string> WithoutUserRegsAndStack(std::string_view record, uint64_t sample_type,
                                                   uint64_t regs_user);

// What ParsePerfData found.
struct PerfData {
  uint64_t header_size = 0, attr_size = 0;
  uint64_t data_offset = 0, data_size = 0;
  std::vector<Attr> attrs;  // name empty; ids from the ids sections
  std::vector<DataRecord> records;
  std::map<int, std::string> features;  // bit -> body bytes
};
Result<PerfData> ParsePerfData(std::span<const std::byte> file);
inline Result<PerfData> ParsePerfData(std::string_view file) {
  return ParsePerfData(std::as_bytes(std::span(file.data(), file.size())));
}

// The AUXTRACE index feature body: (file offset, size) per AUXTRACE record.
struct AuxtraceIndexEntry {
  uint64_t file_offset = 0, size = 0;
  friend bool operator==(const AuxtraceIndexEntry&, const AuxtraceIndexEntry&) = default;
};
Result<std::vector<AuxtraceIndexEntry>> ParseAuxtraceIndex(std::string_view body);

// Reads a little-endian integer at `off` of `s` (caller checked the bounds).
using base::LoadLe;

}  // namespace ptsnap::exporter
