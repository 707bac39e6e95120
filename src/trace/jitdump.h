// perf's jitdump format (tools/perf/util/jitdump.h; the specification is
// tools/perf/Documentation/jitdump-specification.txt): what a runtime writes
// to jit-PID.dump when asked to (node --perf-prof, the JVM's perf agent,
// .NET's DOTNET_PerfMapEnabled=1): a header, then records each starting
// with a 16-byte prefix {u32 id, u32 total_size, u64 timestamp}.
//   JIT_CODE_LOAD (0): pid, tid, vma, code_addr, code_size, code_index,
//                      NUL-terminated name, code_size code bytes
//   JIT_CODE_MOVE (1): pid, tid, vma, old_code_addr, new_code_addr,
//                      code_size, code_index
//   JIT_CODE_DEBUG_INFO (2): code_addr, nr_entry, entries {u64 addr,
//                      i32 line, i32 discriminator, NUL-terminated file
//                      ("\xff" alone: the previous entry's file)}; it
//                      describes the next JIT_CODE_LOAD of code_addr
//                      (perf's jitdump.c keeps it until that load)
//   JIT_CODE_CLOSE (3): no body
//   JIT_CODE_UNWINDING_INFO (4): unwinding_size, eh_frame_hdr_size,
//                      mapped_size, unwinding data
// Timestamps are CLOCK_MONOTONIC ns, or the CPU's TSC when the header's
// flags have JITDUMP_FLAGS_ARCH_TIMESTAMP.
//
// ParseJitdump is pure (fuzzed by jitdump_fuzzer.cpp). Only a bad header
// is an error: a malformed record stops the parse there, keeping what came
// before it, and says what was wrong (`malformed`); a record cut short at
// the end (the runtime was still writing) is `torn_tail`; records of
// unknown kinds are skipped and counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::trace {

inline constexpr uint32_t kJitdumpMagic = 0x4A695444;  // "DTiJ" in the file: 'J' 'i' 'T' 'D' LE
inline constexpr uint32_t kJitdumpMagicSwapped = 0x4454694A;
inline constexpr uint64_t kJitdumpFlagArchTimestamp = 1;  // JITDUMP_FLAGS_ARCH_TIMESTAMP
inline constexpr uint32_t kJitdumpMachX8664 = 62;         // EM_X86_64
inline constexpr size_t kJitdumpHeaderSize = 40;

enum class JitdumpRecord : uint32_t {
  kCodeLoad = 0,
  kCodeMove = 1,
  kDebugInfo = 2,
  kCodeClose = 3,
  kUnwindingInfo = 4,
};

// V8 (Node.js, Chrome) writes this in the header's reserved word
// (perf-jit.cc LogWriteHeader), and places every JIT_CODE_DEBUG_INFO
// entry kJitdumpV8EntryBias bytes after the code it describes (the ELF
// header size of the file perf inject makes: a workaround for perf's line
// tables, 0x40 early until perf's 2020 fix). ParseJitdump takes the bias
// off, so entries are the code's own addresses.
inline constexpr uint32_t kJitdumpV8Reserved = 0xDEADBEEF;
inline constexpr uint64_t kJitdumpV8EntryBias = 0x40;

struct JitdumpHeader {
  uint32_t version = 0, total_size = 0, elf_mach = 0, pid = 0;
  uint32_t reserved = 0;  // pad1; kJitdumpV8Reserved from V8
  uint64_t timestamp = 0, flags = 0;
  [[nodiscard]] bool from_v8() const { return reserved == kJitdumpV8Reserved; }
  [[nodiscard]] bool arch_timestamp() const { return (flags & kJitdumpFlagArchTimestamp) != 0; }
};

struct JitdumpCodeLoad {
  uint64_t timestamp = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t vma = 0, code_addr = 0, code_index = 0;
  std::string name;
  std::string_view code;  // into the parsed text
  // The JIT_CODE_DEBUG_INFO that came before it for its code_addr (the
  // last one, when several did), as an index into Jitdump::debug.
  std::optional<size_t> debug;
};

struct JitdumpCodeMove {
  uint64_t timestamp = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t vma = 0, old_code_addr = 0, new_code_addr = 0, code_size = 0, code_index = 0;
};

struct JitdumpDebugEntry {
  uint64_t addr = 0;
  int32_t line = 0, discriminator = 0;
  std::string file;  // "\xff" resolved to the previous entry's file
};

struct JitdumpDebugInfo {
  uint64_t timestamp = 0, code_addr = 0;
  std::vector<JitdumpDebugEntry> entries;
};

struct JitdumpUnwindingInfo {
  uint64_t timestamp = 0, unwinding_size = 0, eh_frame_hdr_size = 0, mapped_size = 0;
  std::string_view data;  // into the parsed text
};

struct Jitdump {
  JitdumpHeader header;
  std::vector<JitdumpCodeLoad> loads;
  std::vector<JitdumpCodeMove> moves;
  std::vector<JitdumpDebugInfo> debug;
  std::vector<JitdumpUnwindingInfo> unwinding;
  bool closed = false;           // a JIT_CODE_CLOSE record was read
  bool torn_tail = false;        // the last record is incomplete
  uint64_t unknown_records = 0;  // of ids above JIT_CODE_UNWINDING_INFO, skipped
  std::string malformed;         // non-empty: parsing stopped at this problem
};

// Errors (the header): "not a jitdump (bad magic)", "a byte-swapped
// (big-endian) jitdump is not supported", "jitdump version N is not
// supported", "jitdump for ELF machine N, not x86-64", "header size N ...".
// The string views point into `text`, which must outlive them.
Result<Jitdump> ParseJitdump(std::string_view text);

// Whether `filename` (an MMAP2 record's) is the marker mapping of a
// process's jitdump, "jit-<pid>.dump" in any directory, and of which pid.
[[nodiscard]] std::optional<int32_t> JitdumpMarkerPid(std::string_view filename);

}  // namespace ptsnap::trace
