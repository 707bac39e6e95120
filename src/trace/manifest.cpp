#include "trace/manifest.h"

#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <unordered_map>

#include "base/string_util.h"

namespace ptsnap::trace {
namespace {

// ordered_json keeps the documented field order in the written file.
using Json = nlohmann::ordered_json;

constexpr std::string_view kFormat = "ptsnap-trace";

// GCC and clang's 128-bit integer (__extension__: not ISO C++, -Wpedantic).
__extension__ using U128 = unsigned __int128;

std::string HexString(uint64_t v) { return base::Hex(v); }

// ---- reading -------------------------------------------------------------

Error FieldError(const std::string& path, std::string_view what) {
  return Error("field '" + path + "': " + std::string(what));
}

std::string FieldPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

Result<int32_t> ToInt32(const Json& v, const std::string& path) {
  if (!v.is_number_integer()) return FieldError(path, "expected an integer");
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return FieldError(path, "value " + std::to_string(u) + " is out of range");
    }
    return static_cast<int32_t>(u);
  }
  int64_t s = v.get<int64_t>();
  if (s < std::numeric_limits<int32_t>::min() || s > std::numeric_limits<int32_t>::max()) {
    return FieldError(path, "value " + std::to_string(s) + " is out of range");
  }
  return static_cast<int32_t>(s);
}

// A JSON object and its path from the root, for error messages.
class Obj {
 public:
  Obj(const Json& j, std::string path) : j_(j), path_(std::move(path)) {}

  // nullptr when absent (or null: treated as absent).
  [[nodiscard]] const Json* Find(std::string_view key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Result<const Json*> Require(std::string_view key) const {
    const Json* v = Find(key);
    if (v == nullptr) return FieldError(FieldPath(path_, key), "missing");
    return v;
  }

  Result<Obj> Object(std::string_view key, bool required = true) const {
    const Json* v = Find(key);
    static const Json kEmpty = Json::object();
    if (v == nullptr) {
      if (required) return FieldError(FieldPath(path_, key), "missing");
      return Obj(kEmpty, FieldPath(path_, key));
    }
    if (!v->is_object()) return FieldError(FieldPath(path_, key), "expected an object");
    return Obj(*v, FieldPath(path_, key));
  }

  // Unsigned integers: a JSON number or a hex string ("0x..."); the format
  // writes hex for values that may exceed 2^53 and accepts either.
  template <class T>
  Result<void> Uint(std::string_view key, T& out, bool required = false) const {
    static_assert(std::is_unsigned_v<T> || std::is_same_v<T, bool>);
    const Json* v = Find(key);
    std::string path = FieldPath(path_, key);
    if (v == nullptr) {
      if (required) return FieldError(path, "missing");
      return Ok();
    }
    uint64_t value = 0;
    if (v->is_number_unsigned()) {
      value = v->get<uint64_t>();
    } else if (v->is_number_integer()) {
      int64_t s = v->get<int64_t>();
      if (s < 0) return FieldError(path, "must not be negative");
      value = static_cast<uint64_t>(s);
    } else if (v->is_string()) {
      const std::string& s = v->get_ref<const std::string&>();
      auto parsed = base::StartsWith(s, "0x") || base::StartsWith(s, "0X")
                        ? base::ParseUint(std::string_view(s).substr(2), 16)
                        : std::nullopt;
      if (!parsed || s.size() <= 2) {
        return FieldError(path, "expected a hex string like \"0x1f\", got \"" + s + "\"");
      }
      value = *parsed;
    } else {
      return FieldError(path, "expected an unsigned integer");
    }
    if (value > std::numeric_limits<T>::max()) {
      return FieldError(path, "value " + std::to_string(value) + " is out of range");
    }
    out = static_cast<T>(value);
    return Ok();
  }

  Result<void> Int(std::string_view key, int32_t& out, bool required = false) const {
    const Json* v = Find(key);
    std::string path = FieldPath(path_, key);
    if (v == nullptr) {
      if (required) return FieldError(path, "missing");
      return Ok();
    }
    PTSNAP_ASSIGN_OR_RETURN(out, ToInt32(*v, path));
    return Ok();
  }

  Result<void> Bool(std::string_view key, bool& out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Ok();
    if (!v->is_boolean()) return FieldError(FieldPath(path_, key), "expected true or false");
    out = v->get<bool>();
    return Ok();
  }

  Result<void> String(std::string_view key, std::string& out, bool required = false) const {
    const Json* v = Find(key);
    std::string path = FieldPath(path_, key);
    if (v == nullptr) {
      if (required) return FieldError(path, "missing");
      return Ok();
    }
    if (!v->is_string()) return FieldError(path, "expected a string");
    out = v->get<std::string>();
    return Ok();
  }

  // A path inside the trace directory: relative and without "..", so that a
  // manifest cannot make a reader open files elsewhere.
  Result<void> RelativePath(std::string_view key, std::string& out, bool required = false) const {
    PTSNAP_TRY(String(key, out, required));
    if (out.empty()) return Ok();
    if (out.front() == '/') {
      return FieldError(FieldPath(path_, key), "must be a path inside the trace directory");
    }
    for (std::string_view part : base::Split(out, '/')) {
      if (part == "..") {
        return FieldError(FieldPath(path_, key), "must be a path inside the trace directory");
      }
    }
    return Ok();
  }

  // Calls fn(Obj element) or fn(const Json&, path) for each array element.
  template <class Fn>
  Result<void> Array(std::string_view key, Fn fn, bool required = false) const {
    const Json* v = Find(key);
    std::string path = FieldPath(path_, key);
    if (v == nullptr) {
      if (required) return FieldError(path, "missing");
      return Ok();
    }
    if (!v->is_array()) return FieldError(path, "expected an array");
    for (size_t i = 0; i < v->size(); ++i) {
      PTSNAP_TRY(fn((*v)[i], path + "[" + std::to_string(i) + "]"));
    }
    return Ok();
  }

  template <class E, size_t N>
  Result<void> Enum(std::string_view key, E& out, const E (&values)[N], bool required) const {
    std::string s;
    PTSNAP_TRY(String(key, s, required));
    if (s.empty() && !required) return Ok();
    for (E e : values) {
      if (ToString(e) == s) {
        out = e;
        return Ok();
      }
    }
    std::string expected;
    for (E e : values) {
      if (!expected.empty()) expected += ", ";
      expected += "\"" + std::string(ToString(e)) + "\"";
    }
    return FieldError(FieldPath(path_, key),
                      "unknown value \"" + s + "\" (expected " + expected + ")");
  }

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  const Json& j_;
  std::string path_;
};

Result<Obj> AsObject(const Json& j, const std::string& path) {
  if (!j.is_object()) return FieldError(path, "expected an object");
  return Obj(j, path);
}

constexpr Source kSources[] = {Source::kHardware, Source::kEmulated, Source::kSampled};
constexpr StreamKind kStreamKinds[] = {StreamKind::kPt, StreamKind::kSamples};
constexpr State kStates[] = {State::kRecording, State::kComplete, State::kInterrupted};
constexpr Scope kScopes[] = {Scope::kUser, Scope::kKernel, Scope::kUserKernel};
constexpr Mode kModes[] = {Mode::kSnapshot, Mode::kFull};
constexpr VirtualClock kVirtualClocks[] = {VirtualClock::kInstructions,
                                           VirtualClock::kInstructionsAndWaits};
constexpr SnapshotReason kSnapshotReasons[] = {
    SnapshotReason::kExit,   SnapshotReason::kTrigger,  SnapshotReason::kStopIndicator,
    SnapshotReason::kSignal, SnapshotReason::kCtrlC,    SnapshotReason::kDuration,
    SnapshotReason::kFull,   SnapshotReason::kSlowCall, SnapshotReason::kFatalSignal};
constexpr KcoreStatus kKcoreStatuses[] = {KcoreStatus::kNotNeeded, KcoreStatus::kCopied,
                                          KcoreStatus::kDisabled, KcoreStatus::kUnavailable};

// One element of `snapshots` (manifest.json or a journal line).
Result<Snapshot> ParseSnapshot(const Json& e, const std::string& path) {
  PTSNAP_ASSIGN_OR_RETURN(Obj o, AsObject(e, path));
  Snapshot s;
  PTSNAP_TRY(o.Uint("seq", s.seq, true));
  PTSNAP_TRY(o.Enum("reason", s.reason, kSnapshotReasons, false));
  PTSNAP_TRY(o.String("detail", s.detail));
  PTSNAP_TRY(o.Uint("time", s.time));
  PTSNAP_TRY(o.Uint("tid", s.tid));
  PTSNAP_TRY(o.Uint("call_begin", s.call_begin));
  PTSNAP_TRY(o.Uint("call_ns", s.call_ns));
  return s;
}

// One element of `streams` (manifest.json or a journal line).
Result<Stream> ParseStream(const Json& e, const std::string& path) {
  PTSNAP_ASSIGN_OR_RETURN(Obj o, AsObject(e, path));
  Stream s;
  PTSNAP_TRY(o.Uint("id", s.id, true));
  PTSNAP_TRY(o.Enum("kind", s.kind, kStreamKinds, false));
  PTSNAP_TRY(o.RelativePath("file", s.file, true));
  if (s.file.empty()) return FieldError(path + ".file", "must name a file");
  PTSNAP_TRY(o.Int("pid", s.pid));
  PTSNAP_TRY(o.Int("tid", s.tid));
  PTSNAP_TRY(o.Int("cpu", s.cpu));
  PTSNAP_TRY(o.Uint("snapshot", s.snapshot));
  PTSNAP_TRY(o.Uint("size", s.size, true));
  PTSNAP_TRY(o.Bool("wrapped", s.wrapped));
  PTSNAP_TRY(o.Uint("lost_bytes", s.lost_bytes));
  PTSNAP_TRY(o.Uint("truncated", s.truncated));
  if (o.Find("follows") != nullptr) {
    uint32_t follows = 0;
    PTSNAP_TRY(o.Uint("follows", follows));
    s.follows = follows;
    PTSNAP_TRY(o.Uint("ring_bytes", s.ring_bytes, true));
    if (s.ring_bytes < s.size) {
      return FieldError(path + ".ring_bytes", "value " + std::to_string(s.ring_bytes) +
                                                  " is less than the stream's size " +
                                                  std::to_string(s.size));
    }
  } else if (o.Find("ring_bytes") != nullptr) {
    return FieldError(path + ".ring_bytes", "only a stream that follows another has it");
  }
  return s;
}

// The listed streams by id and by file, so that adding one is checked in
// constant time (a soak lists thousands).
class StreamIndex {
 public:
  StreamIndex() = default;
  explicit StreamIndex(const Manifest& m) {
    for (size_t k = 0; k < m.streams.size(); ++k) {
      ids_.emplace(m.streams[k].id, k);
      files_.emplace(m.streams[k].file, k);
    }
  }

  // Appends `s` to m.streams. Two entries for one id or one file would
  // decode the same bytes twice (or let a hand-made manifest alias
  // streams): refused. A stream that follows another must name one listed
  // before it (so a chain always ends, at a stream without `follows`) of
  // the same ring.
  Result<void> Add(Manifest& m, Stream s, const std::string& path) {
    const size_t k = m.streams.size();
    if (auto it = ids_.find(s.id); it != ids_.end()) {
      return FieldError(path + ".id", "duplicate stream id " + std::to_string(s.id) + " (streams[" +
                                          std::to_string(it->second) + "] has it)");
    }
    if (auto it = files_.find(s.file); it != files_.end()) {
      return FieldError(path + ".file", "file " + s.file + " is listed twice (streams[" +
                                            std::to_string(it->second) + "] has it)");
    }
    if (s.follows) {
      const std::string id = std::to_string(*s.follows);
      auto it = ids_.find(*s.follows);
      if (it == ids_.end())
        return FieldError(path + ".follows", "no stream " + id + " is listed before it");
      const Stream& before = m.streams[it->second];
      if (before.pid != s.pid || before.tid != s.tid || before.cpu != s.cpu ||
          before.kind != s.kind) {
        return FieldError(path + ".follows", "stream " + id +
                                                 " is of another ring (its pid, tid, cpu or "
                                                 "kind differs)");
      }
    }
    ids_.emplace(s.id, k);
    files_.emplace(s.file, k);
    m.streams.push_back(std::move(s));
    return Ok();
  }

  // The index in m.streams of stream `id`, if listed.
  [[nodiscard]] std::optional<size_t> Find(uint32_t id) const {
    auto it = ids_.find(id);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::unordered_map<uint32_t, size_t> ids_;
  std::unordered_map<std::string, size_t> files_;
};

Result<Manifest> ParseTree(const Json& root) {
  Manifest m;
  if (!root.is_object()) return Error("not a JSON object");
  Obj r(root, "");
  std::string format;
  PTSNAP_TRY(r.String("format", format, /*required=*/true));
  if (format != kFormat) {
    return Error("not a ptsnap trace manifest (format is \"" + format + "\", expected \"" +
                 std::string(kFormat) + "\")");
  }
  PTSNAP_ASSIGN_OR_RETURN(const Json* version, r.Require("version"));
  if (!version->is_number_integer()) return FieldError("version", "expected an integer");
  if (!version->is_number_unsigned() || version->get<uint64_t>() < kManifestVersion ||
      version->get<uint64_t>() > kManifestVersionFollows) {
    std::string v = version->is_number_unsigned() ? std::to_string(version->get<uint64_t>())
                                                  : std::to_string(version->get<int64_t>());
    return Error("unsupported version " + v + " (this ptsnap reads " +
                 std::to_string(kManifestVersion) + " and " +
                 std::to_string(kManifestVersionFollows) + ")");
  }
  m.version = static_cast<int>(version->get<uint64_t>());

  PTSNAP_TRY(r.Enum("source", m.source, kSources, true));
  PTSNAP_TRY(r.Enum("state", m.state, kStates, true));
  PTSNAP_TRY(r.String("stop_error", m.stop_error));
  PTSNAP_TRY(r.String("ptsnap_version", m.ptsnap_version));
  PTSNAP_TRY(r.Uint("created_unix_ns", m.created_unix_ns));
  PTSNAP_TRY(r.Array("command", [&](const Json& e, const std::string& path) -> Result<void> {
    if (!e.is_string()) return FieldError(path, "expected a string");
    m.command.push_back(e.get<std::string>());
    return Ok();
  }));
  PTSNAP_TRY(r.Array("pids", [&](const Json& e, const std::string& path) -> Result<void> {
    PTSNAP_ASSIGN_OR_RETURN(int32_t pid, ToInt32(e, path));
    m.pids.push_back(pid);
    return Ok();
  }));

  PTSNAP_ASSIGN_OR_RETURN(Obj kernel, r.Object("kernel", false));
  PTSNAP_TRY(kernel.String("release", m.kernel_release));
  if (kernel.Find("start") != nullptr) {
    uint64_t start = 0;
    PTSNAP_TRY(kernel.Uint("start", start));
    m.kernel_start = start;
  }

  PTSNAP_ASSIGN_OR_RETURN(Obj cpu, r.Object("cpu"));
  PTSNAP_TRY(cpu.String("vendor", m.cpu.vendor));
  PTSNAP_TRY(cpu.Uint("family", m.cpu.family));
  PTSNAP_TRY(cpu.Uint("model", m.cpu.model));
  PTSNAP_TRY(cpu.Uint("stepping", m.cpu.stepping));
  PTSNAP_TRY(cpu.Uint("cpuid_15_eax", m.cpu.cpuid_15_eax));
  PTSNAP_TRY(cpu.Uint("cpuid_15_ebx", m.cpu.cpuid_15_ebx));

  PTSNAP_ASSIGN_OR_RETURN(Obj pt, r.Object("pt"));
  PTSNAP_TRY(pt.Uint("pmu_type", m.pt.pmu_type));
  PTSNAP_TRY(pt.Uint("config", m.pt.config));
  PTSNAP_TRY(pt.Uint("mtc_freq", m.pt.mtc_freq));
  PTSNAP_TRY(pt.Uint("nom_freq", m.pt.nom_freq));
  PTSNAP_TRY(pt.Uint("psb_period", m.pt.psb_period));
  PTSNAP_TRY(pt.Bool("tsc", m.pt.tsc));
  PTSNAP_TRY(pt.Bool("mtc", m.pt.mtc));
  PTSNAP_TRY(pt.Bool("cyc", m.pt.cyc));
  PTSNAP_TRY(pt.Bool("noretcomp", m.pt.noretcomp));
  PTSNAP_TRY(pt.String("filter", m.pt.filter));
  PTSNAP_TRY(pt.Uint("addr0_a", m.pt.addr0_a));
  PTSNAP_TRY(pt.Uint("addr0_b", m.pt.addr0_b));

  PTSNAP_TRY(r.Enum("scope", m.scope, kScopes, true));
  PTSNAP_TRY(r.Enum("mode", m.mode, kModes, true));
  PTSNAP_TRY(r.Uint("snapshot_size", m.snapshot_size));

  PTSNAP_ASSIGN_OR_RETURN(Obj tc, r.Object("time_conv"));
  PTSNAP_TRY(tc.Uint("time_zero", m.time_conv.time_zero));
  PTSNAP_TRY(tc.Uint("time_mult", m.time_conv.time_mult));
  PTSNAP_TRY(tc.Uint("time_shift", m.time_conv.time_shift));
  if (m.time_conv.time_shift > 63) {
    return FieldError("time_conv.time_shift",
                      "value " + std::to_string(m.time_conv.time_shift) + " is out of range");
  }
  PTSNAP_TRY(tc.Bool("cap_user_time_zero", m.time_conv.cap_user_time_zero));

  PTSNAP_TRY(r.RelativePath("sideband", m.sideband));
  if (m.sideband.empty()) return FieldError("sideband", "must name a file");

  PTSNAP_TRY(r.Array(
      "snapshots",
      [&](const Json& e, const std::string& path) -> Result<void> {
        PTSNAP_ASSIGN_OR_RETURN(Snapshot s, ParseSnapshot(e, path));
        m.snapshots.push_back(std::move(s));
        return Ok();
      },
      true));
  StreamIndex index;
  PTSNAP_TRY(r.Array(
      "streams",
      [&](const Json& e, const std::string& path) -> Result<void> {
        PTSNAP_ASSIGN_OR_RETURN(Stream s, ParseStream(e, path));
        return index.Add(m, std::move(s), path);
      },
      true));
  PTSNAP_TRY(r.Uint("lost_records", m.lost_records));
  PTSNAP_TRY(r.Uint("aux_truncated", m.aux_truncated));

  PTSNAP_ASSIGN_OR_RETURN(Obj kcore, r.Object("kcore", false));
  PTSNAP_TRY(kcore.Enum("status", m.kcore.status, kKcoreStatuses, false));
  PTSNAP_TRY(kcore.String("reason", m.kcore.reason));
  PTSNAP_TRY(kcore.RelativePath("dir", m.kcore.dir));

  PTSNAP_TRY(r.Array("binaries", [&](const Json& e, const std::string& path) -> Result<void> {
    PTSNAP_ASSIGN_OR_RETURN(Obj o, AsObject(e, path));
    Binary b;
    PTSNAP_TRY(o.String("path", b.path, true));
    PTSNAP_TRY(o.String("build_id", b.build_id));
    PTSNAP_TRY(o.RelativePath("copy", b.copy));
    m.binaries.push_back(std::move(b));
    return Ok();
  }));
  PTSNAP_TRY(r.String("emulator", m.emulator));
  if (r.Find("virtual_clock") != nullptr && m.source != Source::kEmulated)
    return FieldError("virtual_clock", "only an emulated trace (source \"emulated\") has one");
  PTSNAP_TRY(r.Enum("virtual_clock", m.virtual_clock, kVirtualClocks, false));
  if (r.Find("sampling") != nullptr) {
    PTSNAP_ASSIGN_OR_RETURN(Obj sa, r.Object("sampling"));
    Sampling s;
    PTSNAP_TRY(sa.String("event", s.event));
    PTSNAP_TRY(sa.Uint("type", s.type));
    PTSNAP_TRY(sa.Uint("config", s.config));
    PTSNAP_TRY(sa.Uint("sample_type", s.sample_type, true));
    PTSNAP_TRY(sa.Uint("frequency", s.frequency));
    PTSNAP_TRY(sa.Uint("period", s.period));
    PTSNAP_TRY(sa.String("callgraph", s.callgraph));
    PTSNAP_TRY(sa.Uint("regs_user", s.regs_user));
    PTSNAP_TRY(sa.Uint("stack_user", s.stack_user));
    PTSNAP_TRY(sa.Uint("max_stack", s.max_stack));
    m.sampling = std::move(s);
  }
  if (m.source == Source::kSampled && !m.sampling)
    return FieldError("sampling", "missing (source is \"sampled\")");
  PTSNAP_TRY(r.Uint("journal_seq", m.journal_seq));
  return m;
}

}  // namespace

std::string_view ToString(Source v) {
  switch (v) {
    case Source::kHardware: return "hardware";
    case Source::kEmulated: return "emulated";
    case Source::kSampled: return "sampled";
  }
  return "?";
}

std::string_view ToString(StreamKind v) {
  switch (v) {
    case StreamKind::kPt: return "pt";
    case StreamKind::kSamples: return "samples";
  }
  return "?";
}

std::string_view ToString(Scope v) {
  switch (v) {
    case Scope::kUser: return "user";
    case Scope::kKernel: return "kernel";
    case Scope::kUserKernel: return "user+kernel";
  }
  return "?";
}

std::string_view ToString(Mode v) {
  switch (v) {
    case Mode::kSnapshot: return "snapshot";
    case Mode::kFull: return "full";
  }
  return "?";
}

std::string_view ToString(VirtualClock v) {
  switch (v) {
    case VirtualClock::kInstructions: return "instructions";
    case VirtualClock::kInstructionsAndWaits: return "instructions+waits";
  }
  return "?";
}

std::string_view ToString(SnapshotReason v) {
  switch (v) {
    case SnapshotReason::kExit: return "exit";
    case SnapshotReason::kTrigger: return "trigger";
    case SnapshotReason::kStopIndicator: return "stop-indicator";
    case SnapshotReason::kSignal: return "signal";
    case SnapshotReason::kCtrlC: return "ctrl-c";
    case SnapshotReason::kDuration: return "duration";
    case SnapshotReason::kFull: return "full";
    case SnapshotReason::kSlowCall: return "slow-call";
    case SnapshotReason::kFatalSignal: return "fatal-signal";
  }
  return "?";
}

std::optional<SnapshotReason> SnapshotReasonFrom(std::string_view s) {
  for (SnapshotReason r : kSnapshotReasons) {
    if (ToString(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view ToString(KcoreStatus v) {
  switch (v) {
    case KcoreStatus::kNotNeeded: return "not-needed";
    case KcoreStatus::kCopied: return "copied";
    case KcoreStatus::kDisabled: return "disabled";
    case KcoreStatus::kUnavailable: return "unavailable";
  }
  return "?";
}

std::string_view ToString(State v) {
  switch (v) {
    case State::kRecording: return "recording";
    case State::kComplete: return "complete";
    case State::kInterrupted: return "interrupted";
  }
  return "?";
}

// perf_event_mmap_page documents the TSC -> perf time conversion as
//   quot = tsc >> shift; rem = tsc & ((1 << shift) - 1);
//   ns = time_zero + quot * mult + ((rem * mult) >> shift)
// which is exactly time_zero + floor(tsc * mult / 2^shift) (mod 2^64); the
// 128-bit product computes that without the intermediate overflow.
uint64_t TscToPerfTime(const TimeConv& tc, uint64_t tsc) {
  if (tc.time_shift >= 128) return tc.time_zero;
  U128 prod = static_cast<U128>(tsc) * tc.time_mult;
  return tc.time_zero + static_cast<uint64_t>(prod >> tc.time_shift);
}

// The inverse: the smallest tsc whose perf time is >= ns, so that
// TscToPerfTime(PerfTimeToTsc(ns)) == ns whenever a TSC tick is at most 1 ns
// (mult <= 2^shift, any TSC above 1 GHz), and within one tick otherwise.
uint64_t PerfTimeToTsc(const TimeConv& tc, uint64_t ns) {
  if (tc.time_mult == 0 || tc.time_shift >= 64) return 0;
  uint64_t delta = ns - tc.time_zero;  // wraps like the forward conversion
  U128 scaled = static_cast<U128>(delta) << tc.time_shift;
  U128 tsc = (scaled + tc.time_mult - 1) / tc.time_mult;
  if (tsc > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(tsc);
}

namespace {

Json SnapshotJson(const Snapshot& s) {
  Json j_snap = {{"seq", s.seq},
                 {"reason", ToString(s.reason)},
                 {"detail", s.detail},
                 {"time", s.time},
                 {"tid", s.tid}};
  // Only slow-call snapshots have them (older readers ignore them).
  if (s.call_ns != 0 || s.call_begin != 0) {
    j_snap["call_begin"] = s.call_begin;
    j_snap["call_ns"] = s.call_ns;
  }
  return j_snap;
}

Json StreamJson(const Stream& s) {
  Json j = {{"id", s.id},
            {"kind", ToString(s.kind)},
            {"file", s.file},
            {"pid", s.pid},
            {"tid", s.tid},
            {"cpu", s.cpu},
            {"snapshot", s.snapshot},
            {"size", s.size},
            {"wrapped", s.wrapped},
            {"lost_bytes", s.lost_bytes},
            {"truncated", s.truncated}};
  // Only streams stored as a continuation have them.
  if (s.follows) {
    j["follows"] = *s.follows;
    j["ring_bytes"] = s.ring_bytes;
  }
  return j;
}

// The manifest as JSON; without `snapshots`, `streams` and `journal_seq`
// unless `lists`.
Json ToJson(const Manifest& m, bool lists) {
  Json j;
  j["format"] = kFormat;
  j["version"] = m.version;
  j["source"] = ToString(m.source);
  j["state"] = ToString(m.state);
  if (!m.stop_error.empty()) j["stop_error"] = m.stop_error;
  j["ptsnap_version"] = m.ptsnap_version;
  j["created_unix_ns"] = m.created_unix_ns;
  j["command"] = m.command;
  j["pids"] = m.pids;
  j["kernel"] = {{"release", m.kernel_release},
                 {"start", m.kernel_start ? Json(HexString(*m.kernel_start)) : Json(nullptr)}};
  j["cpu"] = {{"vendor", m.cpu.vendor},
              {"family", m.cpu.family},
              {"model", m.cpu.model},
              {"stepping", m.cpu.stepping},
              {"cpuid_15_eax", m.cpu.cpuid_15_eax},
              {"cpuid_15_ebx", m.cpu.cpuid_15_ebx}};
  j["pt"] = {{"pmu_type", m.pt.pmu_type},
             {"config", HexString(m.pt.config)},
             {"mtc_freq", m.pt.mtc_freq},
             {"nom_freq", m.pt.nom_freq},
             {"psb_period", m.pt.psb_period},
             {"tsc", m.pt.tsc},
             {"mtc", m.pt.mtc},
             {"cyc", m.pt.cyc},
             {"noretcomp", m.pt.noretcomp},
             {"filter", m.pt.filter},
             {"addr0_a", HexString(m.pt.addr0_a)},
             {"addr0_b", HexString(m.pt.addr0_b)}};
  j["scope"] = ToString(m.scope);
  j["mode"] = ToString(m.mode);
  j["snapshot_size"] = m.snapshot_size;
  j["time_conv"] = {{"time_zero", HexString(m.time_conv.time_zero)},
                    {"time_mult", m.time_conv.time_mult},
                    {"time_shift", m.time_conv.time_shift},
                    {"cap_user_time_zero", m.time_conv.cap_user_time_zero}};
  j["sideband"] = m.sideband;
  if (lists) {
    // Placeholders: SerializeManifest writes the elements into the text.
    j["snapshots"] = Json::array();
    j["streams"] = Json::array();
  }
  j["lost_records"] = m.lost_records;
  j["aux_truncated"] = m.aux_truncated;
  j["kcore"] = {
      {"status", ToString(m.kcore.status)}, {"reason", m.kcore.reason}, {"dir", m.kcore.dir}};
  Json binaries = Json::array();
  for (const Binary& b : m.binaries) {
    binaries.push_back({{"path", b.path}, {"build_id", b.build_id}, {"copy", b.copy}});
  }
  j["binaries"] = std::move(binaries);
  j["emulator"] = m.emulator;
  if (m.source == Source::kEmulated) j["virtual_clock"] = ToString(m.virtual_clock);
  if (m.sampling) {
    const Sampling& sa = *m.sampling;
    j["sampling"] = {{"event", sa.event},
                     {"type", sa.type},
                     {"config", HexString(sa.config)},
                     {"sample_type", HexString(sa.sample_type)},
                     {"frequency", sa.frequency},
                     {"period", sa.period},
                     {"callgraph", sa.callgraph},
                     {"regs_user", HexString(sa.regs_user)},
                     {"stack_user", sa.stack_user},
                     {"max_stack", sa.max_stack}};
  } else {
    j["sampling"] = nullptr;
  }
  if (lists) j["journal_seq"] = m.journal_seq;
  return j;
}

// Paths and argv need not be UTF-8; replace invalid bytes instead of
// throwing (JSON strings must be UTF-8).
std::string Dump(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

constexpr std::string_view kSnapshotsPlaceholder = "\n  \"snapshots\": []";
constexpr std::string_view kStreamsPlaceholder = "\n  \"streams\": []";

// An element's object as it stands in the file: dumped with indent 2, each
// line after the first indented 4 more (the list's).
std::string ElementBody(const Json& j) {
  const std::string one = Dump(j, 2);
  std::string body;
  body.reserve(one.size() + one.size() / 8);
  for (char c : one) {
    body += c;
    if (c == '\n') body += "    ";
  }
  return body;
}

}  // namespace

ManifestFrame SerializeManifestFrame(const Manifest& m) {
  const std::string text = Dump(ToJson(m, true), 2) + "\n";
  // The placeholders are written once each: the top-level keys, at indent 2
  // (no string holds a raw newline).
  const size_t snaps = text.find(kSnapshotsPlaceholder);
  const size_t streams = text.find(kStreamsPlaceholder, snaps);
  const size_t snaps_open = snaps + kSnapshotsPlaceholder.size() - 1;  // at ']'
  const size_t streams_open = streams + kStreamsPlaceholder.size() - 1;
  return {.head = text.substr(0, snaps_open),
          .middle = text.substr(snaps_open + 1, streams_open - snaps_open - 1),
          .tail = text.substr(streams_open + 1)};
}

std::string ManifestElementSeparator(bool first) { return first ? "\n    " : ",\n    "; }

std::string SerializeManifestElement(const Snapshot& s, bool first) {
  return ManifestElementSeparator(first) + ElementBody(SnapshotJson(s));
}

std::string SerializeManifestElement(const Stream& s, bool first) {
  return ManifestElementSeparator(first) + ElementBody(StreamJson(s));
}

std::string_view ManifestListEnd(bool empty) { return empty ? "]" : "\n  ]"; }

// The lists are most of a long recording's manifest (17,000 streams after 10
// minutes of snapshots every 100 ms): their elements are dumped one at a
// time into the text, never held as one JSON tree of everything (a tree is
// several times the text). The text is what dumping the whole tree with
// indent 2 gives.
std::string SerializeManifest(const Manifest& m) {
  const ManifestFrame frame = SerializeManifestFrame(m);
  std::string text = frame.head;
  for (size_t k = 0; k < m.snapshots.size(); ++k)
    text += SerializeManifestElement(m.snapshots[k], k == 0);
  text += ManifestListEnd(m.snapshots.empty());
  text += frame.middle;
  for (size_t k = 0; k < m.streams.size(); ++k)
    text += SerializeManifestElement(m.streams[k], k == 0);
  text += ManifestListEnd(m.streams.empty());
  text += frame.tail;
  return text;
}

ManifestFields SerializeManifestFields(const Manifest& m) {
  ManifestFields fields;
  const Json j = ToJson(m, false);
  for (const auto& [key, value] : j.items()) fields.emplace_back(key, Dump(value, -1));
  return fields;
}

std::string SerializeManifestChange(const ManifestChange& c) {
  Json j;
  j["seq"] = c.seq;
  if (!c.snapshots.empty()) {
    Json snapshots = Json::array();
    for (const Snapshot& s : c.snapshots) snapshots.push_back(SnapshotJson(s));
    j["snapshots"] = std::move(snapshots);
  }
  if (!c.streams.empty()) {
    Json streams = Json::array();
    for (const Stream& s : c.streams) streams.push_back(StreamJson(s));
    j["streams"] = std::move(streams);
  }
  if (!c.sizes.empty()) {
    Json sizes = Json::array();
    for (const StreamSize& s : c.sizes) {
      sizes.push_back({{"id", s.id},
                       {"size", s.size},
                       {"lost_bytes", s.lost_bytes},
                       {"truncated", s.truncated}});
    }
    j["sizes"] = std::move(sizes);
  }
  if (!c.set.empty()) {
    Json set = Json::object();
    for (const auto& [key, value] : c.set) {
      Json v = Json::parse(value, nullptr, /*allow_exceptions=*/false);
      set[key] = v.is_discarded() ? Json(nullptr) : std::move(v);
    }
    j["set"] = std::move(set);
  }
  return Dump(j, -1) + "\n";
}

Result<Manifest> ParseManifest(std::string_view json) {
  try {
    Json root = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/true,
                            /*ignore_comments=*/false);
    return ParseTree(root);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    return Error("not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  } catch (const std::exception& e) {
    return Error(std::string("unreadable: ") + e.what());
  }
}

Result<Stream> ParseManifestStream(std::string_view json) {
  Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error("stream: not valid JSON");
  try {
    return ParseStream(j, "streams[]");
  } catch (const std::exception& e) {
    return Error(std::string("unreadable: ") + e.what());
  }
}

namespace {

// A journal line's `snapshots` and `streams`, each element checked as in
// manifest.json (the ids and files against each other are not).
Result<void> ParseChangeLists(const Obj& line, ManifestChange& c) {
  PTSNAP_TRY(line.Array("snapshots", [&](const Json& e, const std::string& path) -> Result<void> {
    PTSNAP_ASSIGN_OR_RETURN(Snapshot s, ParseSnapshot(e, path));
    c.snapshots.push_back(std::move(s));
    return Ok();
  }));
  return line.Array("streams", [&](const Json& e, const std::string& path) -> Result<void> {
    PTSNAP_ASSIGN_OR_RETURN(Stream s, ParseStream(e, path));
    c.streams.push_back(std::move(s));
    return Ok();
  });
}

}  // namespace

Result<ManifestChange> ParseManifestChange(std::string_view line) {
  Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error("not valid JSON");
  if (!j.is_object()) return Error("not a JSON object");
  try {
    Obj o(j, "");
    ManifestChange c;
    PTSNAP_TRY(o.Uint("seq", c.seq, true));
    PTSNAP_TRY(ParseChangeLists(o, c));
    PTSNAP_TRY(o.Array("sizes", [&](const Json& e, const std::string& path) -> Result<void> {
      PTSNAP_ASSIGN_OR_RETURN(Obj so, AsObject(e, path));
      StreamSize size;
      PTSNAP_TRY(so.Uint("id", size.id, true));
      PTSNAP_TRY(so.Uint("size", size.size, true));
      PTSNAP_TRY(so.Uint("lost_bytes", size.lost_bytes));
      PTSNAP_TRY(so.Uint("truncated", size.truncated));
      c.sizes.push_back(size);
      return Ok();
    }));
    if (const Json* set = o.Find("set"); set != nullptr) {
      if (!set->is_object()) return FieldError("set", "expected an object");
      for (const auto& [key, value] : set->items()) c.set.emplace_back(key, Dump(value, -1));
    }
    return c;
  } catch (const std::exception& e) {
    return Error(std::string("unreadable: ") + e.what());
  }
}

namespace {

// The keys a journal line's `set` may not hold: the lists change by their
// own entries, journal_seq by the lines' seq.
bool ListKey(std::string_view key) {
  return key == "snapshots" || key == "streams" || key == "journal_seq";
}

// Applies one parsed journal line (its seq already checked).
Result<void> ApplyChange(Manifest& m, StreamIndex& index, const Obj& line) {
  ManifestChange c;
  PTSNAP_TRY(ParseChangeLists(line, c));
  for (Snapshot& s : c.snapshots) m.snapshots.push_back(std::move(s));
  for (size_t i = 0; i < c.streams.size(); ++i)
    PTSNAP_TRY(index.Add(m, std::move(c.streams[i]),
                         FieldPath(line.path(), "streams") + "[" + std::to_string(i) + "]"));
  PTSNAP_TRY(line.Array("sizes", [&](const Json& e, const std::string& path) -> Result<void> {
    PTSNAP_ASSIGN_OR_RETURN(Obj o, AsObject(e, path));
    uint32_t id = 0;
    PTSNAP_TRY(o.Uint("id", id, true));
    std::optional<size_t> k = index.Find(id);
    if (!k) return FieldError(path + ".id", "no stream " + std::to_string(id) + " is listed");
    Stream& s = m.streams[*k];
    PTSNAP_TRY(o.Uint("size", s.size, true));
    PTSNAP_TRY(o.Uint("lost_bytes", s.lost_bytes));
    PTSNAP_TRY(o.Uint("truncated", s.truncated));
    return Ok();
  }));
  if (line.Find("set") == nullptr) return Ok();
  PTSNAP_ASSIGN_OR_RETURN(Obj set, line.Object("set"));
  // The fields are checked as a whole manifest's: the current ones with
  // these replaced, parsed by ParseTree (without the lists, which it would
  // copy).
  // Through text, so that every value has the type a manifest file's has.
  Json fields = Json::parse(Dump(ToJson(m, false), -1));
  for (const auto& [key, value] : line.Find("set")->items()) {
    if (ListKey(key)) return FieldError(FieldPath(set.path(), key), "cannot be set");
    fields[key] = value;
  }
  fields["snapshots"] = Json::array();
  fields["streams"] = Json::array();
  auto parsed = ParseTree(fields);
  if (!parsed) return std::move(parsed).error().AddContext("set");
  parsed->snapshots = std::move(m.snapshots);
  parsed->streams = std::move(m.streams);
  parsed->journal_seq = m.journal_seq;
  m = std::move(*parsed);
  return Ok();
}

Result<void> ReplayJournal(Manifest& m, std::string_view text) {
  StreamIndex index(m);
  const uint64_t base = m.journal_seq;
  size_t pos = 0;
  for (size_t line_no = 1; pos < text.size(); ++line_no) {
    const size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) break;  // torn: the newline never came
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::string where = "line " + std::to_string(line_no);
    Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (pos == text.size()) break;  // torn: the last line, cut short
      return Error(where + ": not valid JSON (and not the last line, which a crash may tear)");
    }
    if (!j.is_object()) return Error(where + ": not a JSON object");
    Obj o(j, "");
    uint64_t seq = 0;
    if (auto r = o.Uint("seq", seq, true); !r) return std::move(r).error().AddContext(where);
    if (seq <= m.journal_seq) {
      // Already in manifest.json: a compaction stopped before it emptied
      // the journal.
      if (m.journal_seq == base) continue;
      return Error(where + ": seq " + std::to_string(seq) + " does not follow " +
                   std::to_string(m.journal_seq));
    }
    if (seq != m.journal_seq + 1) {
      return Error(where + ": seq " + std::to_string(seq) + " does not follow " +
                   std::to_string(m.journal_seq) + " (a line is missing)");
    }
    if (auto r = ApplyChange(m, index, o); !r) return std::move(r).error().AddContext(where);
    m.journal_seq = seq;
  }
  return Ok();
}

}  // namespace

Result<void> ApplyJournal(Manifest& m, std::string_view text) {
  try {
    return ReplayJournal(m, text);
  } catch (const std::exception& e) {
    return Error(std::string("unreadable: ") + e.what());
  }
}

std::string ClockName(Source source, VirtualClock how) {
  if (source == Source::kEmulated)
    return how == VirtualClock::kInstructionsAndWaits
               ? "virtual clock: 1 ns per instruction plus wall time blocked in syscalls"
               : "virtual clock: 1 ns per instruction, no sleep or I/O time";
  return source == Source::kSampled ? "sampled: perf-clock ns, each edge within one sampling period"
                                    : "perf-clock ns from the CPU's timestamp counter";
}

}  // namespace ptsnap::trace
