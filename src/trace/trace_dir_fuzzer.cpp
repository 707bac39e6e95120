// Fuzzes TraceReader on a directory built from the input: the bytes up to the
// first NUL are manifest.json, the rest is sideband.data, and its last 64
// bytes also become pt/0.pt. Every read must fail cleanly or succeed.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "trace/trace_dir.h"

namespace {

void WriteFile(const std::filesystem::path& p, std::string_view s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Created once; never destroyed, so the exit handler can still use it.
const std::filesystem::path& Dir() {
  static const auto* dir = [] {
    // Memory-backed when possible: the target writes three files per input.
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::string tmpl = base / "ptsnap-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    auto* p = new std::filesystem::path(tmpl);
    std::filesystem::create_directories(*p / "pt");
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(Dir(), ignored);
    });
    return p;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::trace;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string_view manifest = in.substr(0, nul);
  std::string_view sideband = nul == std::string_view::npos ? "" : in.substr(nul + 1);
  const auto& dir = Dir();
  WriteFile(dir / "manifest.json", manifest);
  WriteFile(dir / "sideband.data", sideband);
  WriteFile(dir / "pt/0.pt",
            sideband.substr(sideband.size() - std::min<size_t>(64, sideband.size())));

  auto reader = TraceReader::Open(dir);
  if (!reader) return 0;
  (void)reader->ReadSideband();
  // Streams that follow others (a chain of pt/0.pt and missing files) too.
  for (const Stream& s : reader->manifest().streams) {
    (void)reader->ReadStream(s);
    (void)reader->MapStream(s, ShortStream::kKeepWhatIsThere);
  }
  return 0;
}
