#include "trace/perf_record.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/string_util.h"

namespace ptsnap::trace {
namespace {

// Layouts below follow include/uapi/linux/perf_event.h (enum perf_event_type
// comments). All fields are native-endian; ptsnap only records on x86-64.
constexpr size_t kHeaderSize = sizeof(perf_event_header);
static_assert(kHeaderSize == 8);
constexpr size_t kMinRecordSize = kHeaderSize + kSampleIdSize;
// header.size is a u16 and records are 8-byte aligned.
constexpr size_t kMaxRecordSize = 0xfff8;
constexpr size_t kBuildIdMax = 20;
// PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: the task was preempted (still runnable).
constexpr uint16_t kMiscSwitchOutPreempt = 1 << 14;

// The MMAP2 union: { u32 maj, min; u64 ino, ino_generation; } or
// { u8 build_id_size, __reserved_1; u16 __reserved_2; u8 build_id[20]; }.
constexpr size_t kMmap2UnionSize = 24;

std::string_view TypeName(uint32_t type) {
  switch (type) {
    case PERF_RECORD_MMAP: return "MMAP";
    case PERF_RECORD_LOST: return "LOST";
    case PERF_RECORD_COMM: return "COMM";
    case PERF_RECORD_EXIT: return "EXIT";
    case PERF_RECORD_THROTTLE: return "THROTTLE";
    case PERF_RECORD_UNTHROTTLE: return "UNTHROTTLE";
    case PERF_RECORD_FORK: return "FORK";
    case PERF_RECORD_READ: return "READ";
    case PERF_RECORD_SAMPLE: return "SAMPLE";
    case PERF_RECORD_MMAP2: return "MMAP2";
    case PERF_RECORD_AUX: return "AUX";
    case PERF_RECORD_ITRACE_START: return "ITRACE_START";
    case PERF_RECORD_LOST_SAMPLES: return "LOST_SAMPLES";
    case PERF_RECORD_SWITCH: return "SWITCH";
    case PERF_RECORD_SWITCH_CPU_WIDE: return "SWITCH_CPU_WIDE";
    case 16: return "NAMESPACES";
    case 17: return "KSYMBOL";
    case 18: return "BPF_EVENT";
    case 19: return "CGROUP";
    case kRecordTextPoke: return "TEXT_POKE";
    case 21: return "AUX_OUTPUT_HW_ID";
    default: return {};
  }
}

std::string TypeLabel(uint32_t type) {
  std::string_view name = TypeName(type);
  if (!name.empty()) return std::string(name);
  return "record type " + std::to_string(type);
}

// Reads fixed-size fields from an untrusted byte span. Every read is bounds
// checked and copies with memcpy (the input may be unaligned).
class Cursor {
 public:
  // `type` only names the record in error messages (built lazily: the
  // success path allocates nothing but the fields' own strings).
  Cursor(std::span<const std::byte> bytes, uint32_t type) : bytes_(bytes), type_(type) {}

  template <class T>
  Result<T> Get(std::string_view field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes_.size() - pos_ < sizeof(T)) return Short(field, sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> Bytes(size_t n, std::string_view field) {
    if (bytes_.size() - pos_ < n) return Short(field, n);
    std::string out(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return out;
  }

  // A NUL-terminated string that must end within the remaining body; the
  // bytes after the NUL are padding and are consumed too.
  Result<std::string> CString(std::string_view field) {
    const char* begin = reinterpret_cast<const char*>(bytes_.data() + pos_);
    size_t left = bytes_.size() - pos_;
    const void* nul = std::memchr(begin, '\0', left);
    if (nul == nullptr) {
      return Error(TypeLabel(type_) + ": " + std::string(field) +
                   " is not NUL-terminated within the record");
    }
    std::string out(begin, static_cast<size_t>(static_cast<const char*>(nul) - begin));
    pos_ = bytes_.size();
    return out;
  }

  void Skip(size_t n) { pos_ += std::min(n, bytes_.size() - pos_); }

 private:
  Error Short(std::string_view field, size_t need) const {
    return Error(TypeLabel(type_) + ": " + std::string(field) + " does not fit (needs " +
                 std::to_string(need) + " bytes at body offset " + std::to_string(pos_) +
                 ", body has " + std::to_string(bytes_.size()) + ")");
  }

  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  uint32_t type_;
};

#define PTSNAP_GET(lhs, cursor, T, field) \
  PTSNAP_ASSIGN_OR_RETURN(lhs, (cursor).template Get<T>(field))

Result<RecordBody> ParseBody(uint32_t type, uint16_t misc, std::span<const std::byte> body) {
  Cursor c(body, type);
  switch (type) {
    case PERF_RECORD_MMAP: {
      Mmap m;
      PTSNAP_GET(m.pid, c, uint32_t, "pid");
      PTSNAP_GET(m.tid, c, uint32_t, "tid");
      PTSNAP_GET(m.addr, c, uint64_t, "addr");
      PTSNAP_GET(m.len, c, uint64_t, "len");
      PTSNAP_GET(m.pgoff, c, uint64_t, "pgoff");
      PTSNAP_ASSIGN_OR_RETURN(m.filename, c.CString("filename"));
      return RecordBody(std::move(m));
    }
    case PERF_RECORD_MMAP2: {
      Mmap2 m;
      PTSNAP_GET(m.pid, c, uint32_t, "pid");
      PTSNAP_GET(m.tid, c, uint32_t, "tid");
      PTSNAP_GET(m.addr, c, uint64_t, "addr");
      PTSNAP_GET(m.len, c, uint64_t, "len");
      PTSNAP_GET(m.pgoff, c, uint64_t, "pgoff");
      if (misc & kMiscMmapBuildId) {
        PTSNAP_GET(uint8_t size, c, uint8_t, "build_id_size");
        c.Skip(3);  // __reserved_1, __reserved_2
        PTSNAP_ASSIGN_OR_RETURN(std::string id, c.Bytes(kBuildIdMax, "build_id"));
        if (size > kBuildIdMax) {
          return Error(TypeLabel(type) + ": build_id_size " + std::to_string(size) + " exceeds 20");
        }
        id.resize(size);
        m.build_id = std::move(id);
      } else {
        PTSNAP_GET(m.maj, c, uint32_t, "maj");
        PTSNAP_GET(m.min, c, uint32_t, "min");
        PTSNAP_GET(m.ino, c, uint64_t, "ino");
        PTSNAP_GET(m.ino_generation, c, uint64_t, "ino_generation");
      }
      PTSNAP_GET(m.prot, c, uint32_t, "prot");
      PTSNAP_GET(m.flags, c, uint32_t, "flags");
      PTSNAP_ASSIGN_OR_RETURN(m.filename, c.CString("filename"));
      return RecordBody(std::move(m));
    }
    case PERF_RECORD_COMM: {
      Comm m;
      PTSNAP_GET(m.pid, c, uint32_t, "pid");
      PTSNAP_GET(m.tid, c, uint32_t, "tid");
      PTSNAP_ASSIGN_OR_RETURN(m.comm, c.CString("comm"));
      m.exec = (misc & kMiscCommExec) != 0;
      return RecordBody(std::move(m));
    }
    case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK: {
      Task t;
      t.exit = type == PERF_RECORD_EXIT;
      PTSNAP_GET(t.pid, c, uint32_t, "pid");
      PTSNAP_GET(t.ppid, c, uint32_t, "ppid");
      PTSNAP_GET(t.tid, c, uint32_t, "tid");
      PTSNAP_GET(t.ptid, c, uint32_t, "ptid");
      PTSNAP_GET(t.time, c, uint64_t, "time");
      return RecordBody(t);
    }
    case PERF_RECORD_LOST: {
      Lost l;
      PTSNAP_GET(l.id, c, uint64_t, "id");
      PTSNAP_GET(l.lost, c, uint64_t, "lost");
      return RecordBody(l);
    }
    case PERF_RECORD_AUX: {
      Aux a;
      PTSNAP_GET(a.aux_offset, c, uint64_t, "aux_offset");
      PTSNAP_GET(a.aux_size, c, uint64_t, "aux_size");
      PTSNAP_GET(a.flags, c, uint64_t, "flags");
      return RecordBody(a);
    }
    case PERF_RECORD_ITRACE_START: {
      ItraceStart s;
      PTSNAP_GET(s.pid, c, uint32_t, "pid");
      PTSNAP_GET(s.tid, c, uint32_t, "tid");
      return RecordBody(s);
    }
    case PERF_RECORD_SWITCH: {
      Switch s;
      s.out = (misc & kMiscSwitchOut) != 0;
      return RecordBody(s);
    }
    case PERF_RECORD_SWITCH_CPU_WIDE: {
      Switch s;
      s.cpu_wide = true;
      s.out = (misc & kMiscSwitchOut) != 0;
      PTSNAP_GET(s.next_prev_pid, c, uint32_t, "next_prev_pid");
      PTSNAP_GET(s.next_prev_tid, c, uint32_t, "next_prev_tid");
      return RecordBody(s);
    }
    case 17: {  // PERF_RECORD_KSYMBOL
      Ksymbol k;
      PTSNAP_GET(k.addr, c, uint64_t, "addr");
      PTSNAP_GET(k.len, c, uint32_t, "len");
      PTSNAP_GET(k.ksym_type, c, uint16_t, "ksym_type");
      PTSNAP_GET(k.flags, c, uint16_t, "flags");
      PTSNAP_ASSIGN_OR_RETURN(k.name, c.CString("name"));
      return RecordBody(std::move(k));
    }
    case kRecordTextPoke: {
      // { u64 addr; u16 old_len, new_len; u8 bytes[old_len + new_len]; pad to 8 }
      TextPoke t;
      PTSNAP_GET(t.addr, c, uint64_t, "addr");
      PTSNAP_GET(uint16_t old_len, c, uint16_t, "old_len");
      PTSNAP_GET(uint16_t new_len, c, uint16_t, "new_len");
      PTSNAP_ASSIGN_OR_RETURN(t.old_bytes, c.Bytes(old_len, "old bytes"));
      PTSNAP_ASSIGN_OR_RETURN(t.new_bytes, c.Bytes(new_len, "new bytes"));
      return RecordBody(std::move(t));
    }
    default: {
      OtherRecord o;
      o.body.assign(reinterpret_cast<const char*>(body.data()), body.size());
      return RecordBody(std::move(o));
    }
  }
}

#undef PTSNAP_GET

// Appends trivially copyable values in native byte order.
class Writer {
 public:
  template <class T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void PutBytes(std::string_view s) { out_.append(s); }
  void PutCString(std::string_view s) {
    out_.append(s);
    out_.push_back('\0');
  }
  void PadTo8() { out_.resize((out_.size() + 7) & ~size_t{7}, '\0'); }
  [[nodiscard]] size_t size() const { return out_.size(); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// A string as the kernel would write it: up to its first NUL, and short
// enough that the record stays within kMaxRecordSize given `fixed` other
// bytes (header, fixed fields, trailer) and the terminating NUL.
std::string_view FitCString(std::string_view s, size_t fixed) {
  s = s.substr(0, s.find('\0'));
  size_t room = kMaxRecordSize - fixed - 1;
  return s.substr(0, room);
}

void SerializeBody(const RecordBody& body, Writer& w, uint32_t& type, uint16_t& misc) {
  constexpr size_t kFixed = kHeaderSize + kSampleIdSize;
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Mmap>) {
          type = PERF_RECORD_MMAP;
          w.Put(b.pid);
          w.Put(b.tid);
          w.Put(b.addr);
          w.Put(b.len);
          w.Put(b.pgoff);
          w.PutCString(FitCString(b.filename, kFixed + 32));
        } else if constexpr (std::is_same_v<T, Mmap2>) {
          type = PERF_RECORD_MMAP2;
          w.Put(b.pid);
          w.Put(b.tid);
          w.Put(b.addr);
          w.Put(b.len);
          w.Put(b.pgoff);
          if (!b.build_id.empty() || (misc & kMiscMmapBuildId)) {
            misc |= kMiscMmapBuildId;
            std::string id = b.build_id.substr(0, kBuildIdMax);
            w.Put(static_cast<uint8_t>(id.size()));
            w.Put(uint8_t{0});
            w.Put(uint16_t{0});
            id.resize(kBuildIdMax, '\0');
            w.PutBytes(id);
          } else {
            w.Put(b.maj);
            w.Put(b.min);
            w.Put(b.ino);
            w.Put(b.ino_generation);
          }
          w.Put(b.prot);
          w.Put(b.flags);
          w.PutCString(FitCString(b.filename, kFixed + 32 + kMmap2UnionSize + 8));
        } else if constexpr (std::is_same_v<T, Comm>) {
          type = PERF_RECORD_COMM;
          misc = static_cast<uint16_t>(b.exec ? (misc | kMiscCommExec) : (misc & ~kMiscCommExec));
          w.Put(b.pid);
          w.Put(b.tid);
          w.PutCString(FitCString(b.comm, kFixed + 8));
        } else if constexpr (std::is_same_v<T, Task>) {
          type = b.exit ? PERF_RECORD_EXIT : PERF_RECORD_FORK;
          w.Put(b.pid);
          w.Put(b.ppid);
          w.Put(b.tid);
          w.Put(b.ptid);
          w.Put(b.time);
        } else if constexpr (std::is_same_v<T, Lost>) {
          type = PERF_RECORD_LOST;
          w.Put(b.id);
          w.Put(b.lost);
        } else if constexpr (std::is_same_v<T, Aux>) {
          type = PERF_RECORD_AUX;
          w.Put(b.aux_offset);
          w.Put(b.aux_size);
          w.Put(b.flags);
        } else if constexpr (std::is_same_v<T, ItraceStart>) {
          type = PERF_RECORD_ITRACE_START;
          w.Put(b.pid);
          w.Put(b.tid);
        } else if constexpr (std::is_same_v<T, Switch>) {
          type = b.cpu_wide ? PERF_RECORD_SWITCH_CPU_WIDE : PERF_RECORD_SWITCH;
          misc = static_cast<uint16_t>(b.out ? (misc | kMiscSwitchOut) : (misc & ~kMiscSwitchOut));
          if (b.cpu_wide) {
            w.Put(b.next_prev_pid);
            w.Put(b.next_prev_tid);
          }
        } else if constexpr (std::is_same_v<T, Ksymbol>) {
          type = 17;
          w.Put(b.addr);
          w.Put(b.len);
          w.Put(b.ksym_type);
          w.Put(b.flags);
          w.PutCString(FitCString(b.name, kFixed + 16));
        } else if constexpr (std::is_same_v<T, TextPoke>) {
          type = kRecordTextPoke;
          size_t room = kMaxRecordSize - kFixed - 12;
          std::string_view old_bytes = std::string_view(b.old_bytes).substr(0, room);
          std::string_view new_bytes =
              std::string_view(b.new_bytes).substr(0, room - old_bytes.size());
          w.Put(b.addr);
          w.Put(static_cast<uint16_t>(old_bytes.size()));
          w.Put(static_cast<uint16_t>(new_bytes.size()));
          w.PutBytes(old_bytes);
          w.PutBytes(new_bytes);
        } else {
          static_assert(std::is_same_v<T, OtherRecord>);
          w.PutBytes(std::string_view(b.body).substr(0, kMaxRecordSize - kFixed));
        }
      },
      body);
  w.PadTo8();
}

std::string Hex(uint64_t v) { return base::Hex(v); }

std::string Prot(uint32_t prot, uint32_t flags) {
  std::string s = "----";
  if (prot & PROT_READ) s[0] = 'r';
  if (prot & PROT_WRITE) s[1] = 'w';
  if (prot & PROT_EXEC) s[2] = 'x';
  s[3] = (flags & MAP_SHARED) ? 's' : 'p';
  return s;
}

// pids and tids are u32 in the records but -1 means "kernel" / "none".
std::string Id(uint32_t v) { return std::to_string(static_cast<int32_t>(v)); }

}  // namespace

Result<ParsedRecord> ParseRecord(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderSize) {
    return Error("truncated record header: " + std::to_string(bytes.size()) + " of " +
                 std::to_string(kHeaderSize) + " bytes");
  }
  perf_event_header h;
  std::memcpy(&h, bytes.data(), kHeaderSize);
  if (h.size < kMinRecordSize) {
    return Error(TypeLabel(h.type) + ": header size " + std::to_string(h.size) +
                 " is smaller than header + sample_id trailer (" + std::to_string(kMinRecordSize) +
                 ")");
  }
  if (h.size > bytes.size()) {
    return Error(TypeLabel(h.type) + ": truncated: header size " + std::to_string(h.size) +
                 ", only " + std::to_string(bytes.size()) + " bytes left");
  }
  ParsedRecord out;
  out.size = h.size;
  out.record.type = h.type;
  out.record.misc = h.misc;
  // The trailer sits at the end of the record (uapi `struct sample_id`); the
  // body in between is variable-length.
  std::memcpy(&out.record.sample_id, bytes.data() + h.size - kSampleIdSize, kSampleIdSize);
  auto body = bytes.subspan(kHeaderSize, h.size - kMinRecordSize);
  PTSNAP_ASSIGN_OR_RETURN(out.record.body, ParseBody(h.type, h.misc, body));
  return out;
}

RecordScan ScanRecords(std::span<const std::byte> bytes) {
  RecordScan scan;
  size_t off = 0;
  while (off < bytes.size()) {
    auto rest = bytes.subspan(off);
    if (rest.size() < kHeaderSize) {
      scan.stream.truncated_tail = rest.size();
      break;
    }
    perf_event_header h;
    std::memcpy(&h, rest.data(), kHeaderSize);
    if (h.size >= kMinRecordSize && h.size > rest.size()) {
      // A record cut short by the end of the data: a recording that stopped
      // mid-write. Not an error.
      scan.stream.truncated_tail = rest.size();
      break;
    }
    auto parsed = ParseRecord(rest);
    if (!parsed) {
      scan.corrupt_offset = off;
      scan.corrupt_error = parsed.error().ToString();
      break;
    }
    off += parsed->size;
    scan.stream.records.push_back(std::move(parsed->record));
  }
  return scan;
}

Result<RecordStream> ParseRecords(std::span<const std::byte> bytes) {
  RecordScan scan = ScanRecords(bytes);
  if (scan.corrupt_offset) {
    return Error("corrupt perf record at offset " + std::to_string(*scan.corrupt_offset) + ": " +
                 scan.corrupt_error);
  }
  return std::move(scan.stream);
}

std::string SerializeRecord(const Record& record) {
  uint32_t type = record.type;
  uint16_t misc = record.misc;
  Writer body;
  SerializeBody(record.body, body, type, misc);
  perf_event_header h{};
  h.type = type;
  h.misc = misc;
  h.size = static_cast<uint16_t>(kHeaderSize + body.size() + kSampleIdSize);
  std::string out(kHeaderSize, '\0');
  std::memcpy(out.data(), &h, kHeaderSize);
  out += body.str();
  size_t at = out.size();
  out.resize(at + kSampleIdSize);
  std::memcpy(out.data() + at, &record.sample_id, kSampleIdSize);
  return out;
}

std::string DescribeRecord(const Record& record) {
  return std::visit(
      [&](const auto& b) -> std::string {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Mmap2>) {
          std::string s = "MMAP2 pid " + Id(b.pid) + " tid " + Id(b.tid) + " " + Hex(b.addr) + "+" +
                          Hex(b.len) + " pgoff " + Hex(b.pgoff) + " " + Prot(b.prot, b.flags) +
                          " " + b.filename;
          if (record.misc & kMiscMmapBuildId) {
            s += " build-id " + base::HexBytes(b.build_id);
          } else {
            s += " dev " + std::to_string(b.maj) + ":" + std::to_string(b.min) + " ino " +
                 std::to_string(b.ino);
          }
          return s;
        } else if constexpr (std::is_same_v<T, Mmap>) {
          return "MMAP pid " + Id(b.pid) + " tid " + Id(b.tid) + " " + Hex(b.addr) + "+" +
                 Hex(b.len) + " pgoff " + Hex(b.pgoff) + " " + b.filename;
        } else if constexpr (std::is_same_v<T, Comm>) {
          return std::string("COMM") + (b.exec ? " exec" : "") + " pid " + Id(b.pid) + " tid " +
                 Id(b.tid) + " " + b.comm;
        } else if constexpr (std::is_same_v<T, Task>) {
          return std::string(b.exit ? "EXIT" : "FORK") + " pid " + Id(b.pid) + " ppid " +
                 Id(b.ppid) + " tid " + Id(b.tid) + " ptid " + Id(b.ptid);
        } else if constexpr (std::is_same_v<T, Lost>) {
          return "LOST " + std::to_string(b.lost) + " records (id " + std::to_string(b.id) + ")";
        } else if constexpr (std::is_same_v<T, Aux>) {
          std::string s = "AUX offset " + Hex(b.aux_offset) + " size " + Hex(b.aux_size);
          if (b.flags & PERF_AUX_FLAG_TRUNCATED) s += " TRUNCATED";
          if (b.flags & PERF_AUX_FLAG_OVERWRITE) s += " OVERWRITE";
          if (b.flags & PERF_AUX_FLAG_PARTIAL) s += " PARTIAL";
          if (b.flags & PERF_AUX_FLAG_COLLISION) s += " COLLISION";
          return s;
        } else if constexpr (std::is_same_v<T, ItraceStart>) {
          return "ITRACE_START pid " + Id(b.pid) + " tid " + Id(b.tid);
        } else if constexpr (std::is_same_v<T, Switch>) {
          std::string s = b.cpu_wide ? "SWITCH_CPU_WIDE" : "SWITCH";
          s += b.out ? " out" : " in";
          if (record.misc & kMiscSwitchOutPreempt) s += " preempt";
          if (b.cpu_wide) {
            s += std::string(b.out ? " next" : " prev") + " pid " + Id(b.next_prev_pid) + " tid " +
                 Id(b.next_prev_tid);
          }
          return s;
        } else if constexpr (std::is_same_v<T, Ksymbol>) {
          return "KSYMBOL " + Hex(b.addr) + "+" + Hex(b.len) + " type " +
                 std::to_string(b.ksym_type) + " flags " + std::to_string(b.flags) + " " + b.name;
        } else if constexpr (std::is_same_v<T, TextPoke>) {
          return "TEXT_POKE " + Hex(b.addr) + " old " + base::HexBytes(b.old_bytes) + " new " +
                 base::HexBytes(b.new_bytes);
        } else {
          return TypeLabel(record.type) + " (" + std::to_string(b.body.size()) + " body bytes)";
        }
      },
      record.body);
}

}  // namespace ptsnap::trace
