#include "emulate/plugin_protocol.h"

#include <charconv>
#include <limits>
#include <type_traits>

#include "base/string_util.h"

namespace ptsnap::emulate {
namespace {

template <typename M>
std::string_view KindOf(const M& m) {
  if constexpr (std::is_same_v<M, TaskMessage>) {
    return m.exit ? "exit" : "fork";
  } else {
    return M::kKind;
  }
}

// The schema's visitor that writes a line.
class LineWriter {
 public:
  explicit LineWriter(std::string_view kind) : line_(kind) {}

  template <typename T>
  void Num(const char* /*name*/, const T& v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<uint64_t>(v));
    line_ += ' ';
    line_.append(buf, end);
  }
  void Word(const char* /*name*/, const std::string& w) {
    line_ += ' ';
    line_ += w;
  }
  void Text(const char* /*name*/, const std::string& t, bool may_be_empty) {
    if (t.empty() && may_be_empty) return;
    line_ += ' ';
    for (char c : t) {
      if (c == '\\') {
        line_ += "\\\\";
      } else if (c == '\n') {
        line_ += "\\n";
      } else {
        line_ += c;
      }
    }
  }
  void FileName(const char* name, const std::string& f) { Text(name, f, false); }

  std::string Finish() && {
    line_ += '\n';
    return std::move(line_);
  }

 private:
  std::string line_;
};

// The schema's visitor that reads a line's fields (everything after its
// kind, from the space before the first field). The first problem is kept.
class LineReader {
 public:
  LineReader(std::string_view kind, std::string_view fields) : kind_(kind), rest_(fields) {}

  template <typename T>
  void Num(const char* name, T& v) {
    std::string_view f;
    if (!NextField(name, &f)) return;
    uint64_t x = 0;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), x);
    if (ec != std::errc() || end != f.data() + f.size()) {
      return Fail(std::string(name) + " '" + std::string(f) +
                  "' is not an unsigned decimal number");
    }
    if constexpr (std::is_same_v<T, bool>) {
      if (x > 1) return Fail(std::string(name) + " is " + std::string(f) + ", not 0 or 1");
      v = x == 1;
    } else {
      if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Fail(std::string(name) + " " + std::string(f) + " is out of range");
      }
      v = static_cast<T>(x);
    }
  }
  void Word(const char* name, std::string& w) {
    std::string_view f;
    if (NextField(name, &f)) w = std::string(f);
  }
  void Text(const char* name, std::string& t, bool may_be_empty) {
    if (!error_.empty()) return;
    std::string_view s = rest_;
    rest_ = {};
    if (!s.empty()) s.remove_prefix(1);  // the space before it
    if (s.empty() && !may_be_empty) return Fail(std::string(name) + " is missing");
    t.clear();
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        t += s[i];
        continue;
      }
      char next = i + 1 < s.size() ? s[i + 1] : '\0';
      if (next != '\\' && next != 'n') {
        return Fail(std::string(name) + " has a backslash that is not \\\\ or \\n");
      }
      t += next == 'n' ? '\n' : '\\';
      ++i;
    }
  }
  void FileName(const char* name, std::string& f) {
    Text(name, f, false);
    if (error_.empty() && (f.find('/') != std::string::npos || f == "." || f == "..")) {
      Fail(std::string(name) + " '" + f + "' is not a file name in the plugin's directory");
    }
  }

  // Ok when every field was read and nothing is left over.
  Result<void> Finish() {
    if (error_.empty() && !rest_.empty()) {
      Fail("unexpected '" + std::string(rest_.substr(1, 40)) + "' after the last field");
    }
    if (!error_.empty()) return Error(error_);
    return Ok();
  }

 private:
  // The next space-separated field, or false (and an error) when there is none.
  bool NextField(const char* name, std::string_view* f) {
    if (!error_.empty()) return false;
    if (rest_.empty()) {
      Fail(std::string(name) + " is missing");
      return false;
    }
    rest_.remove_prefix(1);  // the space before it
    size_t sp = rest_.find(' ');
    *f = rest_.substr(0, sp);
    rest_ = sp == std::string_view::npos ? std::string_view() : rest_.substr(sp);
    if (f->empty()) {
      Fail(std::string(name) + " is empty");
      return false;
    }
    return true;
  }
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::string(kind_) + ": " + std::move(why);
  }

  std::string_view kind_, rest_;
  std::string error_;
};

template <typename M>
Result<PluginMessage> ParseAs(std::string_view kind, std::string_view fields, M m = {}) {
  LineReader reader(kind, fields);
  M::Fields(m, reader);
  PTSNAP_TRY(reader.Finish());
  return PluginMessage(std::move(m));
}

}  // namespace

std::string FormatMessage(const PluginMessage& message) {
  return std::visit(
      [](const auto& m) {
        LineWriter writer(KindOf(m));
        std::decay_t<decltype(m)>::Fields(m, writer);
        return std::move(writer).Finish();
      },
      message);
}

Result<PluginMessage> ParseMessage(std::string_view line) {
  size_t sp = line.find(' ');
  std::string_view kind = line.substr(0, sp);
  std::string_view fields = sp == std::string_view::npos ? "" : line.substr(sp);
  if (kind == MmapMessage::kKind) return ParseAs<MmapMessage>(kind, fields);
  if (kind == CommMessage::kKind) return ParseAs<CommMessage>(kind, fields);
  if (kind == "fork" || kind == "exit") {
    TaskMessage t;
    t.exit = kind == "exit";
    return ParseAs(kind, fields, t);
  }
  if (kind == ItraceMessage::kKind) return ParseAs<ItraceMessage>(kind, fields);
  if (kind == StreamMessage::kKind) return ParseAs<StreamMessage>(kind, fields);
  if (kind == SlowCallMessage::kKind) return ParseAs<SlowCallMessage>(kind, fields);
  if (kind == SnapshotMessage::kKind) return ParseAs<SnapshotMessage>(kind, fields);
  if (kind == NoteMessage::kKind) return ParseAs<NoteMessage>(kind, fields);
  if (kind == DoneMessage::kKind) return ParseAs<DoneMessage>(kind, fields);
  return Error("unknown message kind '" + std::string(kind.substr(0, 40)) + "'");
}

Result<std::vector<PluginMessage>> ParseMessages(std::string_view text) {
  std::vector<PluginMessage> out;
  size_t lineno = 0;
  for (;;) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // torn tail (or the end)
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++lineno;
    auto m = ParseMessage(line);
    if (!m) {
      return Error("emulator event log line " + std::to_string(lineno) + " is malformed: '" +
                   std::string(line.substr(0, 80)) + "': " + m.error().ToString());
    }
    out.push_back(std::move(m).value());
  }
  return out;
}

std::string FormatFilterArg(const FilterRange& r) {
  return std::string(r.trace_stop ? "tracestop" : "filter") + ":" + std::to_string(r.offset) + ":" +
         std::to_string(r.size) + ":" + r.path;
}

std::string FormatFileOffsetArg(const FileOffset& f) {
  return std::to_string(f.offset) + ":" + f.path;
}

std::optional<FileOffset> ParseFileOffsetArg(std::string_view value) {
  const size_t a = value.find(':');
  if (a == std::string_view::npos || a + 1 >= value.size()) return std::nullopt;
  auto offset = base::ParseUint(value.substr(0, a));
  if (!offset) return std::nullopt;
  return FileOffset{*offset, std::string(value.substr(a + 1))};
}

std::optional<FilterRange> ParseFilterArg(std::string_view value) {
  FilterRange r;
  size_t a = value.find(':');
  if (a == std::string_view::npos) return std::nullopt;
  std::string_view action = value.substr(0, a);
  if (action != "filter" && action != "tracestop") return std::nullopt;
  r.trace_stop = action == "tracestop";
  size_t b = value.find(':', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  size_t c = value.find(':', b + 1);
  if (c == std::string_view::npos) return std::nullopt;
  auto offset = base::ParseUint(value.substr(a + 1, b - a - 1));
  auto size = base::ParseUint(value.substr(b + 1, c - b - 1));
  if (!offset || !size || *size == 0 || c + 1 >= value.size()) return std::nullopt;
  r.offset = *offset;
  r.size = *size;
  r.path = std::string(value.substr(c + 1));
  return r;
}

}  // namespace ptsnap::emulate
