#include "trace/jitdump.h"

#include <cstring>
#include <unordered_map>

#include "base/string_util.h"

namespace ptsnap::trace {
namespace {

// Little-endian reads (the only byte order supported; the host's).
class Reader {
 public:
  Reader(std::string_view s, size_t at, size_t end) : s_(s), at_(at), end_(end) {}
  template <typename T>
  bool Get(T& v) {
    if (end_ - at_ < sizeof(T)) return false;
    std::memcpy(&v, s_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // A NUL-terminated string (the NUL consumed).
  bool CString(std::string& out) {
    const size_t nul = s_.find('\0', at_);
    if (nul == std::string_view::npos || nul >= end_) return false;
    out.assign(s_.substr(at_, nul - at_));
    at_ = nul + 1;
    return true;
  }
  bool Bytes(uint64_t n, std::string_view& out) {
    if (end_ - at_ < n) return false;
    out = s_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return true;
  }

 private:
  std::string_view s_;
  size_t at_, end_;
};

// One record's body (after its prefix): empty when well-formed, else what
// is wrong with it. `pending`: the debug info not yet claimed by a load,
// by code address (index into out.debug).
std::string ParseRecord(uint32_t id, uint64_t timestamp, Reader r, Jitdump& out,
                        std::unordered_map<uint64_t, size_t>& pending) {
  switch (static_cast<JitdumpRecord>(id)) {
    case JitdumpRecord::kCodeLoad: {
      JitdumpCodeLoad l;
      l.timestamp = timestamp;
      uint64_t size = 0;
      if (!r.Get(l.pid) || !r.Get(l.tid) || !r.Get(l.vma) || !r.Get(l.code_addr) || !r.Get(size) ||
          !r.Get(l.code_index))
        return "JIT_CODE_LOAD shorter than its fields";
      if (!r.CString(l.name)) return "JIT_CODE_LOAD name is not NUL-terminated";
      if (!r.Bytes(size, l.code))
        return "JIT_CODE_LOAD code size " + std::to_string(size) + " runs past the record";
      if (l.code_addr + size < l.code_addr) return "JIT_CODE_LOAD code wraps around";
      if (auto it = pending.find(l.code_addr); it != pending.end()) {
        l.debug = it->second;
        pending.erase(it);
      }
      out.loads.push_back(std::move(l));
      return "";
    }
    case JitdumpRecord::kCodeMove: {
      JitdumpCodeMove m;
      m.timestamp = timestamp;
      if (!r.Get(m.pid) || !r.Get(m.tid) || !r.Get(m.vma) || !r.Get(m.old_code_addr) ||
          !r.Get(m.new_code_addr) || !r.Get(m.code_size) || !r.Get(m.code_index))
        return "JIT_CODE_MOVE shorter than its fields";
      out.moves.push_back(m);
      return "";
    }
    case JitdumpRecord::kDebugInfo: {
      JitdumpDebugInfo d;
      d.timestamp = timestamp;
      uint64_t n = 0;
      if (!r.Get(d.code_addr) || !r.Get(n)) return "JIT_CODE_DEBUG_INFO shorter than its fields";
      for (uint64_t i = 0; i < n; ++i) {
        JitdumpDebugEntry e;
        if (!r.Get(e.addr) || !r.Get(e.line) || !r.Get(e.discriminator) || !r.CString(e.file))
          return "JIT_CODE_DEBUG_INFO entry " + std::to_string(i) + " of " + std::to_string(n) +
                 " runs past the record";
        if (e.file == "\xff") e.file = d.entries.empty() ? "" : d.entries.back().file;
        // V8's entries lie kJitdumpV8EntryBias past their code (jitdump.h).
        if (out.header.from_v8() && e.addr >= kJitdumpV8EntryBias) e.addr -= kJitdumpV8EntryBias;
        d.entries.push_back(std::move(e));
      }
      pending[d.code_addr] = out.debug.size();
      out.debug.push_back(std::move(d));
      return "";
    }
    case JitdumpRecord::kCodeClose: out.closed = true; return "";
    case JitdumpRecord::kUnwindingInfo: {
      JitdumpUnwindingInfo u;
      u.timestamp = timestamp;
      if (!r.Get(u.unwinding_size) || !r.Get(u.eh_frame_hdr_size) || !r.Get(u.mapped_size))
        return "JIT_CODE_UNWINDING_INFO shorter than its fields";
      if (!r.Bytes(u.unwinding_size, u.data))
        return "JIT_CODE_UNWINDING_INFO size " + std::to_string(u.unwinding_size) +
               " runs past the record";
      if (u.eh_frame_hdr_size > u.unwinding_size)
        return "JIT_CODE_UNWINDING_INFO eh_frame_hdr size exceeds the unwinding data";
      out.unwinding.push_back(u);
      return "";
    }
  }
  out.unknown_records++;
  return "";
}

}  // namespace

Result<Jitdump> ParseJitdump(std::string_view text) {
  Jitdump out;
  JitdumpHeader& h = out.header;
  uint32_t magic = 0;
  Reader r(text, 0, text.size());
  if (!r.Get(magic)) return Error("not a jitdump (bad magic)");
  if (magic == kJitdumpMagicSwapped)
    return Error("a byte-swapped (big-endian) jitdump is not supported");
  if (magic != kJitdumpMagic) return Error("not a jitdump (bad magic)");
  if (!r.Get(h.version) || !r.Get(h.total_size) || !r.Get(h.elf_mach) || !r.Get(h.reserved) ||
      !r.Get(h.pid) || !r.Get(h.timestamp) || !r.Get(h.flags))
    return Error("jitdump header cut short (" + std::to_string(text.size()) + " bytes)");
  if (h.version != 1)
    return Error("jitdump version " + std::to_string(h.version) + " is not supported (only 1)");
  if (h.elf_mach != kJitdumpMachX8664)
    return Error("jitdump for ELF machine " + std::to_string(h.elf_mach) + ", not x86-64 (62)");
  if (h.total_size < kJitdumpHeaderSize || h.total_size > text.size())
    return Error("jitdump header size " + std::to_string(h.total_size) + " is out of range");
  size_t at = h.total_size;
  std::unordered_map<uint64_t, size_t> pending;
  while (at < text.size()) {
    uint32_t id = 0, size = 0;
    uint64_t timestamp = 0;
    Reader p(text, at, text.size());
    if (!p.Get(id) || !p.Get(size) || !p.Get(timestamp)) {
      out.torn_tail = true;
      break;
    }
    if (size < 16) {
      out.malformed = "record at offset " + std::to_string(at) + ": size " + std::to_string(size) +
                      " is smaller than its prefix";
      break;
    }
    if (size > text.size() - at) {
      out.torn_tail = true;
      break;
    }
    std::string why = ParseRecord(id, timestamp, Reader(text, at + 16, at + size), out, pending);
    if (!why.empty()) {
      out.malformed = "record at offset " + std::to_string(at) + ": " + why;
      break;
    }
    at += size;
  }
  return out;
}

std::optional<int32_t> JitdumpMarkerPid(std::string_view filename) {
  const size_t slash = filename.rfind('/');
  std::string_view base = slash == std::string_view::npos ? filename : filename.substr(slash + 1);
  constexpr std::string_view kPrefix = "jit-", kSuffix = ".dump";
  if (!base.starts_with(kPrefix) || !base.ends_with(kSuffix)) return std::nullopt;
  base = base.substr(kPrefix.size(), base.size() - kPrefix.size() - kSuffix.size());
  auto pid = base::ParseUint(base, 10);
  if (!pid || *pid == 0 || *pid > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*pid);
}

}  // namespace ptsnap::trace
