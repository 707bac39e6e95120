#include "output/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_util.h"

namespace ptsnap::output {

namespace {
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

Result<std::unique_ptr<OutputFile>> OutputFile::Open(const std::filesystem::path& path,
                                                     std::optional<bool> gzip) {
  // A file this call creates goes to the user who ran sudo; an existing
  // one keeps its owner.
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return Error::FromErrno("opening " + path.string() + " for writing");
  if (!existed) base::GiveToInvoker(fd.get());
  gzFile gz = nullptr;
  if (gzip.value_or(EndsWith(path.string(), ".gz"))) {
    gz = gzdopen(fd.release(), "wb6");  // level 6, as magic-trace
    if (gz == nullptr) return Error("zlib could not start compressing " + path.string());
  }
  std::unique_ptr<OutputFile> f(new OutputFile(path, std::move(fd), gz));
  f->buf_.reserve(kBufferSize);
  return f;
}

OutputFile::~OutputFile() { (void)Close(); }

void OutputFile::FlushBuffer() {
  if (buf_.empty() || !error_.empty()) {
    buf_.clear();
    return;
  }
  if (gz_ != nullptr) {
    if (gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) <= 0) {
      int zerr = 0;
      const char* msg = gzerror(gz_, &zerr);
      errnum_ = zerr == Z_ERRNO ? errno : 0;
      error_ = std::string("writing ") + path_.string() + (zerr == Z_ERRNO ? "" : ": ") +
               (zerr == Z_ERRNO ? "" : msg);
    }
  } else {
    const char* p = buf_.data();
    size_t left = buf_.size();
    while (left > 0) {
      ssize_t n = ::write(fd_.get(), p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        errnum_ = errno;
        error_ = "writing " + path_.string();
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  buf_.clear();
}

Result<void> OutputFile::Close() {
  if (closed_) return error_.empty() ? Ok() : Result<void>(Error(error_, errnum_));
  closed_ = true;
  FlushBuffer();
  if (gz_ != nullptr) {
    int r = gzclose(gz_);
    gz_ = nullptr;
    if (r != Z_OK && error_.empty()) {
      errnum_ = r == Z_ERRNO ? errno : 0;
      error_ = "closing " + path_.string();
    }
  } else if (fd_) {
    if (::close(fd_.release()) != 0 && error_.empty()) {
      errnum_ = errno;
      error_ = "closing " + path_.string();
    }
  }
  if (!error_.empty()) return Error(error_, errnum_);
  return Ok();
}

std::string FormatFromPath(const std::filesystem::path& path) {
  std::string s = path.filename().string();
  if (EndsWith(s, ".gz")) s.resize(s.size() - 3);
  if (EndsWith(s, ".fxt")) return "fxt";
  if (EndsWith(s, ".json")) return "json";
  if (EndsWith(s, ".events")) return "events";
  return "";
}

}  // namespace ptsnap::output
