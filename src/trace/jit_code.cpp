#include "trace/jit_code.h"

#include <string>

#include "base/le_bytes.h"

namespace ptsnap::trace {
using base::AppendLe;
using base::LoadLe;

std::filesystem::path JitCodePath(const std::filesystem::path& dir, int32_t pid) {
  return dir / "jit" / ("code-" + std::to_string(pid) + ".bin");
}

std::string JitCodeWorkName(int32_t pid) { return "jit-code." + std::to_string(pid); }

std::string JitCodeHeader() {
  std::string out(kJitCodeMagic);
  AppendLe<uint32_t>(out, kJitCodeVersion);
  AppendLe<uint32_t>(out, kJitCodeHeaderSize);
  return out;
}

std::string FormatJitCodeRecord(const JitCodeLoad& load) {
  const size_t n = load.code.size();
  const size_t size = (kJitCodeRecordHeaderSize + n + 7) & ~size_t{7};
  std::string out;
  out.reserve(size);
  AppendLe<uint32_t>(out, static_cast<uint32_t>(size));
  AppendLe<uint32_t>(out, static_cast<uint32_t>(n));
  AppendLe<uint64_t>(out, load.time);
  AppendLe<uint64_t>(out, load.addr);
  AppendLe<uint32_t>(out, load.tid);
  AppendLe<uint32_t>(out, load.flags);
  out.append(load.code);
  out.resize(size, '\0');
  return out;
}

Result<JitCodeFile> ParseJitCode(std::string_view text) {
  if (text.size() < kJitCodeHeaderSize || text.substr(0, kJitCodeMagic.size()) != kJitCodeMagic)
    return Error("not a ptsnap JIT code file (bad magic)");
  const auto version = LoadLe<uint32_t>(text, 8);
  if (version != kJitCodeVersion)
    return Error("unsupported version " + std::to_string(version) + " (this ptsnap reads " +
                 std::to_string(kJitCodeVersion) + ")");
  const auto header = LoadLe<uint32_t>(text, 12);
  if (header < kJitCodeHeaderSize || header > text.size())
    return Error("bad header size " + std::to_string(header));
  JitCodeFile out;
  size_t at = header;
  while (at < text.size()) {
    const std::string where = "record at offset " + std::to_string(at) + ": ";
    if (text.size() - at < kJitCodeRecordHeaderSize) {
      out.torn_tail = true;
      break;
    }
    const auto size = LoadLe<uint32_t>(text, at);
    const auto n = LoadLe<uint32_t>(text, at + 4);
    if (n > kJitCodeMaxSize)
      return Error(where + "code size " + std::to_string(n) + " is too large");
    if (size % 8 != 0 || size < kJitCodeRecordHeaderSize + n ||
        size > kJitCodeRecordHeaderSize + n + 7)
      return Error(where + "record size " + std::to_string(size) + " does not fit code size " +
                   std::to_string(n));
    if (text.size() - at < size) {
      out.torn_tail = true;
      break;
    }
    JitCodeLoad load;
    load.time = LoadLe<uint64_t>(text, at + 8);
    load.addr = LoadLe<uint64_t>(text, at + 16);
    load.tid = LoadLe<uint32_t>(text, at + 24);
    load.flags = LoadLe<uint32_t>(text, at + 28);
    if (n == 0) return Error(where + "no code");
    if (load.addr + n < load.addr) return Error(where + "code wraps around the address space");
    load.code = text.substr(at + kJitCodeRecordHeaderSize, n);
    out.loads.push_back(load);
    at += size;
  }
  return out;
}

}  // namespace ptsnap::trace
