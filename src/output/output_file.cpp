#include "output/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/file_util.h"

namespace ptsnap::output {

namespace {
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// gzwrite of `data`; false, with the error as Close() reports it, when it
// fails. On the thread that called gzwrite (errno is per thread).
bool GzWrite(gzFile gz, std::string_view data, const std::filesystem::path& path, int* errnum,
             std::string* error) {
  if (gzwrite(gz, data.data(), static_cast<unsigned>(data.size())) > 0) return true;
  int zerr = 0;
  const char* msg = gzerror(gz, &zerr);
  *errnum = zerr == Z_ERRNO ? errno : 0;
  *error =
      "writing " + path.string() + (zerr == Z_ERRNO ? "" : ": ") + (zerr == Z_ERRNO ? "" : msg);
  return false;
}
}  // namespace

// The compressing thread: buffers queued by FlushBuffer are handed to
// gzwrite on it, in order. The writer's thread fills the next buffer
// meanwhile; it waits only when kQueued buffers are already waiting, and
// the thread waits while none is. At most kQueued + 2 buffers exist (the
// one being filled, the one being compressed): about 4 MiB.
class OutputFile::Compressor {
 public:
  Compressor(gzFile gz, const std::filesystem::path& path)
      : gz_(gz), path_(path), thread_([this] { Run(); }) {}
  ~Compressor() { Finish(); }
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Queues `buf` and leaves an empty buffer in its place, to fill next.
  void Push(std::string* buf) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return queue_.size() < kQueued; });
    queue_.push_back(std::move(*buf));
    if (!spare_.empty()) {
      *buf = std::move(spare_.back());
      spare_.pop_back();
    } else {
      *buf = std::string();
      buf->reserve(kBufferSize);
    }
    lock.unlock();
    not_empty_.notify_one();
  }
  // Whether a write has failed: what is queued after it is dropped.
  [[nodiscard]] bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // Compresses what is queued and ends the thread. The first write error,
  // if any, is then in errnum() and error().
  void Finish() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    not_empty_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] int errnum() const { return errnum_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  static constexpr size_t kQueued = 2;

  void Run() {
    for (;;) {
      std::unique_lock lock(mu_);
      not_empty_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, and everything compressed
      std::string buf = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      not_full_.notify_one();
      if (!failed() && !GzWrite(gz_, buf, path_, &errnum_, &error_))
        failed_.store(true, std::memory_order_relaxed);
      buf.clear();
      lock.lock();
      spare_.push_back(std::move(buf));
    }
  }

  gzFile gz_;
  const std::filesystem::path& path_;
  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<std::string> queue_;   // under mu_
  std::vector<std::string> spare_;  // under mu_: compressed buffers, to fill again
  bool stop_ = false;               // under mu_
  std::atomic<bool> failed_{false};
  int errnum_ = 0;      // the thread's until Finish()
  std::string error_;   // the thread's until Finish()
  std::thread thread_;  // last: starts once the rest is made
};

OutputFile::OutputFile(std::filesystem::path path, base::UniqueFd fd, gzFile gz)
    : path_(std::move(path)), fd_(std::move(fd)), gz_(gz) {}

Result<std::unique_ptr<OutputFile>> OutputFile::Open(const std::filesystem::path& path,
                                                     std::optional<bool> gzip,
                                                     bool compress_on_thread) {
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
  if (gz != nullptr && compress_on_thread)
    f->compressor_ = std::make_unique<Compressor>(gz, f->path_);
  return f;
}

OutputFile::~OutputFile() { (void)Close(); }

void OutputFile::FlushBuffer() {
  if (buf_.empty() || !error_.empty()) {
    buf_.clear();
    return;
  }
  if (compressor_) {
    if (compressor_->failed()) {
      buf_.clear();
    } else {
      compressor_->Push(&buf_);
    }
    return;
  }
  if (gz_ != nullptr) {
    GzWrite(gz_, buf_, path_, &errnum_, &error_);
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
  if (compressor_) {
    compressor_->Finish();
    errnum_ = compressor_->errnum();
    error_ = compressor_->error();
    compressor_.reset();
  }
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
