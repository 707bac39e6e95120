#include "output/fxt_reader.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/file_util.h"

namespace ptsnap::output {

namespace {

uint64_t Field(uint64_t w, int begin, int end) {
  int bits = end - begin + 1;
  uint64_t mask = bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  return (w >> begin) & mask;
}

// Reads up to `n` bytes into `out`; fewer only at the end of the input.
using ByteSource = std::function<Result<size_t>(char* out, size_t n)>;

// Records of the normal kinds are at most 4095 words (a 12-bit size); large
// records (type 15) are skipped in pieces of this size.
constexpr size_t kSkipChunk = size_t{1} << 16;

class Parser {
 public:
  Parser(ByteSource read, FxtTrace* trace, const std::function<void(FxtEvent&&)>* on_event)
      : read_(std::move(read)), trace_(*trace), on_event_(on_event) {}

  Result<void> Run() {
    char magic[8];
    PTSNAP_ASSIGN_OR_RETURN(size_t got, read_(magic, 8));
    uint64_t m = 0;
    if (got == 8) std::memcpy(&m, magic, 8);
    if (m != 0x0016547846040010ull) {
      return Error("not an FXT file: the first record is not the magic number record");
    }
    uint64_t pos = 8;
    std::string record;
    while (true) {
      char head[8];
      PTSNAP_ASSIGN_OR_RETURN(got, read_(head, 8));
      if (got == 0) break;
      if (got < 8) return Err(pos, "trailing bytes that are not a whole word");
      uint64_t h;
      std::memcpy(&h, head, 8);
      uint64_t type = Field(h, 0, 3);
      uint64_t words = type == 15 ? Field(h, 4, 35) : Field(h, 4, 15);
      if (words == 0) return Err(pos, "record of size 0");
      if (type == 15) {  // a large record: not interpreted, skipped by its size
        PTSNAP_TRY(Skip(pos, (words - 1) * 8));
        pos += words * 8;
        continue;
      }
      record.resize(words * 8);
      std::memcpy(record.data(), head, 8);
      PTSNAP_ASSIGN_OR_RETURN(got, read_(record.data() + 8, record.size() - 8));
      if (got < record.size() - 8) return Err(pos, "record runs past the end");
      rec_ = record;
      rpos_ = 8;
      Result<void> r = Record(type, h);
      if (!r) return std::move(r).error().AddContext("record at offset " + std::to_string(pos));
      pos += words * 8;
    }
    return Ok();
  }

 private:
  Result<void> Skip(uint64_t pos, uint64_t bytes) {
    std::string scratch(std::min<uint64_t>(bytes, kSkipChunk), '\0');
    while (bytes > 0) {
      const size_t n = std::min<uint64_t>(bytes, scratch.size());
      PTSNAP_ASSIGN_OR_RETURN(size_t got, read_(scratch.data(), n));
      if (got < n) return Err(pos, "record runs past the end");
      bytes -= n;
    }
    return Ok();
  }
  static Error Err(uint64_t pos, const std::string& what) {
    return Error("FXT record at offset " + std::to_string(pos) + ": " + what);
  }
  Result<uint64_t> Next() {
    if (rpos_ + 8 > rec_.size()) return Error("record shorter than its contents");
    uint64_t w;
    std::memcpy(&w, rec_.data() + rpos_, 8);
    rpos_ += 8;
    return w;
  }
  Result<std::string> Stream(size_t len) {
    size_t padded = (len + 7) / 8 * 8;
    if (rpos_ + padded > rec_.size()) return Error("string runs past its record");
    std::string s(rec_.substr(rpos_, len));
    rpos_ += padded;
    return s;
  }
  Result<std::string> StringRef(uint64_t ref) {
    if (ref == 0) return std::string();
    if (ref & 0x8000) return Stream(ref & 0x7fff);
    auto it = strings_.find(static_cast<uint16_t>(ref));
    if (it == strings_.end()) return Error("string ref " + std::to_string(ref) + " is not defined");
    return it->second;
  }

  Result<void> Args(uint64_t n, std::map<std::string, FxtArg>* out) {
    for (uint64_t i = 0; i < n; ++i) {
      PTSNAP_ASSIGN_OR_RETURN(uint64_t h, Next());
      uint64_t words = Field(h, 4, 15);
      if (words == 0) return Error("argument of size 0");
      size_t start = rpos_ - 8;
      if (start + words * 8 > rec_.size()) return Error("argument runs past its record");
      FxtArg a;
      a.type = static_cast<int>(Field(h, 0, 3));
      PTSNAP_ASSIGN_OR_RETURN(std::string name, StringRef(Field(h, 16, 31)));
      switch (a.type) {
        case 1:
        case 2: a.value = Field(h, 32, 63); break;
        case 3:
        case 4:
        case 5:
        case 7:
        case 8: {
          PTSNAP_ASSIGN_OR_RETURN(a.value, Next());
          break;
        }
        case 6: {
          PTSNAP_ASSIGN_OR_RETURN(a.str, StringRef(Field(h, 32, 47)));
          break;
        }
        case 9: a.value = Field(h, 32, 32); break;
        default: break;
      }
      if (rpos_ > start + words * 8) return Error("argument larger than its size field");
      rpos_ = start + words * 8;  // skip what we do not interpret, as Perfetto does
      (*out)[name] = std::move(a);
    }
    return Ok();
  }

  Result<void> Record(uint64_t type, uint64_t h) {
    switch (type) {
      case 0: {  // metadata
        uint64_t mtype = Field(h, 16, 19);
        if (mtype == 1) {
          PTSNAP_ASSIGN_OR_RETURN(trace_.provider, Stream(Field(h, 52, 59)));
        }
        return Ok();
      }
      case 1: {
        PTSNAP_ASSIGN_OR_RETURN(trace_.ticks_per_second, Next());
        return Ok();
      }
      case 2: {
        uint16_t index = static_cast<uint16_t>(Field(h, 16, 30));
        if (index == 0) return Error("string record with index 0");
        PTSNAP_ASSIGN_OR_RETURN(std::string s, Stream(Field(h, 32, 46)));
        strings_[index] = std::move(s);
        trace_.string_records++;
        if (index > trace_.max_string_index) trace_.max_string_index = index;
        return Ok();
      }
      case 3: {
        uint8_t index = static_cast<uint8_t>(Field(h, 16, 23));
        if (index == 0) return Error("thread record with index 0");
        PTSNAP_ASSIGN_OR_RETURN(uint64_t pid, Next());
        PTSNAP_ASSIGN_OR_RETURN(uint64_t tid, Next());
        threads_[index] = {pid, tid};
        return Ok();
      }
      case 4: return EventRecord(h);
      case 7: {
        uint64_t obj = Field(h, 16, 23);
        PTSNAP_ASSIGN_OR_RETURN(uint64_t koid, Next());
        PTSNAP_ASSIGN_OR_RETURN(std::string name, StringRef(Field(h, 24, 39)));
        std::map<std::string, FxtArg> args;
        PTSNAP_TRY(Args(Field(h, 40, 43), &args));
        if (obj == 1) trace_.processes[koid] = name;
        if (obj == 2) {
          auto it = args.find("process");
          if (it == args.end() || it->second.type != 8) {
            return Error("thread object without a koid \"process\" argument");
          }
          trace_.threads[koid] = {it->second.value, name};
        }
        return Ok();
      }
      default: return Ok();  // other records are skipped by size
    }
  }

  Result<void> EventRecord(uint64_t h) {
    FxtEvent e;
    e.type = static_cast<int>(Field(h, 16, 19));
    uint64_t nargs = Field(h, 20, 23);
    uint64_t thread = Field(h, 24, 31);
    PTSNAP_ASSIGN_OR_RETURN(e.ts, Next());
    if (thread == 0) {
      PTSNAP_ASSIGN_OR_RETURN(e.pid, Next());
      PTSNAP_ASSIGN_OR_RETURN(e.tid, Next());
    } else {
      auto it = threads_.find(static_cast<uint8_t>(thread));
      if (it == threads_.end()) return Error("thread ref " + std::to_string(thread) + " undefined");
      e.pid = it->second[0];
      e.tid = it->second[1];
    }
    PTSNAP_ASSIGN_OR_RETURN(e.category, StringRef(Field(h, 32, 47)));
    PTSNAP_ASSIGN_OR_RETURN(e.name, StringRef(Field(h, 48, 63)));
    PTSNAP_TRY(Args(nargs, &e.args));
    if (e.type == 4) {
      PTSNAP_ASSIGN_OR_RETURN(e.end_ts, Next());
    }
    if (on_event_ != nullptr) {
      (*on_event_)(std::move(e));
    } else {
      trace_.events.push_back(std::move(e));
    }
    return Ok();
  }

  ByteSource read_;
  std::string_view rec_;
  size_t rpos_ = 0;
  std::map<uint16_t, std::string> strings_;
  std::map<uint8_t, std::array<uint64_t, 2>> threads_;
  FxtTrace& trace_;
  const std::function<void(FxtEvent&&)>* on_event_;  // null: into trace_.events
};

ByteSource MemorySource(std::string_view bytes) {
  return [bytes, at = size_t{0}](char* out, size_t n) mutable -> Result<size_t> {
    n = std::min(n, bytes.size() - at);
    if (n != 0) std::memcpy(out, bytes.data() + at, n);
    at += n;
    return n;
  };
}

}  // namespace

Result<FxtTrace> ParseFxt(std::string_view bytes) {
  FxtTrace trace;
  PTSNAP_TRY(Parser(MemorySource(bytes), &trace, nullptr).Run());
  return trace;
}

Result<void> StreamFxt(std::string_view bytes, FxtTrace* trace,
                       const std::function<void(FxtEvent&&)>& on_event) {
  return Parser(MemorySource(bytes), trace, &on_event).Run();
}

Result<void> ReadFxtFile(const std::filesystem::path& path, FxtTrace* trace,
                         const std::function<void(FxtEvent&&)>& on_event) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (file == nullptr) return Error::FromErrno("opening " + path.string());
  gzFile f = file.get();
  gzbuffer(f, 1 << 17);
  ByteSource read = [&](char* out, size_t n) -> Result<size_t> {
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(f, out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* what = gzerror(f, &code);
        return Error(std::string("corrupt gzip data: ") + (what != nullptr ? what : "?"));
      }
      if (got == 0) {
        // A gzip member cut short reads as an early end: say so.
        int code = 0;
        const char* what = gzerror(f, &code);
        if (code != Z_OK && code != Z_STREAM_END)
          return Error(std::string("corrupt gzip data: ") + (what != nullptr ? what : "?"));
        break;
      }
      done += static_cast<size_t>(got);
    }
    return done;
  };
  Result<void> r = Parser(std::move(read), trace, &on_event).Run();
  if (!r) return std::move(r).error().AddContext(path.string());
  return Ok();
}

Result<std::string> ReadMaybeGzip(const std::filesystem::path& path) {
  auto read = base::ReadFile(path, size_t{1} << 30);
  if (!read) return std::move(read).error();
  std::string& raw = *read;
  if (raw.size() < 2 || raw.compare(0, 2, "\x1f\x8b") != 0) return std::move(raw);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Error("zlib: inflateInit failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  char buf[1 << 16];
  int r;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    r = inflate(&z, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END) {
      inflateEnd(&z);
      return Error(path.string() + ": corrupt gzip data");
    }
    out.append(buf, sizeof buf - z.avail_out);
  } while (r != Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

}  // namespace ptsnap::output
