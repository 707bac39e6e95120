#include "pipeline/track_names.h"

#include <algorithm>
#include <variant>

#include "base/string_util.h"

namespace ptsnap::pipeline {

SidebandThreads ReadSidebandThreads(const std::vector<trace::Record>& records) {
  SidebandThreads t;
  for (const auto& r : records) {
    if (const auto* c = std::get_if<trace::Comm>(&r.body)) {
      t.comms[static_cast<int32_t>(c->tid)] = c->comm;
    } else if (const auto* task = std::get_if<trace::Task>(&r.body);
               task != nullptr && task->exit) {
      t.exits[static_cast<int32_t>(task->tid)] = r.sample_id.time;
    }
    t.earliest_ns = std::min(t.earliest_ns, r.sample_id.time);
  }
  return t;
}

std::string ProcessTrackName(const trace::Manifest& m, const std::map<int32_t, std::string>& comms,
                             int32_t pid) {
  std::string cmd;
  if (!m.command.empty() && !m.pids.empty() && m.pids[0] == pid) {
    cmd = base::Join(m.command);
  } else if (auto c = comms.find(pid); c != comms.end()) {
    cmd = c->second;
  } else {
    cmd = pid == 0 ? "cpus" : "process";
  }
  return cmd + " [pid=" + std::to_string(pid) + "]";
}

void TrackNamer::NameStream(const trace::Stream& s) {
  const int32_t pid = s.pid >= 0 ? s.pid : 0;
  const int32_t tid = s.tid >= 0 ? s.tid : pid;
  NameProcess(pid);
  NameThread(pid, tid, Comm(tid));
}

void TrackNamer::NameCpuStream(int32_t cpu, const std::vector<decode::ThreadId>& threads) {
  for (const auto& t : threads) {
    NameProcess(t.pid);
    NameThread(t.pid, t.tid, t.tid < 0 ? "cpu " + std::to_string(cpu) : Comm(t.tid));
  }
}

void TrackNamer::NameProcess(int32_t pid) {
  if (pids_named_.insert(pid).second) sink_.OnProcess(pid, ProcessTrackName(m_, comms_, pid));
}

void TrackNamer::NameThread(int32_t pid, int32_t tid, const std::string& name) {
  if (tids_named_.insert(tid).second) sink_.OnThread(pid, tid, name);
}

std::string TrackNamer::Comm(int32_t tid) const {
  auto c = comms_.find(tid);
  return c != comms_.end() ? c->second : "thread";
}

}  // namespace ptsnap::pipeline
