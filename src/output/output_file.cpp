#include "output/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "base/file_util.h"

namespace ptsnap::output {

namespace {
// zlib's fastest level. Deflate was most of what users waited for with the
// default .fxt.gz: on an emulated fib(28) trace (74 MB of FXT) level 6
// takes 0.44 s of CPU, level 1 0.16 s, the rest of the decode 0.39 s; the
// file grows by 16% (5.9 -> 6.8 MB). docs/decoding.md, "Parallel decode".
constexpr int kGzipLevel = 1;

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
// Writes all of `data` to `fd`; false with errno set when a write fails.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}
}  // namespace

// What OutputFile asks of its compressing threads.
class OutputFile::Compressor {
 public:
  Compressor() = default;
  virtual ~Compressor() = default;
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  // Queues `buf` and leaves an empty buffer in its place, to fill next.
  virtual void Push(std::string* buf) = 0;
  // Whether a write has failed: what is queued after it is dropped.
  [[nodiscard]] virtual bool failed() const = 0;
  // From here on the file is being closed: errors say so.
  virtual void Closing() {}
  // Compresses and writes what is queued and ends the threads. The first
  // error, if any, is then in errnum() and error().
  virtual void Finish() = 0;
  [[nodiscard]] virtual int errnum() const = 0;
  [[nodiscard]] virtual const std::string& error() const = 0;
};

// The compressing thread: buffers queued by FlushBuffer are handed to
// gzwrite on it, in order. The writer's thread fills the next buffer
// meanwhile; it waits only when kQueued buffers are already waiting, and
// the thread waits while none is. At most kQueued + 2 buffers exist (the
// one being filled, the one being compressed): about 4 MiB.
class OutputFile::ThreadCompressor final : public Compressor {
 public:
  ThreadCompressor(gzFile gz, const std::filesystem::path& path)
      : gz_(gz), path_(path), thread_([this] { Run(); }) {}
  ~ThreadCompressor() override { ThreadCompressor::Finish(); }
  ThreadCompressor(const ThreadCompressor&) = delete;
  ThreadCompressor& operator=(const ThreadCompressor&) = delete;

  void Push(std::string* buf) override {
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
  [[nodiscard]] bool failed() const override { return failed_.load(std::memory_order_relaxed); }
  void Finish() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    not_empty_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] int errnum() const override { return errnum_; }
  [[nodiscard]] const std::string& error() const override { return error_; }

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

// gzip compressed in blocks on several threads, as pigz does (its
// README; RFC 1951 section 3.2.4 and zlib.h on Z_SYNC_FLUSH and
// deflateSetDictionary): each buffer is one raw-deflate block sequence,
// started with the previous buffer's last 32 KiB as its dictionary (so it
// finds the matches one stream would, except where zlib's lazy matching
// crosses the boundary) and ended by Z_SYNC_FLUSH on a byte boundary, so
// the pieces concatenate into one deflate stream; the last is an empty
// final block. The pieces are written in order by whichever thread
// finishes the next one; the member's CRC-32 is crc32_combine of the
// pieces'. Memory: at most 2 buffers per thread queued or in flight, each
// with its 32 KiB dictionary and its output.
class OutputFile::BlockCompressor final : public Compressor {
 public:
  BlockCompressor(int fd, const std::filesystem::path& path, unsigned threads)
      : fd_(fd), path_(path) {
    max_pending_ = 2 * static_cast<uint64_t>(threads);
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~BlockCompressor() override { BlockCompressor::Finish(); }
  BlockCompressor(const BlockCompressor&) = delete;
  BlockCompressor& operator=(const BlockCompressor&) = delete;

  void Push(std::string* buf) override {
    Job job;
    job.dict = dict_;
    const size_t keep = std::min(buf->size(), kDictBytes);
    if (keep == kDictBytes) {
      dict_.assign(*buf, buf->size() - keep, keep);
    } else {
      dict_.append(*buf);
      if (dict_.size() > kDictBytes) dict_.erase(0, dict_.size() - kDictBytes);
    }
    job.input = std::move(*buf);
    *buf = std::string();
    buf->reserve(kBufferSize);
    Queue(std::move(job));
  }
  [[nodiscard]] bool failed() const override { return failed_.load(std::memory_order_relaxed); }
  void Closing() override { closing_ = true; }
  // The final block, then the trailer once every piece is written.
  void Finish() override {
    if (threads_.empty()) return;
    Job last;
    last.dict = dict_;
    last.last = true;
    Queue(std::move(last));
    {
      std::unique_lock lock(mu_);
      written_cv_.wait(lock, [&] { return written_ == next_seq_; });
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (failed()) return;
    char trailer[8];
    for (int i = 0; i < 4; ++i) {
      trailer[i] = static_cast<char>(crc_ >> (8 * i));
      trailer[4 + i] = static_cast<char>(size_ >> (8 * i));  // ISIZE: the size mod 2^32
    }
    if (!WriteAll(fd_, std::string_view(trailer, sizeof trailer))) Fail(errno, "closing ");
  }
  [[nodiscard]] int errnum() const override { return errnum_; }
  [[nodiscard]] const std::string& error() const override { return error_; }

 private:
  static constexpr size_t kDictBytes = 32 << 10;  // deflate's window
  // RFC 1952 header as gzdopen writes it: no name, no time, XFL as zlib
  // sets it for the level (2: level 9, 4: below 2), OS Unix.
  static constexpr char kXfl = kGzipLevel == 9 ? 2 : kGzipLevel < 2 ? 4 : 0;
  static constexpr char kHeader[10] = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, kXfl, 3};
  struct Job {
    uint64_t seq = 0;
    std::string input;
    std::string dict;
    bool last = false;
  };
  struct Piece {
    std::string output;
    uint32_t crc = 0;
    size_t size = 0;
  };

  void Queue(Job job) {
    std::unique_lock lock(mu_);
    written_cv_.wait(lock, [&] { return next_seq_ - written_ < max_pending_; });
    job.seq = next_seq_++;
    jobs_.push_back(std::move(job));
    lock.unlock();
    work_cv_.notify_one();
  }

  void Run() {
    for (;;) {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      Piece piece = failed() ? Piece{} : Compress(job);
      lock.lock();
      done_.emplace(job.seq, std::move(piece));
      if (writing_) continue;  // the thread writing takes it in turn
      writing_ = true;
      for (auto it = done_.find(written_); it != done_.end(); it = done_.find(written_)) {
        Piece p = std::move(it->second);
        done_.erase(it);
        const bool first = written_ == 0;
        lock.unlock();
        if (!failed()) {
          if (first) p.output.insert(0, kHeader, sizeof kHeader);
          // As gzFile's: a write from Close() on is "closing" the file.
          if (!WriteAll(fd_, p.output)) Fail(errno, closing_ ? "closing " : "writing ");
          crc_ = crc32_combine(crc_, p.crc, static_cast<z_off_t>(p.size));
          size_ += p.size;
        }
        lock.lock();
        ++written_;
        written_cv_.notify_all();
      }
      writing_ = false;
    }
  }

  // One job's raw deflate: its input after its dictionary, ended by
  // Z_SYNC_FLUSH, or the empty final block.
  Piece Compress(const Job& job) {
    Piece p;
    p.size = job.input.size();
    p.crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(job.input.data()), static_cast<uInt>(p.size)));
    z_stream z{};
    // gzdopen's level; -15: raw deflate, a 32 KiB window.
    if (deflateInit2(&z, kGzipLevel, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      Fail(0, "zlib could not start compressing ");
      return p;
    }
    if (!job.dict.empty())
      deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(job.dict.data()),
                           static_cast<uInt>(job.dict.size()));
    p.output.resize(deflateBound(&z, static_cast<uLong>(p.size)) + 16);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(job.input.data()));
    z.avail_in = static_cast<uInt>(p.size);
    z.next_out = reinterpret_cast<Bytef*>(p.output.data());
    z.avail_out = static_cast<uInt>(p.output.size());
    const int r = deflate(&z, job.last ? Z_FINISH : Z_SYNC_FLUSH);
    if (r != (job.last ? Z_STREAM_END : Z_OK) || z.avail_in != 0)
      Fail(0, "zlib could not compress the output for ");
    p.output.resize(z.total_out);
    deflateEnd(&z);
    return p;
  }

  void Fail(int errnum, const char* what = "writing ") {
    std::lock_guard lock(error_mu_);
    if (failed()) return;
    errnum_ = errnum;
    error_ = what + path_.string();
    failed_.store(true, std::memory_order_relaxed);
  }

  int fd_;
  const std::filesystem::path& path_;
  std::string dict_;  // the caller's: the last 32 KiB pushed
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable written_cv_;
  std::deque<Job> jobs_;            // under mu_
  std::map<uint64_t, Piece> done_;  // under mu_: compressed, not yet written
  uint64_t next_seq_ = 0;           // under mu_
  uint64_t written_ = 0;            // under mu_
  uint64_t max_pending_ = 2;
  bool writing_ = false;  // under mu_: a thread is writing pieces
  bool stop_ = false;     // under mu_
  uint32_t crc_ = 0;      // the writing thread's
  uint64_t size_ = 0;     // the writing thread's
  std::mutex error_mu_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> closing_{false};
  int errnum_ = 0;     // under error_mu_ until Finish()
  std::string error_;  // under error_mu_ until Finish()
  std::vector<std::thread> threads_;
};

OutputFile::OutputFile(std::filesystem::path path, base::UniqueFd fd, gzFile gz)
    : path_(std::move(path)), fd_(std::move(fd)), gz_(gz) {}

Result<std::unique_ptr<OutputFile>> OutputFile::Open(const std::filesystem::path& path,
                                                     std::optional<bool> gzip,
                                                     unsigned compress_threads) {
  // A file this call creates goes to the user who ran sudo; an existing
  // one keeps its owner.
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return Error::FromErrno("opening " + path.string() + " for writing");
  if (!existed) base::GiveToInvoker(fd.get());
  gzFile gz = nullptr;
  const bool compress = gzip.value_or(EndsWith(path.string(), ".gz"));
  if (compress && compress_threads >= 2) {
    std::unique_ptr<OutputFile> f(new OutputFile(path, std::move(fd), nullptr));
    f->buf_.reserve(kBufferSize);
    f->compressor_ = std::make_unique<BlockCompressor>(f->fd_.get(), f->path_, compress_threads);
    return f;
  }
  if (compress) {
    gz = gzdopen(fd.release(), ("wb" + std::to_string(kGzipLevel)).c_str());
    if (gz == nullptr) return Error("zlib could not start compressing " + path.string());
  }
  std::unique_ptr<OutputFile> f(new OutputFile(path, std::move(fd), gz));
  f->buf_.reserve(kBufferSize);
  if (gz != nullptr && compress_threads == 1)
    f->compressor_ = std::make_unique<ThreadCompressor>(gz, f->path_);
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
    if (!WriteAll(fd_.get(), buf_)) {
      errnum_ = errno;
      error_ = "writing " + path_.string();
    }
  }
  buf_.clear();
}

Result<void> OutputFile::Close() {
  if (closed_) return error_.empty() ? Ok() : Result<void>(Error(error_, errnum_));
  closed_ = true;
  if (compressor_) compressor_->Closing();
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

std::vector<std::string> OutputFormatNames() {
  std::vector<std::string> names;
  names.reserve(kOutputFormats.size());
  for (const OutputFormat& f : kOutputFormats) names.emplace_back(f.name);
  return names;
}

std::string FormatFromPath(const std::filesystem::path& path) {
  std::string s = path.filename().string();
  if (EndsWith(s, ".gz")) s.resize(s.size() - 3);
  for (const OutputFormat& f : kOutputFormats)
    if (EndsWith(s, f.suffix)) return std::string(f.name);
  return "";
}

Result<std::string> ChooseOutputFormat(std::string_view name, const std::filesystem::path& path) {
  std::string names, suffixes;
  for (const OutputFormat& f : kOutputFormats) {
    const bool last = &f == &kOutputFormats.back();
    names += std::string(names.empty() ? "" : last ? " or " : ", ") + std::string(f.name);
    suffixes += std::string(suffixes.empty() ? "" : last ? " or " : ", ") + std::string(f.suffix);
  }
  if (!name.empty()) {
    for (const OutputFormat& f : kOutputFormats)
      if (f.name == name) return std::string(f.name);
    return Error("unknown output format '" + std::string(name) + "' (use " + names + ")");
  }
  std::string from_path = FormatFromPath(path);
  if (from_path.empty())
    return Error("cannot tell the output format from '" + path.string() + "': name it " + suffixes +
                 " (optionally .gz), or pass --format");
  return from_path;
}

}  // namespace ptsnap::output
