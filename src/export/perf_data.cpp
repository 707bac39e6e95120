#include "export/perf_data.h"

#include <linux/perf_event.h>

#include <cstring>

#include "base/le_bytes.h"

namespace ptsnap::exporter {

namespace {

template <typename T>
void Put(std::string& out, T v) {
  base::AppendLe(out, v);
}

template <typename T>
void PutAt(std::string& out, size_t off, T v) {
  std::memcpy(out.data() + off, &v, sizeof(T));
}

void PadTo8(std::string& out) { out.append((8 - out.size() % 8) % 8, '\0'); }

// perf_event_attr, first kAttrSize bytes (uapi perf_event.h field offsets).
std::string SerializeAttr(const Attr& a) {
  std::string out(kAttrSize, '\0');
  PutAt<uint32_t>(out, 0, a.type);
  PutAt<uint32_t>(out, 4, kAttrSize);
  PutAt<uint64_t>(out, 8, a.config);
  PutAt<uint64_t>(out, 16, a.sample_period);  // or sample_freq (flag freq)
  PutAt<uint64_t>(out, 24, a.sample_type);
  PutAt<uint64_t>(out, 40, a.flags);
  PutAt<uint64_t>(out, 72, a.branch_sample_type);
  PutAt<uint64_t>(out, 80, a.sample_regs_user);
  PutAt<uint32_t>(out, 88, a.sample_stack_user);
  PutAt<uint16_t>(out, 108, a.sample_max_stack);
  return out;
}

}  // namespace

std::string MakeHeader(uint32_t type, uint16_t misc, uint16_t size) {
  std::string out;
  Put<uint32_t>(out, type);
  Put<uint16_t>(out, misc);
  Put<uint16_t>(out, size);
  return out;
}

std::string MakeFinishedRound() { return MakeHeader(kRecordFinishedRound, 0, 8); }

std::string MakeAuxtraceInfo(std::span<const uint64_t> priv, std::string_view filter) {
  std::string body;
  Put<uint32_t>(body, kAuxtraceTypeIntelPt);
  Put<uint32_t>(body, 0);  // reserved__
  for (uint64_t v : priv) Put<uint64_t>(body, v);
  if (!filter.empty()) {
    body.append(filter);
    body.push_back('\0');
    PadTo8(body);
  }
  return MakeHeader(kRecordAuxtraceInfo, 0, static_cast<uint16_t>(8 + body.size())) + body;
}

std::string MakeTimeConv(uint64_t time_shift, uint64_t time_mult, uint64_t time_zero,
                         bool cap_user_time_zero) {
  std::string body;
  Put<uint64_t>(body, time_shift);
  Put<uint64_t>(body, time_mult);
  Put<uint64_t>(body, time_zero);
  Put<uint64_t>(body, 0);  // time_cycles: cap_user_time_short is off
  Put<uint64_t>(body, 0);  // time_mask
  Put<uint8_t>(body, cap_user_time_zero ? 1 : 0);
  Put<uint8_t>(body, 0);  // cap_user_time_short
  body.append(6, '\0');
  return MakeHeader(kRecordTimeConv, 0, static_cast<uint16_t>(8 + body.size())) + body;
}

std::string HeaderString(std::string_view s) {
  // tools/perf/util/header.c do_write_string(): len includes the NUL and is
  // rounded up to NAME_ALIGN (64).
  uint32_t len = static_cast<uint32_t>((s.size() + 1 + 63) / 64 * 64);
  std::string out;
  Put<uint32_t>(out, len);
  out.append(s);
  out.append(len - s.size(), '\0');
  return out;
}

std::string MakeBuildIdEntry(std::string_view raw_build_id, std::string_view filename,
                             bool kernel) {
  // struct perf_record_header_build_id: header, pid, build_id[24] (data[20],
  // size, reserved), filename padded to 64 (write_buildid()).
  std::string body;
  Put<int32_t>(body, -1);  // pid: HOST_KERNEL_ID, the host machine
  std::string id(raw_build_id.substr(0, 20));
  body.append(id);
  body.append(20 - id.size(), '\0');
  Put<uint8_t>(body, static_cast<uint8_t>(id.size()));
  body.append(3, '\0');
  size_t name_len = (filename.size() + 1 + 63) / 64 * 64;
  body.append(filename);
  body.append(name_len - filename.size(), '\0');
  // PERF_RECORD_MISC_KERNEL 1 / USER 2; PERF_RECORD_MISC_BUILD_ID_SIZE (1 << 15).
  uint16_t misc = static_cast<uint16_t>((kernel ? 1 : 2) | (1 << 15));
  return MakeHeader(0, misc, static_cast<uint16_t>(8 + body.size())) + body;
}

void PerfDataWriter::AddRecord(std::string record) { records_.push_back({std::move(record)}); }

void PerfDataWriter::AddAuxtrace(uint64_t offset, uint64_t reference, uint32_t idx, uint32_t tid,
                                 uint32_t cpu, std::string_view payload) {
  uint64_t padded = (payload.size() + 7) / 8 * 8;
  std::string rec = MakeHeader(kRecordAuxtrace, 0, kAuxtraceRecordSize);
  Put<uint64_t>(rec, padded);
  Put<uint64_t>(rec, offset);
  Put<uint64_t>(rec, reference);
  Put<uint32_t>(rec, idx);
  Put<uint32_t>(rec, tid);
  Put<uint32_t>(rec, cpu);
  Put<uint32_t>(rec, 0);
  rec.append(payload);
  // Zero padding decodes as PAD packets.
  rec.append(padded - payload.size(), '\0');
  records_.push_back({std::move(rec), true});
}

std::string PerfDataWriter::Finish() {
  std::string out(kFileHeaderSize, '\0');
  // ids arrays first, right after the header, then the attrs section.
  std::vector<std::pair<uint64_t, uint64_t>> id_sections;
  for (const Attr& a : attrs_) {
    id_sections.emplace_back(out.size(), a.ids.size() * 8);
    for (uint64_t id : a.ids) Put<uint64_t>(out, id);
  }
  uint64_t attrs_offset = out.size();
  for (size_t i = 0; i < attrs_.size(); ++i) {
    out += SerializeAttr(attrs_[i]);
    Put<uint64_t>(out, id_sections[i].first);
    Put<uint64_t>(out, id_sections[i].second);
  }
  uint64_t attrs_size = out.size() - attrs_offset;
  uint64_t data_offset = out.size();
  std::string index;
  uint64_t n_aux = 0;
  for (const Pending& r : records_) {
    if (r.auxtrace) {
      Put<uint64_t>(index, out.size());
      // perf's index entry size is header.size (48), not counting the payload:
      // auxtrace_queues__process_index_entry() rejects anything else.
      Put<uint64_t>(index, kAuxtraceRecordSize);
      ++n_aux;
    }
    out += r.bytes;
  }
  uint64_t data_size = out.size() - data_offset;

  std::map<int, std::string> features = features_;
  if (n_aux > 0) {
    std::string body;
    Put<uint64_t>(body, n_aux);
    features[kFeatAuxtrace] = body + index;
  }
  if (!attrs_.empty() && features.count(kFeatEventDesc) == 0) {
    std::string body;
    Put<uint32_t>(body, static_cast<uint32_t>(attrs_.size()));
    Put<uint32_t>(body, kAttrSize);
    for (const Attr& a : attrs_) {
      body += SerializeAttr(a);
      Put<uint32_t>(body, static_cast<uint32_t>(a.ids.size()));
      body += HeaderString(a.name);
      for (uint64_t id : a.ids) Put<uint64_t>(body, id);
    }
    features[kFeatEventDesc] = body;
  }
  // Feature section table, then bodies.
  uint64_t table_offset = out.size();
  out.append(features.size() * 16, '\0');
  size_t slot = 0;
  for (const auto& [bit, body] : features) {
    PutAt<uint64_t>(out, table_offset + slot * 16, out.size());
    PutAt<uint64_t>(out, table_offset + slot * 16 + 8, body.size());
    out += body;
    ++slot;
  }

  PutAt<uint64_t>(out, 0, kPerfMagic2);
  PutAt<uint64_t>(out, 8, kFileHeaderSize);
  PutAt<uint64_t>(out, 16, kFileAttrSize);
  PutAt<uint64_t>(out, 24, attrs_offset);
  PutAt<uint64_t>(out, 32, attrs_size);
  PutAt<uint64_t>(out, 40, data_offset);
  PutAt<uint64_t>(out, 48, data_size);
  // event_types section (56, 64): unused since perf 3.x, left zero.
  for (const auto& [bit, body] : features) {
    size_t byte = 72 + static_cast<size_t>(bit) / 8;
    out[byte] = static_cast<char>(out[byte] | (1 << (bit % 8)));
  }
  return out;
}

Result<PerfData> ParsePerfData(std::span<const std::byte> bytes) {
  std::string_view f(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (f.size() < kFileHeaderSize) return Error("perf.data: file shorter than its 104-byte header");
  if (LoadLe<uint64_t>(f, 0) != kPerfMagic2) return Error("perf.data: bad magic (not PERFILE2)");
  PerfData pd;
  pd.header_size = LoadLe<uint64_t>(f, 8);
  pd.attr_size = LoadLe<uint64_t>(f, 16);
  if (pd.header_size != kFileHeaderSize) return Error("perf.data: header size is not 104");
  if (pd.attr_size < 16 + 48 || pd.attr_size > 4096)
    return Error("perf.data: attr_size out of range");
  uint64_t attrs_off = LoadLe<uint64_t>(f, 24), attrs_size = LoadLe<uint64_t>(f, 32);
  pd.data_offset = LoadLe<uint64_t>(f, 40);
  pd.data_size = LoadLe<uint64_t>(f, 48);
  auto in_file = [&](uint64_t off, uint64_t size) {
    return off <= f.size() && size <= f.size() - off;
  };
  if (!in_file(attrs_off, attrs_size)) return Error("perf.data: attrs section outside the file");
  if (attrs_size % pd.attr_size != 0)
    return Error("perf.data: attrs section is not a multiple of attr_size");
  if (!in_file(pd.data_offset, pd.data_size))
    return Error("perf.data: data section outside the file");

  for (uint64_t off = attrs_off; off < attrs_off + attrs_size; off += pd.attr_size) {
    Attr a;
    a.type = LoadLe<uint32_t>(f, off);
    a.config = LoadLe<uint64_t>(f, off + 8);
    a.sample_period = LoadLe<uint64_t>(f, off + 16);
    a.sample_type = LoadLe<uint64_t>(f, off + 24);
    a.flags = LoadLe<uint64_t>(f, off + 40);
    if (pd.attr_size >= 16 + 112) {  // fields of PERF_ATTR_SIZE_VER5 (112 bytes)
      a.branch_sample_type = LoadLe<uint64_t>(f, off + 72);
      a.sample_regs_user = LoadLe<uint64_t>(f, off + 80);
      a.sample_stack_user = LoadLe<uint32_t>(f, off + 88);
      a.sample_max_stack = LoadLe<uint16_t>(f, off + 108);
    }
    uint64_t ids_off = LoadLe<uint64_t>(f, off + pd.attr_size - 16);
    uint64_t ids_size = LoadLe<uint64_t>(f, off + pd.attr_size - 8);
    if (!in_file(ids_off, ids_size) || ids_size % 8 != 0)
      return Error("perf.data: ids section of attr " + std::to_string(pd.attrs.size()) +
                   " outside the file");
    for (uint64_t i = 0; i < ids_size; i += 8) a.ids.push_back(LoadLe<uint64_t>(f, ids_off + i));
    pd.attrs.push_back(std::move(a));
  }

  uint64_t end = pd.data_offset + pd.data_size;
  for (uint64_t off = pd.data_offset; off < end;) {
    if (end - off < 8)
      return Error("perf.data: record header at offset " + std::to_string(off) + " cut short");
    DataRecord r;
    r.file_offset = off;
    r.type = LoadLe<uint32_t>(f, off);
    r.misc = LoadLe<uint16_t>(f, off + 4);
    uint16_t size = LoadLe<uint16_t>(f, off + 6);
    if (size < 8 || size > end - off)
      return Error("perf.data: record at offset " + std::to_string(off) + " has bad size " +
                   std::to_string(size));
    r.bytes = std::string(f.substr(off, size));
    off += size;
    if (r.type == kRecordAuxtrace) {
      if (size < kAuxtraceRecordSize)
        return Error("perf.data: AUXTRACE record at offset " + std::to_string(r.file_offset) +
                     " shorter than 48 bytes");
      uint64_t payload = LoadLe<uint64_t>(r.bytes, 8);
      if (payload > end - off)
        return Error("perf.data: AUXTRACE payload at offset " + std::to_string(r.file_offset) +
                     " runs past the data section");
      r.payload = std::string(f.substr(off, payload));
      off += payload;
    }
    pd.records.push_back(std::move(r));
  }

  // Feature table right after the data section: one section per set bit.
  uint64_t table = end;
  for (int bit = 0; bit < 256; ++bit) {
    unsigned char byte = static_cast<unsigned char>(f[72 + bit / 8]);
    if ((byte & (1 << (bit % 8))) == 0) continue;
    if (!in_file(table, 16)) return Error("perf.data: feature table outside the file");
    uint64_t off = LoadLe<uint64_t>(f, table), size = LoadLe<uint64_t>(f, table + 8);
    if (!in_file(off, size))
      return Error("perf.data: feature " + std::to_string(bit) + " body outside the file");
    pd.features[bit] = std::string(f.substr(off, size));
    table += 16;
  }
  return pd;
}

namespace {

// Byte offsets of the leading fixed fields of a PERF_RECORD_SAMPLE body
// (after the 8-byte header), in the kernel's order (perf_output_sample()).
struct SampleFields {
  int identifier = -1, tid = -1, time = -1, id = -1;
  size_t fixed_end = 8;  // end of the fields up to and including ID
};
SampleFields LayOut(uint64_t sample_type) {
  SampleFields f;
  size_t off = 8;
  if (sample_type & PERF_SAMPLE_IDENTIFIER) f.identifier = static_cast<int>(off), off += 8;
  if (sample_type & PERF_SAMPLE_IP) off += 8;
  if (sample_type & PERF_SAMPLE_TID) f.tid = static_cast<int>(off), off += 8;
  if (sample_type & PERF_SAMPLE_TIME) f.time = static_cast<int>(off), off += 8;
  if (sample_type & PERF_SAMPLE_ADDR) off += 8;
  if (sample_type & PERF_SAMPLE_ID) f.id = static_cast<int>(off), off += 8;
  f.fixed_end = off;
  return f;
}

}  // namespace

Result<SplitSamples> SplitSampleStream(std::string_view stream, uint64_t sample_type) {
  if ((sample_type & PERF_SAMPLE_TID) == 0 || (sample_type & PERF_SAMPLE_TIME) == 0)
    return Error("samples without TID and TIME in sample_type cannot be exported");
  const SampleFields f = LayOut(sample_type);
  SplitSamples out;
  size_t off = 0;
  while (off < stream.size()) {
    if (stream.size() - off < 8) break;
    uint32_t type = LoadLe<uint32_t>(stream, off);
    uint16_t size = LoadLe<uint16_t>(stream, off + 6);
    if (size < 8 || size > stream.size() - off) break;
    std::string_view rec = stream.substr(off, size);
    off += size;
    if (type != PERF_RECORD_SAMPLE || rec.size() < f.fixed_end) {
      ++out.other_records;
      continue;
    }
    out.samples.push_back({rec, LoadLe<uint32_t>(rec, static_cast<size_t>(f.tid)),
                           LoadLe<uint32_t>(rec, static_cast<size_t>(f.tid) + 4),
                           LoadLe<uint64_t>(rec, static_cast<size_t>(f.time))});
  }
  out.torn_bytes = stream.size() - off;
  return out;
}

std::string WithSampleId(std::string_view record, uint64_t sample_type, uint64_t id) {
  std::string out(record);
  const SampleFields f = LayOut(sample_type);
  if (out.size() < f.fixed_end) return out;
  if (f.identifier >= 0) PutAt<uint64_t>(out, static_cast<size_t>(f.identifier), id);
  if (f.id >= 0) PutAt<uint64_t>(out, static_cast<size_t>(f.id), id);
  return out;
}

std::optional<std::string> WithoutUserRegsAndStack(std::string_view record, uint64_t sample_type,
                                                   uint64_t regs_user) {
  constexpr uint64_t kUnsupported = PERF_SAMPLE_READ | PERF_SAMPLE_BRANCH_STACK;
  if ((sample_type & kUnsupported) != 0) return std::nullopt;
  // perf_output_sample()'s order: the fixed u64 fields, CALLCHAIN, RAW,
  // then REGS_USER and STACK_USER.
  size_t off = 8;
  for (uint64_t bit :
       {PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR,
        PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU, PERF_SAMPLE_PERIOD}) {
    if ((sample_type & bit) != 0) off += 8;
  }
  auto fits = [&](uint64_t n) { return off <= record.size() && n <= record.size() - off; };
  if ((sample_type & PERF_SAMPLE_CALLCHAIN) != 0) {
    if (!fits(8)) return std::nullopt;
    const uint64_t nr = LoadLe<uint64_t>(record, off);
    off += 8;
    if (nr > record.size() / 8 || !fits(nr * 8)) return std::nullopt;
    off += nr * 8;
  }
  if ((sample_type & PERF_SAMPLE_RAW) != 0) {
    if (!fits(4)) return std::nullopt;
    const uint32_t size = LoadLe<uint32_t>(record, off);
    if (!fits(uint64_t{4} + size)) return std::nullopt;
    off += 4 + size;
  }
  const size_t cut_from = off;
  if ((sample_type & PERF_SAMPLE_REGS_USER) != 0) {
    if (!fits(8)) return std::nullopt;
    const uint64_t abi = LoadLe<uint64_t>(record, off);
    off += 8;
    const uint64_t regs = abi != 0 ? 8 * static_cast<uint64_t>(__builtin_popcountll(regs_user)) : 0;
    if (!fits(regs)) return std::nullopt;
    off += regs;
  }
  if ((sample_type & PERF_SAMPLE_STACK_USER) != 0) {
    if (!fits(8)) return std::nullopt;
    const uint64_t size = LoadLe<uint64_t>(record, off);
    off += 8;
    if (size != 0) {
      if (size > record.size() || !fits(size + 8)) return std::nullopt;
      off += size + 8;  // the copy, then dyn_size
    }
  }
  std::string out(record.substr(0, cut_from));
  out.append(record.substr(off));
  if (out.size() > 0xffff) return std::nullopt;
  PutAt<uint16_t>(out, 6, static_cast<uint16_t>(out.size()));
  return out;
}

Result<std::vector<AuxtraceIndexEntry>> ParseAuxtraceIndex(std::string_view body) {
  if (body.size() < 8) return Error("AUXTRACE index: shorter than its count");
  uint64_t n = LoadLe<uint64_t>(body, 0);
  if (n > (body.size() - 8) / 16) return Error("AUXTRACE index: count exceeds the body");
  std::vector<AuxtraceIndexEntry> out;
  for (uint64_t i = 0; i < n; ++i)
    out.push_back({LoadLe<uint64_t>(body, 8 + i * 16), LoadLe<uint64_t>(body, 16 + i * 16)});
  return out;
}

}  // namespace ptsnap::exporter
