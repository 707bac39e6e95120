#include "emulate/events.h"

#include <linux/perf_event.h>

namespace ptsnap::emulate {

namespace {

// Splits off `n` numeric fields, leaving the rest (a path or name) in `rest`.
bool Fields(std::string_view line, size_t n, std::vector<uint64_t>* nums, std::string_view* rest) {
  nums->clear();
  for (size_t i = 0; i < n; ++i) {
    size_t sp = line.find(' ');
    std::string_view f = line.substr(0, sp);
    uint64_t v = 0;
    if (f.empty() || f.size() > 20) return false;
    for (char c : f) {
      if (c < '0' || c > '9') return false;
      uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (UINT64_MAX - d) / 10) return false;
      v = v * 10 + d;
    }
    nums->push_back(v);
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  }
  *rest = line;
  return true;
}

trace::SampleId Sid(uint64_t pid, uint64_t tid, uint64_t time) {
  trace::SampleId s;
  s.pid = static_cast<uint32_t>(pid);
  s.tid = static_cast<uint32_t>(tid);
  s.time = time;
  s.cpu = 0;
  s.id = kEmulatedEventId;
  return s;
}

}  // namespace

Result<void> ParseEvents(std::string_view text, PluginEvents* out) {
  size_t lineno = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // torn tail
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++lineno;
    size_t sp = line.find(' ');
    std::string_view kind = line.substr(0, sp);
    std::string_view body = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    std::vector<uint64_t> n;
    std::string_view rest;
    auto bad = [&] {
      return Error("emulator event log line " + std::to_string(lineno) + " is malformed: '" +
                   std::string(line.substr(0, 80)) + "'");
    };
    if (kind == "mmap2") {
      if (!Fields(body, 11, &n, &rest) || rest.empty()) return bad();
      trace::Record r;
      r.type = PERF_RECORD_MMAP2;
      r.misc = PERF_RECORD_MISC_USER;
      r.sample_id = Sid(n[1], n[2], n[0]);
      trace::Mmap2 m;
      m.pid = static_cast<uint32_t>(n[1]);
      m.tid = static_cast<uint32_t>(n[2]);
      m.addr = n[3];
      m.len = n[4];
      m.pgoff = n[5];
      m.maj = static_cast<uint32_t>(n[6]);
      m.min = static_cast<uint32_t>(n[7]);
      m.ino = n[8];
      m.prot = static_cast<uint32_t>(n[9]);
      m.flags = static_cast<uint32_t>(n[10]);
      m.filename = std::string(rest);
      r.body = std::move(m);
      out->records.push_back(std::move(r));
    } else if (kind == "comm") {
      if (!Fields(body, 4, &n, &rest) || rest.empty()) return bad();
      trace::Record r;
      r.type = PERF_RECORD_COMM;
      r.misc = n[3] ? trace::kMiscCommExec : 0;
      r.sample_id = Sid(n[1], n[2], n[0]);
      trace::Comm c;
      c.pid = static_cast<uint32_t>(n[1]);
      c.tid = static_cast<uint32_t>(n[2]);
      c.comm = std::string(rest.substr(0, 15));
      c.exec = n[3] != 0;
      r.body = std::move(c);
      out->records.push_back(std::move(r));
    } else if (kind == "fork" || kind == "exit") {
      if (!Fields(body, 5, &n, &rest) || !rest.empty()) return bad();
      trace::Record r;
      r.type = kind == "fork" ? PERF_RECORD_FORK : PERF_RECORD_EXIT;
      r.sample_id = Sid(n[1], n[3], n[0]);
      trace::Task t;
      t.exit = kind == "exit";
      t.pid = static_cast<uint32_t>(n[1]);
      t.ppid = static_cast<uint32_t>(n[2]);
      t.tid = static_cast<uint32_t>(n[3]);
      t.ptid = static_cast<uint32_t>(n[4]);
      t.time = n[0];
      r.body = t;
      out->records.push_back(std::move(r));
    } else if (kind == "itrace") {
      if (!Fields(body, 3, &n, &rest) || !rest.empty()) return bad();
      trace::Record r;
      r.type = PERF_RECORD_ITRACE_START;
      r.sample_id = Sid(n[1], n[2], n[0]);
      r.body = trace::ItraceStart{static_cast<uint32_t>(n[1]), static_cast<uint32_t>(n[2])};
      out->records.push_back(std::move(r));
    } else if (kind == "stream") {
      if (!Fields(body, 6, &n, &rest) || rest.empty() || rest.find('/') != rest.npos) return bad();
      PluginStream s;
      s.seq = static_cast<uint32_t>(n[0]);
      s.pid = static_cast<int32_t>(n[1]);
      s.tid = static_cast<int32_t>(n[2]);
      s.wrapped = n[3] != 0;
      s.insns = n[4];
      s.hash = n[5];
      s.file = std::string(rest);
      out->streams.push_back(std::move(s));
    } else if (kind == "snapshot") {
      if (!Fields(body, 3, &n, &rest) || rest.empty()) return bad();
      PluginSnapshot s;
      s.seq = static_cast<uint32_t>(n[0]);
      s.time = n[1];
      s.tid = static_cast<uint32_t>(n[2]);
      size_t rsp = rest.find(' ');
      s.reason = std::string(rest.substr(0, rsp));
      if (rsp != rest.npos) s.detail = std::string(rest.substr(rsp + 1));
      out->snapshots.push_back(std::move(s));
    } else if (kind == "note") {
      out->notes.emplace_back(body);
    } else if (kind == "done") {
      out->done = true;
    } else {
      return bad();
    }
  }
  return Ok();
}

}  // namespace ptsnap::emulate
