// Streams: each thread's encoder bytes into its ring (snapshot mode) or its
// file (full execution), and snapshots: every ring written as a stream.
#include <fcntl.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

namespace {

void WriteStream(int fd, std::span<const uint8_t> bytes) {
  auto r = base::WriteAll(fd, {reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                          "a PT stream");
  if (!r) Die("writing a PT stream failed: %s", std::strerror(r.error().errnum()));
}

bool StartsWithPsb(const std::vector<uint8_t>& c) {
  return c.size() >= 2 && c[0] == 0x02 && c[1] == 0x82;
}

}  // namespace

// Moves the encoder's pending bytes into the ring (oldest chunks dropped,
// keeping whole PSB periods so what remains starts at a PSB) or the file.
void Plugin::Drain(ThreadState* t) {
  auto bytes = t->pt.bytes();
  std::lock_guard lock(t->mu);
  t->ring_insns = t->insns;
  t->ring_hash = t->hash;
  if (bytes.empty()) return;
  if (opts_.full) {
    if (t->fd) WriteStream(t->fd.get(), bytes);  // none: detached (DriverGone)
  } else {
    t->ring.emplace_back(bytes.begin(), bytes.end());
    t->ring_bytes += bytes.size();
    while (t->ring.size() > 1 && t->ring_bytes > opts_.size) {
      t->ring_bytes -= t->ring.front().size();
      t->ring.pop_front();
      ++t->ring_first;
      t->wrapped = true;
      // Drop up to the next chunk that starts with a PSB (02 82): a snapshot
      // then always begins where a decoder can synchronise.
      while (t->ring.size() > 1 && !StartsWithPsb(t->ring.front())) {
        t->ring_bytes -= t->ring.front().size();
        t->ring.pop_front();
        ++t->ring_first;
      }
    }
  }
  t->pt.Take();
}

// Every thread's pending TNT bits and ring bytes out to its stream, and
// published (before a snapshot that ends the recording).
void Plugin::DrainEveryThread() {
  for (unsigned i = 0; i < kMaxVcpus; ++i) {
    ThreadState* t = vcpus_[i].thread;
    if (t == nullptr) continue;
    t->pt.FlushTnt();
    Drain(t);
    Publish(t);
  }
}

std::string Plugin::StreamFile(pid_t tid, uint32_t seq) const {
  return "pt-" + std::to_string(pid_) + "-" + std::to_string(tid) + "-" + std::to_string(seq) +
         ".pt";
}

// Writes `t`'s ring as the stream of snapshot `seq`. Caller holds mu_.
// When every chunk that entered the ring since the thread's previous
// snapshot stream is still in it, only those chunks are written, as a
// stream that continues that one (StreamMessage::follows): the ring is the
// previous streams' bytes and these, so --multi-snapshot's disk grows with
// the new data, not with the number of snapshots. Otherwise (the first
// snapshot, or the ring dropped chunks no stream holds yet) the whole ring.
void Plugin::WriteRing(ThreadState* t, uint32_t seq) {
  std::lock_guard lock(t->mu);
  if (t->ring.empty()) return;
  std::string name = StreamFile(t->tid, seq);
  std::string path = opts_.out + "/" + name;
  base::UniqueFd fd = OpenWorkFile(path, O_TRUNC);
  if (!fd) return;
  const bool follows = t->written_seq != 0 && !opts_.whole_rings && t->ring_first <= t->written_end;
  const uint64_t from = follows ? t->written_end - t->ring_first : 0;
  for (uint64_t i = from; i < t->ring.size(); ++i) WriteStream(fd.get(), t->ring[i]);
  fd.reset();
  Report(StreamMessage{.seq = seq,
                       .pid = t->pid,
                       .tid = t->tid,
                       .wrapped = t->wrapped,
                       .insns = t->ring_insns,
                       .hash = t->ring_hash,
                       .follows = follows ? t->written_seq : 0,
                       .ring = t->ring_bytes,
                       .file = name});
  t->written_end = t->ring_first + t->ring.size();
  t->written_seq = seq;
}

// A snapshot of every thread's ring, as `perf` takes of AUX buffers in
// overwrite mode. `self` (when not null) is the calling guest thread: its
// pending bytes are drained first.
// `slow`: the slow call it is taken for (its line precedes the snapshot's).
void Plugin::TakeSnapshot(const char* reason, const std::string& detail, ThreadState* self,
                          const SlowCallEntry* slow) {
  if (opts_.full) return;
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
  }
  if (self != nullptr) Publish(self);
  std::lock_guard lock(mu_);
  uint32_t seq = seq_.fetch_add(1);
  for (Vcpu& v : vcpus_)
    if (v.thread != nullptr) WriteRing(v.thread, seq);
  for (auto* t : finished_) WriteRing(t, seq);
  finished_.clear();
  uint64_t now = Now();
  if (slow != nullptr && self != nullptr) {
    Report(SlowCallMessage{.seq = seq, .begin = slow->begin, .length = self->clock - slow->begin});
    now = self->clock;  // when the call returned (another thread may have published later)
  }
  Report(SnapshotMessage{.seq = seq,
                         .time = now,
                         .tid = self ? U32(self->tid) : 0,
                         .reason = reason,
                         .detail = detail});
}

void Plugin::FullStreamLine(ThreadState* t) {
  Report(StreamMessage{.seq = 0,
                       .pid = t->pid,
                       .tid = t->tid,
                       .wrapped = false,
                       .insns = t->insns,
                       .hash = t->hash,
                       .file = t->file});
}

void Plugin::FinishFullStream(ThreadState* t) {
  if (!opts_.full || !t->fd) return;
  t->fd.reset();
  FullStreamLine(t);
}

}  // namespace ptsnap::emulate
