#include "emulate/events.h"

#include <linux/perf_event.h>

#include <type_traits>

namespace ptsnap::emulate {

namespace {

trace::SampleId Sid(uint32_t pid, uint32_t tid, uint64_t time) {
  trace::SampleId s;
  s.pid = pid;
  s.tid = tid;
  s.time = time;
  s.cpu = 0;
  s.id = kEmulatedEventId;
  return s;
}

trace::Record ToRecord(const MmapMessage& m) {
  trace::Record r;
  r.type = PERF_RECORD_MMAP2;
  r.misc = PERF_RECORD_MISC_USER;
  r.sample_id = Sid(m.pid, m.tid, m.time);
  trace::Mmap2 mm;
  mm.pid = m.pid;
  mm.tid = m.tid;
  mm.addr = m.addr;
  mm.len = m.len;
  mm.pgoff = m.pgoff;
  mm.maj = m.maj;
  mm.min = m.min;
  mm.ino = m.ino;
  mm.prot = m.prot;
  mm.flags = m.flags;
  mm.filename = m.path;
  r.body = std::move(mm);
  return r;
}

trace::Record ToRecord(const CommMessage& m) {
  trace::Record r;
  r.type = PERF_RECORD_COMM;
  r.misc = m.exec ? trace::kMiscCommExec : 0;
  r.sample_id = Sid(m.pid, m.tid, m.time);
  trace::Comm c;
  c.pid = m.pid;
  c.tid = m.tid;
  c.comm = m.name.substr(0, 15);  // the kernel's TASK_COMM_LEN
  c.exec = m.exec;
  r.body = std::move(c);
  return r;
}

trace::Record ToRecord(const TaskMessage& m) {
  trace::Record r;
  r.type = m.exit ? PERF_RECORD_EXIT : PERF_RECORD_FORK;
  r.sample_id = Sid(m.pid, m.tid, m.time);
  trace::Task t;
  t.exit = m.exit;
  t.pid = m.pid;
  t.ppid = m.ppid;
  t.tid = m.tid;
  t.ptid = m.ptid;
  t.time = m.time;
  r.body = t;
  return r;
}

trace::Record ToRecord(const ItraceMessage& m) {
  trace::Record r;
  r.type = PERF_RECORD_ITRACE_START;
  r.sample_id = Sid(m.pid, m.tid, m.time);
  r.body = trace::ItraceStart{m.pid, m.tid};
  return r;
}

}  // namespace

std::optional<trace::Record> SidebandRecord(const PluginMessage& message) {
  return std::visit(
      [](const auto& m) -> std::optional<trace::Record> {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, StreamMessage> || std::is_same_v<M, SnapshotMessage> ||
                      std::is_same_v<M, SlowCallMessage> || std::is_same_v<M, NoteMessage> ||
                      std::is_same_v<M, DoneMessage>) {
          return std::nullopt;
        } else {
          return ToRecord(m);
        }
      },
      message);
}

Result<void> ParseEvents(std::string_view text, PluginEvents* out) {
  PTSNAP_ASSIGN_OR_RETURN(std::vector<PluginMessage> messages, ParseMessages(text));
  for (auto& message : messages) {
    if (auto r = SidebandRecord(message)) {
      out->records.push_back(std::move(*r));
      continue;
    }
    std::visit(
        [out](auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, StreamMessage>) {
            out->streams.push_back(std::move(m));
          } else if constexpr (std::is_same_v<M, SnapshotMessage>) {
            out->snapshots.push_back(std::move(m));
          } else if constexpr (std::is_same_v<M, SlowCallMessage>) {
            out->slow_calls.push_back(m);
          } else if constexpr (std::is_same_v<M, NoteMessage>) {
            out->notes.push_back(std::move(m.text));
          } else if constexpr (std::is_same_v<M, DoneMessage>) {
            out->done = true;
          }
        },
        message);
  }
  return Ok();
}

}  // namespace ptsnap::emulate
