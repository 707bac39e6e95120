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

const std::filesystem::path& Dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = std::filesystem::temp_directory_path() / "ptsnap-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    std::filesystem::create_directories(std::filesystem::path(tmpl) / "pt");
    return std::filesystem::path(tmpl);
  }();
  return dir;
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
  for (const Stream& s : reader->manifest().streams) (void)reader->ReadStream(s);
  return 0;
}
