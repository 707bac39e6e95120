// A write-only output file, gzip-compressed when its name ends in ".gz".
// Writes are buffered; errors are remembered and reported by Close().
// zlib's deflate may run on a thread of its own (Open's
// `compress_on_thread`), fed the same buffers in the same order, so the
// file's bytes are the same either way.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::output {

class OutputFile {
 public:
  // Creates (truncates) `path`, gzip-compressed when `gzip` says so (by
  // default: when the name ends in ".gz"; pprof's .pprof is gzip without
  // the suffix). Errors name the path and the cause ("opening out.fxt for
  // writing: Permission denied"). `compress_on_thread` (gzip only): the
  // buffers of 1 MiB are compressed and written on a thread of its own,
  // which Close() (or the destructor) ends; Write() then waits only when
  // the thread is two buffers behind.
  static Result<std::unique_ptr<OutputFile>> Open(const std::filesystem::path& path,
                                                  std::optional<bool> gzip = std::nullopt,
                                                  bool compress_on_thread = false);
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
  // Non-null: gz_ is written on its thread until Close() ends it.
  std::unique_ptr<Compressor> compressor_;
  std::string buf_;
  uint64_t bytes_ = 0;
  uint64_t watch_bytes_ = UINT64_MAX;  // WatchSize: none
  std::function<void(uint64_t)> watch_;
  int errnum_ = 0;
  std::string error_;
  bool closed_ = false;
};

// "fxt", "json" or "events" from a file name (".fxt", ".json", ".events",
// each optionally followed by ".gz"); "" when the suffix is none of them.
std::string FormatFromPath(const std::filesystem::path& path);

}  // namespace ptsnap::output
