#include "pipeline/parallel.h"

#include <sched.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "base/check.h"

namespace ptsnap::pipeline {

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
    std::vector<decode::BranchEvent> events;  // kEvents
  };

  Ahead(const trace::TraceReader& reader, decode::PtDecoder& decoder,
        const std::vector<trace::Stream>& streams)
      : reader_(reader), decoder_(decoder), streams_(streams) {}
  ~Ahead() {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    not_full_.notify_all();
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
    lock.unlock();
    not_full_.notify_one();
    return it;
  }
  // A chunk the caller has delivered, for the thread to fill again.
  void Recycle(std::vector<decode::BranchEvent> chunk) {
    chunk.clear();
    std::lock_guard lock(mu_);
    if (spare_.size() < kQueueItems) spare_.push_back(std::move(chunk));
  }

 private:
  // Events per chunk, and items the queue holds before the thread waits:
  // at most about kQueueItems * kChunkEvents events are held (about 1.5 MB),
  // whatever the trace's length.
  static constexpr size_t kChunkEvents = 1024;
  static constexpr size_t kQueueItems = 16;

  void Push(Item it) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return cancelled_ || queue_.size() < kQueueItems; });
    if (cancelled_) return;
    queue_.push_back(std::move(it));
    lock.unlock();
    not_empty_.notify_one();
  }
  void PushChunk() {
    if (chunk_.empty()) return;
    Item it;
    it.kind = Kind::kEvents;
    it.events = std::move(chunk_);
    Push(std::move(it));
    std::lock_guard lock(mu_);
    if (!spare_.empty()) {
      chunk_ = std::move(spare_.back());
      spare_.pop_back();
    } else {
      chunk_ = {};
      chunk_.reserve(kChunkEvents);
    }
  }
  void Add(const decode::BranchEvent& e) {
    chunk_.push_back(e);
    if (chunk_.size() >= kChunkEvents) PushChunk();
  }
  void PushEnd(Result<void> r) {
    PushChunk();
    Item it;
    it.kind = Kind::kEnd;
    it.result = std::move(r);
    Push(std::move(it));
  }
  Result<std::string> ReadAndPush(size_t i) {
    Result<std::string> bytes = reader_.ReadStream(streams_[i]);
    Item it;
    it.kind = Kind::kRead;
    it.stream = i;
    if (!bytes) it.result = bytes.error();
    Push(std::move(it));
    return bytes;
  }
  bool cancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

  // DecodeTraceDir's stream loop, reading and decoding only.
  void Run() {
    chunk_.reserve(kChunkEvents);
    const decode::PtDecoder::Sink sink = [this](const decode::BranchEvent& e) { Add(e); };
    for (size_t i = 0; i < streams_.size() && !cancelled();) {
      const trace::Stream& s = streams_[i];
      if (s.tid < 0 && s.cpu >= 0) {
        std::vector<std::string> held;
        std::vector<decode::PtDecoder::CpuStream> group;
        size_t j = i;
        for (; j < streams_.size() && InCpuGroup(s, streams_[j]); ++j) {
          auto bytes = ReadAndPush(j);
          if (!bytes) continue;
          held.push_back(std::move(*bytes));
          group.push_back({streams_[j].cpu, {}});
        }
        for (size_t k = 0; k < group.size(); ++k) group[k].bytes = held[k];
        PushEnd(decoder_.DecodeCpuStreams(group, sink));
        i = j;
        continue;
      }
      ++i;
      auto bytes = ReadAndPush(i - 1);
      if (!bytes) continue;
      const int32_t pid = s.pid >= 0 ? s.pid : 0;
      PushEnd(decoder_.DecodeStream(pid, s.tid >= 0 ? s.tid : pid, *bytes, sink));
    }
  }

  const trace::TraceReader& reader_;
  decode::PtDecoder& decoder_;
  const std::vector<trace::Stream>& streams_;
  std::thread thread_;
  bool done_ = false;                       // joined: never started again
  std::vector<decode::BranchEvent> chunk_;  // the thread's, being filled
  std::mutex mu_;
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

Result<std::string> StreamFeed::Read(const trace::Stream& s) {
  if (!ahead_) return reader_.ReadStream(s);
  ahead_->Start();
  Ahead::Item it = ahead_->Pop();
  PTSNAP_CHECK(it.kind == Ahead::Kind::kRead && streams_[it.stream].id == s.id &&
               streams_[it.stream].file == s.file)
      << "StreamFeed: streams read out of the order given";
  if (!it.result) return it.result.error();
  return std::string();
}

Result<void> StreamFeed::DecodeStream(int32_t pid, int32_t tid, std::string_view bytes,
                                      const decode::PtDecoder::Sink& sink) {
  if (!ahead_) return decoder_.DecodeStream(pid, tid, bytes, sink);
  for (;;) {
    Ahead::Item it = ahead_->Pop();
    PTSNAP_CHECK(it.kind != Ahead::Kind::kRead) << "StreamFeed: a stream decoded before it is read";
    if (it.kind == Ahead::Kind::kEnd) return it.result;
    for (const decode::BranchEvent& e : it.events) sink(e);
    ahead_->Recycle(std::move(it.events));
  }
}

Result<void> StreamFeed::DecodeCpuStreams(const std::vector<decode::PtDecoder::CpuStream>& group,
                                          const decode::PtDecoder::Sink& sink) {
  if (!ahead_) return decoder_.DecodeCpuStreams(group, sink);
  return DecodeStream(0, 0, {}, sink);
}

void StreamFeed::Finish() {
  if (ahead_) ahead_->Join();
}

}  // namespace ptsnap::pipeline
