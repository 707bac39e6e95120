#include "output/text_writers.h"

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/string_util.h"
#include "output/fxt_writer.h"  // kTriggerTrackPid
#include "output/power_args.h"

namespace ptsnap::output {

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Micros(uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  return buf;
}

using base::Hex;

JsonWriter::JsonWriter(OutputFile* out) : out_(out) {
  out_->Write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
}

void JsonWriter::Event(const std::string& body) {
  if (!first_) out_->Write(",\n");
  first_ = false;
  out_->Write(body);
}

void JsonWriter::OnProcess(int32_t pid, const std::string& name) {
  const std::string shown =
      clock_in_names_ && pid != kTriggerTrackPid ? name + " (" + clock_ + ")" : name;
  Event("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pid) +
        ",\"args\":{\"name\":" + JsonString(shown) + "}}");
}

void JsonWriter::OnThread(int32_t pid, int32_t tid, const std::string& name) {
  Event("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(pid) +
        ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + JsonString(name) + "}}");
}

void JsonWriter::OnSlice(const model::Slice& s) {
  uint64_t begin = 0, end = 0;
  switch (s.kind) {
    case model::Slice::kBegin: return;
    case model::Slice::kEnd:
      begin = s.begin_ts;
      end = s.ts;
      break;
    case model::Slice::kComplete:
      begin = s.ts;
      end = s.end_ts;
      break;
    case model::Slice::kInstant: Instant(s.pid, s.tid, s.ts, *s.name); return;
    case model::Slice::kCounter:
      Event("{\"ph\":\"C\",\"name\":" + JsonString(*s.name) + ",\"pid\":" + std::to_string(s.pid) +
            ",\"tid\":" + std::to_string(s.tid) + ",\"ts\":" + Micros(s.ts) +
            ",\"args\":{\"value\":" + std::to_string(s.value) + "}}");
      return;
  }
  std::string e = "{\"ph\":\"X\",\"name\":" + JsonString(*s.name) +
                  ",\"pid\":" + std::to_string(s.pid) + ",\"tid\":" + std::to_string(s.tid) +
                  ",\"ts\":" + Micros(begin) + ",\"dur\":" + Micros(end >= begin ? end - begin : 0);
  std::string args;
  if (s.address != 0) args += "\"address\":\"" + Hex(s.address) + "\"";
  if (s.dso != nullptr)
    args += std::string(args.empty() ? "" : ",") + "\"dso\":" + JsonString(*s.dso);
  if (s.address != 0 && source_lookup_) {
    if (const decode::SourceLocation* loc =
            source_lookup_(s.space != 0 ? s.space : s.pid, s.address);
        loc != nullptr && !loc->file.empty() && loc->line != 0) {
      args += std::string(args.empty() ? "" : ",") + "\"file\":" + JsonString(loc->file) +
              ",\"line\":" + std::to_string(loc->line);
    }
  }
  if (s.inferred) args += std::string(args.empty() ? "" : ",") + "\"inferred_start_time\":true";
  if (s.inlined) args += std::string(args.empty() ? "" : ",") + "\"inlined\":true";
  // A complete event: a C-state's entry and, where a PWRX ended it, its exit.
  for (const decode::PowerArg& a : PowerArgsOf(s, /*whole_frame=*/true))
    args += std::string(args.empty() ? "" : ",") + JsonString(*a.name) + ":" + JsonString(*a.value);
  if (!args.empty()) e += ",\"args\":{" + args + "}";
  e += "}";
  Event(e);
}

void JsonWriter::Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name) {
  Event("{\"ph\":\"i\",\"s\":\"t\",\"name\":" + JsonString(name) + ",\"pid\":" +
        std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + Micros(ts) + "}");
}

Result<void> JsonWriter::Finish() {
  out_->Write(clock_.empty() ? "\n]}\n"
                             : "\n],\"otherData\":{\"clock\":" + JsonString(clock_) + "}}\n");
  return out_->Close();
}

// ---------------------------------------------------------------------------

EventsWriter::EventsWriter(OutputFile* out) : out_(out) { out_->Write("# ptsnap events v3\n"); }

namespace {
// Names may hold any byte; keep one line per event.
std::string OneLine(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}
}  // namespace

void EventsWriter::OnProcess(int32_t pid, const std::string& name) {
  out_->Write("P " + std::to_string(pid) + " " + OneLine(name) + "\n");
}

void EventsWriter::OnThread(int32_t pid, int32_t tid, const std::string& name) {
  out_->Write("T " + std::to_string(pid) + " " + std::to_string(tid) + " " + OneLine(name) + "\n");
}

void EventsWriter::OnSlice(const model::Slice& s) {
  std::string line =
      std::to_string(s.ts) + " " + std::to_string(s.pid) + " " + std::to_string(s.tid) + " ";
  switch (s.kind) {
    case model::Slice::kBegin: line += "B "; break;
    case model::Slice::kEnd: line += "E "; break;
    case model::Slice::kComplete: line += "X "; break;
    case model::Slice::kInstant: line += "I "; break;
    case model::Slice::kCounter: line += "C "; break;
  }
  line += OneLine(*s.name);
  if (s.kind == model::Slice::kEnd) line += " begin=" + std::to_string(s.begin_ts);
  if (s.kind == model::Slice::kComplete) line += " end=" + std::to_string(s.end_ts);
  if (s.kind == model::Slice::kCounter) line += " value=" + std::to_string(s.value);
  if (s.inferred) line += " inferred";
  if (s.via != model::Via::kNone) line += std::string(" via=") + model::ViaName(s.via);
  if (s.dso != nullptr && (s.kind == model::Slice::kBegin || s.kind == model::Slice::kEnd)) {
    line += " dso=" + OneLine(*s.dso);
  }
  // v3: a "[C-state Cn]" frame's begin ends with the entry's state, its end
  // with the PWRX's where one ended it (no value holds a space).
  for (const decode::PowerArg& a : PowerArgsOf(s, /*whole_frame=*/false))
    line += " " + *a.name + "=" + *a.value;
  line += "\n";
  out_->Write(line);
}

void EventsWriter::Instant(int32_t pid, int32_t tid, uint64_t ts, std::string_view name) {
  out_->Write(std::to_string(ts) + " " + std::to_string(pid) + " " + std::to_string(tid) + " I " +
              OneLine(name) + "\n");
}

Result<void> EventsWriter::Finish() { return out_->Close(); }

}  // namespace ptsnap::output
