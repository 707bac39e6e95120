// Code the emulator captured from memory no file backs (JIT compilers,
// code written and then executed): DIR/jit/code-PID.bin, one file per
// process, written by the QEMU plugin and read by the decoder
// (docs/trace-format.md, "jit/"). Each record is one translated block's
// bytes as they were when it first ran, with that time; a block rewritten
// later is captured again with its new bytes.
//
// Layout (little-endian):
//   header, 16 bytes: magic "PTSNAPJC", u32 version (1), u32 header size (16)
//   records, each a multiple of 8 bytes:
//     u32 record size (header + code + zero padding to a multiple of 8)
//     u32 code size N
//     u64 time       (perf clock, ns: the virtual time the block first ran)
//     u64 address    (of the code's first byte)
//     u32 tid        (the thread that ran it first)
//     u32 flags      (kJitCodeReplaces)
//     N code bytes, zero padding
// The plugin appends one record per write(2), so only the last record can
// be torn (the process died writing it): the parser ignores a torn tail and
// says so, and calls anything else malformed an error naming its offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::trace {

inline constexpr std::string_view kJitCodeMagic = "PTSNAPJC";
inline constexpr uint32_t kJitCodeVersion = 1;
inline constexpr size_t kJitCodeHeaderSize = 16;
inline constexpr size_t kJitCodeRecordHeaderSize = 32;
// Largest code size a record may carry (a translated block is at most a few
// pages; anything larger is corruption).
inline constexpr uint32_t kJitCodeMaxSize = 1 << 20;
// Flag: the bytes differ from bytes captured earlier at an overlapping
// address (code rewritten in place); the plugin marked the stream there.
inline constexpr uint32_t kJitCodeReplaces = 1;

// Where DIR keeps process `pid`'s captured code: DIR/jit/code-PID.bin.
std::filesystem::path JitCodePath(const std::filesystem::path& dir, int32_t pid);
// The plugin's name for it in its work directory ("jit-code.PID").
std::string JitCodeWorkName(int32_t pid);

struct JitCodeLoad {
  uint64_t time = 0, addr = 0;
  uint32_t tid = 0, flags = 0;
  std::string_view code;  // into the parsed text
};

struct JitCodeFile {
  std::vector<JitCodeLoad> loads;  // in file order
  bool torn_tail = false;          // a partial last record was ignored
};

// The file header (written once, before the first record).
std::string JitCodeHeader();
// One record; `load.code` is its bytes.
std::string FormatJitCodeRecord(const JitCodeLoad& load);
// Pure parser. Errors: "not a ptsnap JIT code file (bad magic)",
// "unsupported version N", "record at offset X: ...". The loads point into
// `text`, which must outlive them.
Result<JitCodeFile> ParseJitCode(std::string_view text);

}  // namespace ptsnap::trace
