// A write-only output file, gzip-compressed when its name ends in ".gz".
// Writes are buffered; errors are remembered and reported by Close().
// zlib's deflate may run on threads of their own (Open's
// `compress_threads`).
#pragma once

#include <zlib.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::output {

class OutputFile {
 public:
  // Creates (truncates) `path`, gzip-compressed when `gzip` says so (by
  // default: when the name ends in ".gz"; pprof's .pprof is gzip without
  // the suffix). Errors name the path and the cause ("opening out.fxt for
  // writing: Permission denied"). `compress_threads` (gzip only): 0,
  // compressed on the caller's thread; 1, the buffers of 1 MiB are
  // compressed and written on a thread of its own, the same zlib calls on
  // the same bytes, so the file is the one 0 writes; from 2 on, as pigz
  // does, that many threads compress the buffers side by side, each as a
  // block with the previous 32 KiB as its dictionary, into one gzip
  // member that inflates to the same bytes (its own bytes differ). Close()
  // (or the destructor) ends the threads; Write() waits only when they are
  // 2 buffers (per thread) behind.
  static Result<std::unique_ptr<OutputFile>> Open(const std::filesystem::path& path,
                                                  std::optional<bool> gzip = std::nullopt,
                                                  unsigned compress_threads = 0);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void Write(std::string_view data) {
    bytes_ += data.size();
    buf_.append(data);
    if (buf_.size() >= kBufferSize) FlushBuffer();
    if (bytes_ > watch_bytes_) Watched();
  }
  // Calls `passed` once, from the Write that takes the file (before
  // compression) past `bytes`: the decode's viewer-size warning, printed
  // while the file is still being written.
  void WatchSize(uint64_t bytes, std::function<void(uint64_t bytes_written)> passed) {
    watch_bytes_ = bytes;
    watch_ = std::move(passed);
  }
  // Flushes and closes (ends the compressing thread); the first error of
  // any write or of closing.
  Result<void> Close();
  [[nodiscard]] uint64_t bytes_written() const { return bytes_; }  // before compression

 private:
  class Compressor;
  class ThreadCompressor;
  class BlockCompressor;
  OutputFile(std::filesystem::path path, base::UniqueFd fd, gzFile gz);
  static constexpr size_t kBufferSize = 1 << 20;
  void FlushBuffer();
  void Watched() {
    watch_bytes_ = UINT64_MAX;
    if (watch_) watch_(bytes_);
  }
  std::filesystem::path path_;
  base::UniqueFd fd_;    // plain output
  gzFile gz_ = nullptr;  // compressed output (owns its own fd)
  // Non-null: the file is compressed and written by its threads (through
  // gz_ with one, fd_ in blocks with more) until Close() ends them.
  std::unique_ptr<Compressor> compressor_;
  std::string buf_;
  uint64_t bytes_ = 0;
  uint64_t watch_bytes_ = UINT64_MAX;  // WatchSize: none
  std::function<void(uint64_t)> watch_;
  int errnum_ = 0;
  std::string error_;
  bool closed_ = false;
};

// The formats decode writes: the one list that decode's --format and -o,
// run -o, the API and the pipeline read, so that a format is known (or
// refused, with the same words) everywhere at once.
struct OutputFormat {
  std::string_view name;    // --format's spelling
  std::string_view suffix;  // the file name's, before an optional ".gz"
  bool timeline;            // a trace viewer opens it (Perfetto, chrome://tracing)
};
inline constexpr std::array<OutputFormat, 3> kOutputFormats{{
    {"fxt", ".fxt", true},
    {"json", ".json", true},
    {"events", ".events", false},
}};

// The names of kOutputFormats, for a flag's list of choices.
std::vector<std::string> OutputFormatNames();

// The format a file name says ("a.fxt.gz" -> "fxt"); "" when its suffix is
// none of kOutputFormats'.
std::string FormatFromPath(const std::filesystem::path& path);

// The format to write `path` in: `name` (--format) when given, else the one
// its suffix says. Errors say which formats there are and how to pick one:
// an unknown name, or no name and a suffix that is none of them.
Result<std::string> ChooseOutputFormat(std::string_view name, const std::filesystem::path& path);

}  // namespace ptsnap::output
