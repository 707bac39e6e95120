#include "perf/attr_text.h"

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <utility>

#include "base/string_util.h"

namespace ptsnap::perf {
namespace {

struct BitName {
  int bit;
  const char* name;
};

// perf's __p_sample_type, __p_read_format and __p_branch_sample_type name
// tables, in perf's order (tools/perf/util/perf_event_attr_fprintf.c).
// Bit numbers rather than the uapi macros: the printer names bits newer
// than the headers this builds against.
constexpr BitName kSampleTypeBits[] = {
    {0, "IP"},
    {1, "TID"},
    {2, "TIME"},
    {3, "ADDR"},
    {4, "READ"},
    {5, "CALLCHAIN"},
    {6, "ID"},
    {7, "CPU"},
    {8, "PERIOD"},
    {9, "STREAM_ID"},
    {10, "RAW"},
    {11, "BRANCH_STACK"},
    {12, "REGS_USER"},
    {13, "STACK_USER"},
    {16, "IDENTIFIER"},
    {18, "REGS_INTR"},
    {15, "DATA_SRC"},
    {14, "WEIGHT"},
    {19, "PHYS_ADDR"},
    {20, "AUX"},
    {21, "CGROUP"},
    {22, "DATA_PAGE_SIZE"},
    {23, "CODE_PAGE_SIZE"},
    {24, "WEIGHT_STRUCT"},
    {17, "TRANSACTION"},
};
constexpr BitName kReadFormatBits[] = {
    {0, "TOTAL_TIME_ENABLED"}, {1, "TOTAL_TIME_RUNNING"}, {2, "ID"}, {3, "GROUP"}, {4, "LOST"},
};
constexpr BitName kBranchSampleBits[] = {
    {0, "USER"},       {1, "KERNEL"},      {2, "HV"},        {3, "ANY"},        {4, "ANY_CALL"},
    {5, "ANY_RETURN"}, {6, "IND_CALL"},    {7, "ABORT_TX"},  {8, "IN_TX"},      {9, "NO_TX"},
    {10, "COND"},      {11, "CALL_STACK"}, {12, "IND_JUMP"}, {13, "CALL"},      {14, "NO_FLAGS"},
    {15, "NO_CYCLES"}, {16, "TYPE_SAVE"},  {17, "HW_INDEX"}, {18, "PRIV_SAVE"},
};

template <size_t N>
std::string Flags(uint64_t value, const BitName (&names)[N]) {
  std::string out;
  uint64_t named = 0;
  for (const BitName& b : names) {
    named |= uint64_t{1} << b.bit;
    if ((value >> b.bit) & 1) out += (out.empty() ? "" : "|") + std::string(b.name);
  }
  if (uint64_t rest = value & ~named) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%#" PRIx64, rest);
    out += (out.empty() ? "" : "|") + std::string(buf);
  }
  return out;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#" PRIx64, v);
  return buf;
}

enum class Kind { kUnsigned, kHex, kSigned, kSampleType, kReadFormat, kBranchSample };

struct Field {
  const char* name;
  Kind kind;
  std::function<uint64_t(const perf_event_attr&)> get;
};

#define F(field, kind)                                                       \
  Field {                                                                    \
#field, kind, [](const perf_event_attr& a) { return uint64_t(a.field); } \
  }

// perf_event_attr__fprintf's order (perf 6.1).
const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      F(type, Kind::kUnsigned),
      F(size, Kind::kUnsigned),
      F(config, Kind::kHex),
      Field{"{ sample_period, sample_freq }", Kind::kUnsigned,
            [](const perf_event_attr& a) { return uint64_t(a.sample_period); }},
      F(sample_type, Kind::kSampleType),
      F(read_format, Kind::kReadFormat),
      F(disabled, Kind::kUnsigned),
      F(inherit, Kind::kUnsigned),
      F(pinned, Kind::kUnsigned),
      F(exclusive, Kind::kUnsigned),
      F(exclude_user, Kind::kUnsigned),
      F(exclude_kernel, Kind::kUnsigned),
      F(exclude_hv, Kind::kUnsigned),
      F(exclude_idle, Kind::kUnsigned),
      F(mmap, Kind::kUnsigned),
      F(comm, Kind::kUnsigned),
      F(freq, Kind::kUnsigned),
      F(inherit_stat, Kind::kUnsigned),
      F(enable_on_exec, Kind::kUnsigned),
      F(task, Kind::kUnsigned),
      F(watermark, Kind::kUnsigned),
      F(precise_ip, Kind::kUnsigned),
      F(mmap_data, Kind::kUnsigned),
      F(sample_id_all, Kind::kUnsigned),
      F(exclude_host, Kind::kUnsigned),
      F(exclude_guest, Kind::kUnsigned),
      F(exclude_callchain_kernel, Kind::kUnsigned),
      F(exclude_callchain_user, Kind::kUnsigned),
      F(mmap2, Kind::kUnsigned),
      F(comm_exec, Kind::kUnsigned),
      F(use_clockid, Kind::kUnsigned),
      F(context_switch, Kind::kUnsigned),
      F(write_backward, Kind::kUnsigned),
      F(namespaces, Kind::kUnsigned),
      F(ksymbol, Kind::kUnsigned),
      F(bpf_event, Kind::kUnsigned),
      F(aux_output, Kind::kUnsigned),
      F(cgroup, Kind::kUnsigned),
      F(text_poke, Kind::kUnsigned),
      F(build_id, Kind::kUnsigned),
      F(inherit_thread, Kind::kUnsigned),
      F(remove_on_exec, Kind::kUnsigned),
      F(sigtrap, Kind::kUnsigned),
      Field{"{ wakeup_events, wakeup_watermark }", Kind::kUnsigned,
            [](const perf_event_attr& a) { return uint64_t(a.wakeup_events); }},
      F(bp_type, Kind::kUnsigned),
      Field{"{ bp_addr, config1 }", Kind::kHex,
            [](const perf_event_attr& a) { return uint64_t(a.bp_addr); }},
      Field{"{ bp_len, config2 }", Kind::kHex,
            [](const perf_event_attr& a) { return uint64_t(a.bp_len); }},
      F(branch_sample_type, Kind::kBranchSample),
      F(sample_regs_user, Kind::kHex),
      F(sample_stack_user, Kind::kUnsigned),
      F(clockid, Kind::kSigned),
      F(sample_regs_intr, Kind::kHex),
      F(aux_watermark, Kind::kUnsigned),
      F(sample_max_stack, Kind::kUnsigned),
      F(aux_sample_size, Kind::kUnsigned),
      F(sig_data, Kind::kUnsigned),
  };
  return fields;
}

#undef F

std::string Value(Kind kind, uint64_t v) {
  switch (kind) {
    case Kind::kUnsigned: return std::to_string(v);
    case Kind::kHex: return Hex(v);
    case Kind::kSigned: return std::to_string(static_cast<int64_t>(static_cast<int32_t>(v)));
    case Kind::kSampleType: return Flags(v, kSampleTypeBits);
    case Kind::kReadFormat: return Flags(v, kReadFormatBits);
    case Kind::kBranchSample: return Flags(v, kBranchSampleBits);
  }
  return std::to_string(v);
}

}  // namespace

std::string FormatAttrLikePerf(const perf_event_attr& attr) {
  std::string out;
  for (const Field& f : Fields()) {
    const uint64_t v = f.get(attr);
    if (v == 0) continue;  // perf's PRINT_ATTRn skips zero fields
    char line[160];
    std::snprintf(line, sizeof line, "  %-32s %s\n", f.name, Value(f.kind, v).c_str());
    out += line;
  }
  return out;
}

std::vector<PerfAttrBlock> ParsePerfAttrText(std::string_view text) {
  std::vector<PerfAttrBlock> blocks;
  bool in_block = false;
  for (std::string_view line : base::Split(text, '\n')) {
    if (base::StartsWith(line, "perf_event_attr:")) {
      blocks.emplace_back();
      in_block = true;
      continue;
    }
    if (base::StartsWith(line, "----")) {
      in_block = false;
      continue;
    }
    if (base::StartsWith(line, "sys_perf_event_open:")) {
      in_block = false;
      if (blocks.empty()) continue;
      // "sys_perf_event_open: pid 123  cpu -1  group_fd -1  flags 0x8 = 5";
      // a failed attempt ends without " = FD".
      auto words = base::SplitWhitespace(line);
      int pid = 0, cpu = 0;
      bool have_pid = false, have_cpu = false, opened = false;
      for (size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "pid" || words[i] == "cpu") {
          auto n = base::ParseInt(words[i + 1]);
          if (!n) continue;
          (words[i] == "pid" ? pid : cpu) = static_cast<int>(*n);
          (words[i] == "pid" ? have_pid : have_cpu) = true;
        }
        if (words[i] == "=") opened = true;
      }
      if (opened && have_pid && have_cpu) blocks.back().opened.emplace_back(pid, cpu);
      continue;
    }
    if (!in_block || !base::StartsWith(line, "  ")) continue;
    std::string_view body = base::Trim(line);
    if (body.empty()) continue;
    // Names in braces hold spaces ("{ sample_period, sample_freq }"); the
    // value is the last word.
    const size_t sp = body.find_last_of(' ');
    if (sp == std::string_view::npos) continue;
    blocks.back().fields[std::string(base::Trim(body.substr(0, sp)))] =
        std::string(body.substr(sp + 1));
  }
  return blocks;
}

std::vector<std::string> SplitFlags(std::string_view value) {
  std::vector<std::string> out;
  for (std::string_view f : base::Split(value, '|')) {
    f = base::Trim(f);
    if (!f.empty()) out.emplace_back(f);
  }
  return out;
}

}  // namespace ptsnap::perf
