#include "emulate/ingest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <span>
#include <variant>

#include "base/file_util.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "emulate/events.h"

namespace ptsnap::emulate {

namespace fs = std::filesystem;

namespace {

// The bytes of `path` from `offset` on (empty when it did not grow).
Result<std::string> ReadFrom(const fs::path& path, uint64_t offset) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::FromErrno("open " + path.string());
  std::string out;
  char buf[1 << 16];
  auto at = static_cast<off_t>(offset);
  for (;;) {
    ssize_t n = ::pread(fd.get(), buf, sizeof(buf), at);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::FromErrno("read " + path.string());
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

}  // namespace

bool PluginIngest::done() const {
  return !logs_.empty() &&
         std::all_of(logs_.begin(), logs_.end(), [](const auto& l) { return l.second.done; });
}

std::vector<std::string> PluginIngest::Unfinished() const {
  std::vector<std::string> out;
  for (const auto& [name, log] : logs_) {
    if (log.done) continue;
    const size_t dot = name.rfind('.');  // events.<pid>
    out.push_back(dot == std::string::npos ? name : name.substr(dot + 1));
  }
  return out;
}

Result<void> PluginIngest::AddStream(const StreamMessage& s, uint32_t seq, Log& log) {
  const fs::path file = work_ / s.file;
  trace::Stream info;
  info.pid = s.pid;
  info.tid = s.tid;
  info.snapshot = seq;
  info.wrapped = s.wrapped;
  if (s.follows != 0) {
    // The plugin writes a thread's snapshots in order, each stream before
    // its snapshot's line: the stream it continues is listed already.
    auto last = log.last.find(s.tid);
    if (last == log.last.end() || last->second.first != s.follows) {
      return Error("the emulator's plugin wrote " + s.file + " as the continuation of thread " +
                   std::to_string(s.tid) + "'s stream of its snapshot " +
                   std::to_string(s.follows) + ", which ptsnap has not listed");
    }
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return Error::FromErrno("stat " + file.string());
    if (static_cast<uint64_t>(st.st_size) > s.ring) {
      return Error("the emulator's plugin wrote " + std::to_string(st.st_size) + " bytes to " +
                   s.file + " but says its ring held " + std::to_string(s.ring));
    }
    info.follows = last->second.second;
    info.ring_bytes = s.ring;
  }
  // Moved, not copied: the work directory is inside the trace directory,
  // so a stream the plugin wrote until the disk filled is still kept.
  PTSNAP_ASSIGN_OR_RETURN(uint32_t id, writer_.AdoptStream(info, file));
  log.last[s.tid] = {s.seq, id};
  stats_.push_back({id, s.tid, s.insns, s.hash});
  return Ok();
}

Result<void> PluginIngest::ReadLog(const fs::path& path, Log& log,
                                   std::vector<trace::Snapshot>& added) {
  PTSNAP_ASSIGN_OR_RETURN(std::string text, ReadFrom(path, log.offset));
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return Ok();  // nothing, or one torn line
  text.resize(end + 1);
  auto messages = ParseMessages(text);
  if (!messages) return std::move(messages).error().AddContext("reading " + path.string());
  log.offset += text.size();

  std::string sideband;
  for (PluginMessage& message : *messages) {
    if (auto r = SidebandRecord(message)) {
      sideband += trace::SerializeRecord(*r);
      records_.push_back(std::move(*r));
    } else if (auto* st = std::get_if<StreamMessage>(&message)) {
      if (st->seq == 0) {
        // A full-execution stream is described again when an execve failed
        // after the plugin had flushed for it: the last description wins.
        if (!full_ids_.contains(st->file)) {
          trace::Stream info;
          info.pid = st->pid;
          info.tid = st->tid;
          PTSNAP_ASSIGN_OR_RETURN(uint32_t id, writer_.AdoptStream(info, work_ / st->file));
          full_ids_[st->file] = id;
        }
        auto same = std::find_if(log.full.begin(), log.full.end(),
                                 [&](const StreamMessage& o) { return o.file == st->file; });
        if (same != log.full.end()) {
          *same = std::move(*st);
        } else {
          log.full.push_back(std::move(*st));
        }
      } else {
        log.pending[st->seq].push_back(std::move(*st));
      }
    } else if (auto* sc = std::get_if<SlowCallMessage>(&message)) {
      log.slow[sc->seq] = *sc;
    } else if (auto* sn = std::get_if<SnapshotMessage>(&message)) {
      // The records read so far first: the streams' code must be mapped in
      // the sideband a decoder reads with them.
      if (!sideband.empty()) {
        PTSNAP_TRY(writer_.AppendSideband(std::as_bytes(std::span(sideband))));
        sideband.clear();
      }
      const uint32_t seq = next_seq_++;
      for (const StreamMessage& s : log.pending[sn->seq]) PTSNAP_TRY(AddStream(s, seq, log));
      log.pending.erase(sn->seq);
      trace::Snapshot snap;
      snap.seq = seq;
      auto reason = trace::SnapshotReasonFrom(sn->reason);
      if (!reason)
        return Error("the emulator's plugin reported an unknown snapshot reason '" + sn->reason +
                     "'");
      snap.reason = *reason;
      snap.detail = sn->detail;
      if (snap.reason == trace::SnapshotReason::kSignal && asked_used_ < asked_.size())
        snap.detail = asked_[asked_used_++];
      snap.time = sn->time;
      snap.tid = sn->tid;
      if (auto slow = log.slow.find(sn->seq); slow != log.slow.end()) {
        snap.call_begin = slow->second.begin;
        snap.call_ns = slow->second.length;
        log.slow.erase(slow);
      }
      PTSNAP_TRY(writer_.AddSnapshot(snap));  // rewrites the manifest
      added.push_back(std::move(snap));
    } else if (auto* note = std::get_if<NoteMessage>(&message)) {
      notes_.push_back(std::move(note->text));
    } else if (std::holds_alternative<DoneMessage>(message)) {
      log.done = true;
    }
  }
  if (!sideband.empty()) PTSNAP_TRY(writer_.AppendSideband(std::as_bytes(std::span(sideband))));
  return Ok();
}

Result<std::vector<trace::Snapshot>> PluginIngest::Poll() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(work_, ec)) {
    std::string name = e.path().filename().string();
    // A process's JIT code capture moves into the trace directory when it
    // appears; the plugin goes on appending to it there.
    constexpr std::string_view kJit = "jit-code.";
    if (name.rfind("events.", 0) == 0) {
      names.push_back(std::move(name));
    } else if (name.starts_with(kJit)) {
      auto pid = base::ParseUint(std::string_view(name).substr(kJit.size()), 10);
      if (pid && *pid > 0 && *pid <= INT32_MAX)
        PTSNAP_TRY(writer_.AdoptJitCode(static_cast<int32_t>(*pid), e.path()));
    }
  }
  std::sort(names.begin(), names.end());
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  const bool list = !full_ids_.empty() && ns - sizes_listed_ns_ >= 1'000'000'000;
  std::map<uint32_t, uint64_t> sizes;
  if (list) sizes = FullSizesNow();
  std::vector<trace::Snapshot> added;
  for (const std::string& name : names) PTSNAP_TRY(ReadLog(work_ / name, logs_[name], added));
  if (list) {
    sizes_listed_ns_ = ns;
    PTSNAP_TRY(ListFullSizes(sizes));
  }
  return added;
}

std::map<uint32_t, uint64_t> PluginIngest::FullSizesNow() {
  std::map<uint32_t, uint64_t> sizes;
  for (const auto& [file, id] : full_ids_) {
    trace::Stream* st = writer_.FindStream(id);
    struct stat info {};
    if (st != nullptr && ::stat((writer_.dir() / st->file).c_str(), &info) == 0)
      sizes[id] = static_cast<uint64_t>(info.st_size);
  }
  return sizes;
}

Result<void> PluginIngest::ListFullSizes(const std::map<uint32_t, uint64_t>& sizes) {
  bool grew = false;
  for (const auto& [id, size] : sizes) {
    trace::Stream* st = writer_.FindStream(id);
    if (st == nullptr || size <= st->size) continue;
    const fs::path path = writer_.dir() / st->file;
    // Synced before it is listed: the manifest never claims bytes a crash
    // could take back.
    base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::FromErrno("open " + path.string());
    if (::fdatasync(fd.get()) != 0 && errno != EINVAL)
      return Error::FromErrno("fsync " + path.string());
    st->size = size;
    grew = true;
  }
  return grew ? writer_.Flush() : Ok();
}

Result<std::vector<trace::Snapshot>> PluginIngest::Finish() {
  PTSNAP_ASSIGN_OR_RETURN(std::vector<trace::Snapshot> added, Poll());
  // The plugin has ended (QEMU exited): every log line is read, and the
  // files are whole.
  PTSNAP_TRY(ListFullSizes(FullSizesNow()));
  for (auto& [name, log] : logs_) {
    for (const StreamMessage& s : log.full) {
      if (auto it = full_ids_.find(s.file); it != full_ids_.end())
        stats_.push_back({it->second, s.tid, s.insns, s.hash});
    }
    // A snapshot cut short (the process died writing it): its streams are
    // kept, under no snapshot.
    for (const auto& [seq, streams] : log.pending)
      for (const StreamMessage& s : streams) PTSNAP_TRY(AddStream(s, 0, log));
    log.full.clear();
    log.pending.clear();
  }
  return added;
}

}  // namespace ptsnap::emulate
