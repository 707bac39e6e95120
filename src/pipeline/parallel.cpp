#include "pipeline/parallel.h"

#include <sched.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "base/check.h"

namespace ptsnap::pipeline {

namespace {

// Copies an event into a chunk the other thread will read. On x86-64 with
// non-temporal stores: the chunk's cache lines were last read by the
// caller's core, and ordinary stores would fetch each back from it before
// writing (measured: with -j 2 on a CPython trace the decoding thread
// stalled on those stores, and -j 2 was barely faster than -j 1; with
// these, 1.97 -> 1.41 s). The stores go to memory instead, in order once
// FenceChunk has run; the caller reads them from there sequentially.
void CopyOut(decode::BranchEvent* dst, const decode::BranchEvent& e) {
#if defined(__x86_64__)
  static_assert(sizeof e % 8 == 0 && alignof(decode::BranchEvent) >= 8);
  long long w[sizeof e / 8];
  std::memcpy(w, &e, sizeof e);
  auto* d = reinterpret_cast<long long*>(dst);
  for (size_t k = 0; k < sizeof e / 8; ++k) _mm_stream_si64(d + k, w[k]);
#else
  *dst = e;
#endif
}
// Orders the CopyOut stores before the chunk is handed over.
void FenceChunk() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace

bool InCpuGroup(const trace::Stream& first, const trace::Stream& s) {
  return s.tid < 0 && s.cpu >= 0 && s.snapshot == first.snapshot;
}

unsigned DefaultJobs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

ThreadPlan PlanThreads(unsigned jobs, const std::string& format,
                       const std::filesystem::path& output) {
  ThreadPlan p;
  p.jobs = jobs;
  const bool gzip = !format.empty() && output.extension() == ".gz";
  // -j 2: one thread, the same bytes as -j 1; from 3 on, jobs - 1 threads in blocks (pigz).
  p.deflate_threads = !gzip || jobs < 2 ? 0 : (jobs == 2 ? 1 : jobs - 1);
  p.writer_thread = jobs >= 2 && !gzip && format == "json";
  p.decode_thread = jobs >= 2 && !gzip && !p.writer_thread;
  return p;
}

// The decoding thread and the queue between it and the caller. What goes
// through the queue, in the order of the caller's calls: one kRead per
// stream; after the kRead of a stream read without error, or after those
// of a per-CPU group, its events in chunks (kEvents), then one kEnd.
class StreamFeed::Ahead {
 public:
  enum class Kind : uint8_t { kRead, kEvents, kEnd };
  struct Item {
    Kind kind = Kind::kEvents;
    size_t stream = 0;                        // kRead: the index in the order
    Result<void> result;                      // kRead: the read's, kEnd: the decoder's
    uint64_t missing = 0;                     // kRead: StreamBytes::missing()
    std::vector<decode::BranchEvent> events;  // kEvents: kChunkEvents, the first `count` filled
    size_t count = 0;
  };

  Ahead(const trace::TraceReader& reader, decode::PtDecoder& decoder,
        const std::vector<trace::Stream>& streams)
      : reader_(reader), decoder_(decoder), streams_(streams) {}
  ~Ahead() {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    not_full_.notify_all();  // a thread waiting on a full queue drops what it has
    Join();
  }
  Ahead(const Ahead&) = delete;
  Ahead& operator=(const Ahead&) = delete;

  void Start() {
    if (!thread_.joinable() && !done_) thread_ = std::thread([this] { Run(); });
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
    done_ = true;
  }

  // The next item; blocks until the thread has made it.
  Item Pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return !queue_.empty(); });
    Item it = std::move(queue_.front());
    queue_.pop_front();
    // The thread, waiting on a full queue, resumes only once half of it is
    // taken: each thread wakes the other once per several chunks, not per
    // chunk (on a busy machine every wake is a context switch).
    const bool wake = queue_.size() == kQueueItems / 2;
    lock.unlock();
    if (wake) not_full_.notify_one();
    return it;
  }
  // A chunk the caller has delivered, for the thread to fill again.
  void Recycle(std::vector<decode::BranchEvent> chunk) {
    std::lock_guard lock(mu_);
    if (spare_.size() < kQueueItems) spare_.push_back(std::move(chunk));
  }

 private:
  // Events per chunk, and items the queue holds before the thread waits:
  // at most about kQueueItems * kChunkEvents events are held (about 1 MB),
  // whatever the trace's length.
  static constexpr size_t kChunkEvents = 2048;
  static constexpr size_t kQueueItems = 8;

  void Push(Item it) {
    std::unique_lock lock(mu_);
    // Full: wait until the caller has taken half (Pop).
    if (queue_.size() >= kQueueItems)
      not_full_.wait(lock, [&] { return cancelled_ || queue_.size() <= kQueueItems / 2; });
    if (cancelled_) return;
    // The caller, waiting on an empty queue, is woken once half of it is
    // filled, or at once by a kRead or kEnd (the thread may wait for it).
    const bool wake = it.kind != Kind::kEvents || queue_.size() + 1 == kQueueItems / 2;
    queue_.push_back(std::move(it));
    lock.unlock();
    if (wake) not_empty_.notify_one();
  }
  void PushChunk() {
    if (filled_ == 0) return;
    FenceChunk();
    Item it;
    it.kind = Kind::kEvents;
    it.events = std::move(chunk_);
    it.count = filled_;
    filled_ = 0;
    Push(std::move(it));
    std::lock_guard lock(mu_);
    if (!spare_.empty()) {
      chunk_ = std::move(spare_.back());
      spare_.pop_back();
    } else {
      chunk_ = std::vector<decode::BranchEvent>(kChunkEvents);
    }
  }
  // Chunks keep their size (kChunkEvents): filling one writes each event
  // once, with CopyOut, and nothing else.
  void Add(const decode::BranchEvent& e) {
    CopyOut(&chunk_[filled_++], e);
    if (filled_ == kChunkEvents) PushChunk();
  }
  void PushEnd(Result<void> r) {
    PushChunk();
    Item it;
    it.kind = Kind::kEnd;
    it.result = std::move(r);
    Push(std::move(it));
  }
  Result<trace::StreamBytes> ReadAndPush(size_t i) {
    Result<trace::StreamBytes> bytes =
        reader_.MapStream(streams_[i], trace::ShortStream::kKeepWhatIsThere);
    Item it;
    it.kind = Kind::kRead;
    it.stream = i;
    if (!bytes) {
      it.result = bytes.error();
    } else {
      it.missing = bytes->missing();
    }
    Push(std::move(it));
    return bytes;
  }
  bool cancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

  // DecodeTraceDir's stream loop, reading and decoding only.
  void Run() {
    chunk_.resize(kChunkEvents);
    auto sink = decode::EventSinkOf([this](const decode::BranchEvent& e) { Add(e); });
    for (size_t i = 0; i < streams_.size() && !cancelled();) {
      const trace::Stream& s = streams_[i];
      if (s.tid < 0 && s.cpu >= 0) {
        std::vector<trace::StreamBytes> held;
        std::vector<decode::PtDecoder::CpuStream> group;
        size_t j = i;
        for (; j < streams_.size() && InCpuGroup(s, streams_[j]); ++j) {
          auto bytes = ReadAndPush(j);
          if (!bytes) continue;
          held.push_back(std::move(*bytes));
          group.push_back({streams_[j].cpu, {}, streams_[j].id, held.back().missing()});
        }
        for (size_t k = 0; k < group.size(); ++k) {
          group[k].bytes = held[k].view();
          group[k].source = &held[k];
        }
        PushEnd(decoder_.DecodeCpuStreams(group, sink));
        i = j;
        continue;
      }
      ++i;
      auto bytes = ReadAndPush(i - 1);
      if (!bytes) continue;
      const int32_t pid = s.pid >= 0 ? s.pid : 0;
      PushEnd(decoder_.DecodeStream(pid, s.tid >= 0 ? s.tid : pid, bytes->view(), sink, s.id,
                                    bytes->missing(), &*bytes));
    }
  }

  const trace::TraceReader& reader_;
  decode::PtDecoder& decoder_;
  const std::vector<trace::Stream>& streams_;
  std::thread thread_;
  bool done_ = false;  // joined: never started again
  // The thread's chunk being filled, on a cache line of its own.
  alignas(64) std::vector<decode::BranchEvent> chunk_;
  size_t filled_ = 0;  // events in chunk_
  alignas(64) std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Item> queue_;                               // guarded by mu_
  std::vector<std::vector<decode::BranchEvent>> spare_;  // guarded by mu_
  bool cancelled_ = false;                               // guarded by mu_
};

StreamFeed::StreamFeed(unsigned jobs, const trace::TraceReader& reader, decode::PtDecoder& decoder,
                       std::vector<trace::Stream> streams)
    : reader_(reader), decoder_(decoder), streams_(std::move(streams)) {
  if (jobs >= 2 && !streams_.empty()) ahead_ = std::make_unique<Ahead>(reader_, decoder_, streams_);
}

StreamFeed::~StreamFeed() = default;

Result<trace::StreamBytes> StreamFeed::Read(const trace::Stream& s) {
  if (!ahead_) return reader_.MapStream(s, trace::ShortStream::kKeepWhatIsThere);
  ahead_->Start();
  Ahead::Item it = ahead_->Pop();
  PTSNAP_CHECK(it.kind == Ahead::Kind::kRead && streams_[it.stream].id == s.id &&
               streams_[it.stream].file == s.file)
      << "StreamFeed: streams read out of the order given";
  if (!it.result) return it.result.error();
  trace::StreamBytes none;
  none.set_missing(it.missing);
  return none;
}

Result<void> StreamFeed::DecodeStream(int32_t pid, int32_t tid, std::string_view bytes,
                                      decode::EventSink& sink, uint32_t stream, uint64_t missing,
                                      const trace::StreamBytes* source) {
  if (!ahead_) return decoder_.DecodeStream(pid, tid, bytes, sink, stream, missing, source);
  for (;;) {
    Ahead::Item it = ahead_->Pop();
    PTSNAP_CHECK(it.kind != Ahead::Kind::kRead) << "StreamFeed: a stream decoded before it is read";
    if (it.kind == Ahead::Kind::kEnd) return it.result;
    sink.OnEvents(std::span(it.events.data(), it.count));
    ahead_->Recycle(std::move(it.events));
  }
}

Result<void> StreamFeed::DecodeCpuStreams(const std::vector<decode::PtDecoder::CpuStream>& group,
                                          decode::EventSink& sink) {
  if (!ahead_) return decoder_.DecodeCpuStreams(group, sink);
  return DecodeStream(0, 0, {}, sink, 0, 0);
}

void StreamFeed::Finish() {
  if (ahead_) ahead_->Join();
}

// The writer's thread and the queue of op batches in front of it.
class WriterThread::Thread {
 public:
  explicit Thread(WriterThread* owner) : owner_(owner), thread_([this] { Run(); }) {}
  ~Thread() {
    Flush();
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    not_empty_.notify_one();
    thread_.join();
  }
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;

  void Add(const Op& op) {
    batch_.push_back(op);
    if (batch_.size() >= kBatchOps) Flush();
  }

 private:
  // Ops per batch and batches queued before the caller waits: memory stays
  // bounded (a few MB) whatever the trace's length.
  static constexpr size_t kBatchOps = 2048;
  static constexpr size_t kQueueBatches = 8;

  void Flush() {
    if (batch_.empty()) return;
    std::unique_lock lock(mu_);
    // Full: wait until the thread has written half (as StreamFeed's queue).
    if (queue_.size() >= kQueueBatches)
      not_full_.wait(lock, [&] { return queue_.size() <= kQueueBatches / 2; });
    queue_.push_back(std::move(batch_));
    // The thread, waiting on an empty queue, is woken once half of it is
    // filled (and at the end, ~Thread).
    const bool wake = queue_.size() == kQueueBatches / 2;
    if (!spare_.empty()) {
      batch_ = std::move(spare_.back());
      spare_.pop_back();
    } else {
      batch_ = {};
    }
    lock.unlock();
    if (wake) not_empty_.notify_one();
  }
  void Run() {
    for (;;) {
      std::unique_lock lock(mu_);
      not_empty_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, and everything written
      std::vector<Op> batch = std::move(queue_.front());
      queue_.pop_front();
      const bool wake = queue_.size() == kQueueBatches / 2;
      lock.unlock();
      if (wake) not_full_.notify_one();
      for (const Op& op : batch) owner_->Apply(op);
      batch.clear();
      lock.lock();
      if (spare_.size() < kQueueBatches) spare_.push_back(std::move(batch));
    }
  }

  WriterThread* owner_;
  std::vector<Op> batch_;  // the caller's, being filled
  alignas(64) std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<std::vector<Op>> queue_;   // guarded by mu_
  std::vector<std::vector<Op>> spare_;  // guarded by mu_
  bool stop_ = false;                   // guarded by mu_
  std::thread thread_;                  // last: starts when the rest is ready
};

WriterThread::WriterThread(model::SliceSink* to, output::SourceLookup lookup, unsigned lookup_kinds)
    : to_(to),
      lookup_(std::move(lookup)),
      lookup_kinds_(lookup_kinds),
      thread_(std::make_unique<Thread>(this)) {}

WriterThread::~WriterThread() { Stop(); }

void WriterThread::Stop() { thread_.reset(); }

output::SourceLookup WriterThread::WriterLookup() {
  return [this](int32_t, uint64_t) { return current_.loc; };
}

void WriterThread::Add(const Op& op) {
  if (thread_) {
    thread_->Add(op);
  } else {
    Apply(op);
  }
}

void WriterThread::Apply(const Op& op) {
  switch (op.kind) {
    case Op::kProcess: to_->OnProcess(op.slice.pid, *op.name); break;
    case Op::kThread: to_->OnThread(op.slice.pid, op.slice.tid, *op.name); break;
    case Op::kSlice:
      current_.loc = op.loc;
      to_->OnSlice(op.slice);
      current_.loc = nullptr;
      break;
  }
}

void WriterThread::OnProcess(int32_t pid, const std::string& name) {
  Op op;
  op.kind = Op::kProcess;
  op.slice.pid = pid;
  op.name = &names_.emplace_back(name);
  Add(op);
}

void WriterThread::OnThread(int32_t pid, int32_t tid, const std::string& name) {
  Op op;
  op.kind = Op::kThread;
  op.slice.pid = pid;
  op.slice.tid = tid;
  op.name = &names_.emplace_back(name);
  Add(op);
}

void WriterThread::OnSlice(const model::Slice& s) {
  Op op;
  op.slice = s;
  // Cached by the Symbolizer.
  if (s.address != 0 && lookup_ && (lookup_kinds_ & (1u << s.kind)) != 0)
    op.loc = lookup_(s.space != 0 ? s.space : s.pid, s.address);
  Add(op);
}

Result<void> WriterThread::Finish() {
  Stop();
  return to_->Finish();
}

}  // namespace ptsnap::pipeline
