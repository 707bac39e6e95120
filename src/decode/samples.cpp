#include "decode/samples.h"

#include <bit>
#include <cstring>

#include "decode/symbols.h"

namespace ptsnap::decode {

namespace {

constexpr size_t kHeaderSize = sizeof(perf_event_header);

// Reads the fields of a record body in order; every read checks the size.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> b) : b_(b) {}
  bool U64(uint64_t* v) {
    if (b_.size() - off_ < 8) return false;
    std::memcpy(v, b_.data() + off_, 8);
    off_ += 8;
    return true;
  }
  bool U32Pair(uint32_t* a, uint32_t* b) {
    uint64_t v = 0;
    if (!U64(&v)) return false;
    *a = static_cast<uint32_t>(v);
    *b = static_cast<uint32_t>(v >> 32);
    return true;
  }
  bool U32(uint32_t* v) {
    if (b_.size() - off_ < 4) return false;
    std::memcpy(v, b_.data() + off_, 4);
    off_ += 4;
    return true;
  }
  // `n` bytes, or false when fewer are left.
  bool Bytes(uint64_t n, std::span<const std::byte>* out) {
    if (b_.size() - off_ < n) return false;
    *out = b_.subspan(off_, n);
    off_ += n;
    return true;
  }
  bool Skip(uint64_t n) {
    std::span<const std::byte> ignored;
    return Bytes(n, &ignored);
  }
  [[nodiscard]] size_t left() const { return b_.size() - off_; }

 private:
  std::span<const std::byte> b_;
  size_t off_ = 0;
};

Error Missing(const char* field) {
  return Error(std::string("sample: ") + field + " does not fit");
}

// PERF_SAMPLE_READ: struct read_format (perf_event_open(2)).
bool SkipRead(Cursor& c, uint64_t read_format) {
  uint64_t per_value = 1 + ((read_format & PERF_FORMAT_ID) != 0 ? 1 : 0) +
                       ((read_format & (1u << 4) /*PERF_FORMAT_LOST*/) != 0 ? 1 : 0);
  uint64_t header = ((read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) != 0 ? 1 : 0) +
                    ((read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) != 0 ? 1 : 0);
  if ((read_format & PERF_FORMAT_GROUP) == 0) return c.Skip((header + per_value) * 8);
  uint64_t nr = 0;
  if (!c.U64(&nr)) return false;
  if (nr > c.left() / 8 / per_value) return false;
  return c.Skip((header + nr * per_value) * 8);
}

bool IsContext(uint64_t e) { return e >= static_cast<uint64_t>(PERF_CONTEXT_MAX); }

}  // namespace

Result<void> ParseSampleBody(std::span<const std::byte> body, const SampleLayout& layout,
                             Sample* out) {
  const uint64_t t = layout.sample_type;
  out->id = out->ip = out->time = out->addr = out->stream_id = out->period = 0;
  out->pid = out->tid = out->cpu = 0;
  out->callchain.clear();
  out->branches.clear();
  out->regs_abi = out->regs_mask = out->stack_dyn_size = 0;
  out->stack = {};
  Cursor c(body);
  uint32_t res = 0;
  if ((t & PERF_SAMPLE_IDENTIFIER) != 0 && !c.U64(&out->id)) return Missing("IDENTIFIER");
  if ((t & PERF_SAMPLE_IP) != 0 && !c.U64(&out->ip)) return Missing("IP");
  if ((t & PERF_SAMPLE_TID) != 0 && !c.U32Pair(&out->pid, &out->tid)) return Missing("TID");
  if ((t & PERF_SAMPLE_TIME) != 0 && !c.U64(&out->time)) return Missing("TIME");
  if ((t & PERF_SAMPLE_ADDR) != 0 && !c.U64(&out->addr)) return Missing("ADDR");
  if ((t & PERF_SAMPLE_ID) != 0 && !c.U64(&out->id)) return Missing("ID");
  if ((t & PERF_SAMPLE_STREAM_ID) != 0 && !c.U64(&out->stream_id)) return Missing("STREAM_ID");
  if ((t & PERF_SAMPLE_CPU) != 0 && !c.U32Pair(&out->cpu, &res)) return Missing("CPU");
  if ((t & PERF_SAMPLE_PERIOD) != 0 && !c.U64(&out->period)) return Missing("PERIOD");
  if ((t & PERF_SAMPLE_READ) != 0 && !SkipRead(c, layout.read_format)) return Missing("READ");
  if ((t & PERF_SAMPLE_CALLCHAIN) != 0) {
    uint64_t nr = 0;
    if (!c.U64(&nr) || nr > c.left() / 8) return Missing("CALLCHAIN");
    out->callchain.resize(nr);
    for (uint64_t& e : out->callchain) (void)c.U64(&e);
  }
  if ((t & PERF_SAMPLE_RAW) != 0) {
    // u32 size, then size bytes; the kernel pads size so that the whole
    // field keeps the record 8-byte aligned.
    uint32_t size = 0;
    if (!c.U32(&size) || !c.Skip(size)) return Missing("RAW");
  }
  if ((t & PERF_SAMPLE_BRANCH_STACK) != 0) {
    uint64_t nr = 0, hw_idx = 0;
    if (!c.U64(&nr)) return Missing("BRANCH_STACK");
    if (layout.branch_hw_index && !c.U64(&hw_idx)) return Missing("BRANCH_STACK");
    if (nr > c.left() / 24) return Missing("BRANCH_STACK");
    out->branches.resize(nr);
    for (BranchEntry& b : out->branches) {
      (void)c.U64(&b.from);
      (void)c.U64(&b.to);
      (void)c.U64(&b.flags);
    }
  }
  if ((t & PERF_SAMPLE_REGS_USER) != 0) {
    if (!c.U64(&out->regs_abi)) return Missing("REGS_USER");
    if (out->regs_abi != PERF_SAMPLE_REGS_ABI_NONE) {
      out->regs_mask = layout.regs_user;
      for (uint64_t m = layout.regs_user; m != 0; m &= m - 1) {
        if (!c.U64(&out->regs[std::countr_zero(m)])) return Missing("REGS_USER");
      }
    }
  }
  if ((t & PERF_SAMPLE_STACK_USER) != 0) {
    uint64_t size = 0;
    if (!c.U64(&size)) return Missing("STACK_USER");
    if (size != 0) {
      if (!c.Bytes(size, &out->stack) || !c.U64(&out->stack_dyn_size)) {
        return Missing("STACK_USER");
      }
      if (out->stack_dyn_size > size) out->stack_dyn_size = size;
    }
  }
  // Fields after STACK_USER (WEIGHT, DATA_SRC, ...) are not used.
  return Ok();
}

bool SampleReader::Next(Sample* out) {
  while (offset_ < bytes_.size()) {
    std::span<const std::byte> rest = bytes_.subspan(offset_);
    perf_event_header h;
    if (rest.size() < kHeaderSize) {
      stats_.torn_bytes += rest.size();
      offset_ = bytes_.size();
      return false;
    }
    std::memcpy(&h, rest.data(), kHeaderSize);
    if (h.size < kHeaderSize || h.size % 8 != 0 || h.size > rest.size()) {
      // A partial last record (cut short), or bytes that are no record:
      // nothing after them can be trusted to start a record.
      stats_.torn_bytes += rest.size();
      offset_ = bytes_.size();
      return false;
    }
    size_t at = offset_;
    offset_ += h.size;
    if (h.type != PERF_RECORD_SAMPLE) {
      stats_.other_records++;
      continue;
    }
    auto parsed = ParseSampleBody(rest.subspan(kHeaderSize, h.size - kHeaderSize), layout_, out);
    if (!parsed) {
      if (stats_.bad_records++ == 0) {
        stats_.first_error = parsed.error().ToString() + " (record at offset " +
                             std::to_string(at) + ", " + std::to_string(h.size) + " bytes)";
      }
      continue;
    }
    out->misc = h.misc;
    stats_.samples++;
    return true;
  }
  return false;
}

std::vector<StackFrame> CallchainFrames(const Sample& s, bool kernel_only, size_t max_depth) {
  std::vector<StackFrame> frames;
  uint64_t ctx = 0;
  bool first_in_ctx = true;
  for (uint64_t e : s.callchain) {
    if (frames.size() >= max_depth) break;
    if (IsContext(e)) {
      ctx = e;
      first_in_ctx = true;
      continue;
    }
    // A frame-pointer walk through code built without them can end in a
    // zero "return address": never a frame.
    if (e == 0) continue;
    // Guest and hypervisor frames belong to no process of the trace.
    bool kernel = ctx == static_cast<uint64_t>(PERF_CONTEXT_KERNEL);
    bool user = ctx == static_cast<uint64_t>(PERF_CONTEXT_USER) || ctx == 0;
    if (!kernel && (kernel_only || !user)) continue;
    frames.push_back({e, !first_in_ctx});
    first_in_ctx = false;
  }
  // The kernel stores the interrupted IP first; when the chain does not
  // start with it (an empty chain, a truncated one), the IP is the leaf.
  if (!kernel_only && s.ip != 0 && (frames.empty() || frames.front().address != s.ip) &&
      frames.size() < max_depth) {
    // What followed the context marker is then a return address.
    if (!frames.empty()) frames.front().is_return = true;
    frames.insert(frames.begin(), StackFrame{s.ip, false});
  }
  return frames;
}

std::vector<StackFrame> LbrFrames(const Sample& s, size_t max_depth) {
  std::vector<StackFrame> frames = CallchainFrames(s, /*kernel_only=*/true, max_depth);
  uint64_t user_ip = IsKernelAddress(s.ip) ? 0 : s.ip;
  if (user_ip == 0) {
    // Interrupted in the kernel: the user IP is the callchain's first user entry, if any.
    bool in_user = false;
    for (uint64_t e : s.callchain) {
      if (IsContext(e)) {
        in_user = e == static_cast<uint64_t>(PERF_CONTEXT_USER);
      } else if (in_user) {
        user_ip = e;
        break;
      }
    }
  }
  if (user_ip != 0 && frames.size() < max_depth) frames.push_back({user_ip, false});
  if (s.branches.empty()) {
    // No call stack from the LBR: the callchain's user part (return addresses).
    std::vector<StackFrame> user = CallchainFrames(s, false, max_depth);
    bool skip = true;  // its leaf is user_ip, already there
    for (const StackFrame& f : user) {
      if (IsKernelAddress(f.address)) continue;
      if (skip) {
        skip = false;
        if (f.address == user_ip) continue;
      }
      if (frames.size() >= max_depth) break;
      frames.push_back(f);
    }
    return frames;
  }
  // Call-stack mode: entry k's `from` is the call instruction in the k+1-th
  // caller (the address itself, not a return address).
  for (const BranchEntry& b : s.branches) {
    if (frames.size() >= max_depth) break;
    if (b.from == 0) break;
    frames.push_back({b.from, false});
  }
  return frames;
}

}  // namespace ptsnap::decode
