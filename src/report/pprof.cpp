#include "report/pprof.h"

#include <map>

namespace ptsnap::report {

namespace {

// Protobuf wire format (protobuf.dev/programming-guides/encoding): a key
// is varint(field << 3 | wire type); type 0 is a varint, type 2 a varint
// length then that many bytes (strings, sub-messages, packed repeated
// scalars). proto3 leaves fields at their default (0, "") out.
class ProtoWriter {
 public:
  void Varint(uint32_t field, uint64_t v) {
    if (v == 0) return;
    Key(field, 0);
    Raw(v);
  }
  void Bytes(uint32_t field, std::string_view b) {
    Key(field, 2);
    Raw(b.size());
    out_.append(b);
  }
  // A repeated string: written even when empty (string_table[0] is "").
  void String(uint32_t field, std::string_view s) { Bytes(field, s); }
  void Message(uint32_t field, const ProtoWriter& m) { Bytes(field, m.out_); }
  void Packed(uint32_t field, const std::vector<uint64_t>& values) {
    ProtoWriter p;
    for (uint64_t v : values) p.Raw(v);
    Bytes(field, p.out_);
  }
  [[nodiscard]] const std::string& bytes() const { return out_; }

 private:
  void Key(uint32_t field, uint32_t type) { Raw((uint64_t{field} << 3) | type); }
  void Raw(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

// profile.proto field numbers.
enum : uint32_t {
  kProfileSampleType = 1,
  kProfileSample = 2,
  kProfileLocation = 4,
  kProfileFunction = 5,
  kProfileStringTable = 6,
  kProfileDurationNanos = 10,
  kProfilePeriodType = 11,
  kProfilePeriod = 12,
  kProfileDefaultSampleType = 14,
  kValueTypeType = 1,
  kValueTypeUnit = 2,
  kSampleLocationId = 1,
  kSampleValue = 2,
  kLocationId = 1,
  kLocationLine = 4,
  kLineFunctionId = 1,
  kFunctionId = 1,
  kFunctionName = 2,
  kFunctionSystemName = 3,
};

bool EndsWith(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

}  // namespace

std::string EncodePprof(const std::vector<StackSample>& stacks, uint64_t duration_ns) {
  std::vector<std::string_view> strings{""};
  std::map<std::string_view, uint64_t> string_ids{{"", 0}};
  auto str = [&](std::string_view s) -> uint64_t {
    auto [it, added] = string_ids.emplace(s, strings.size());
    if (added) strings.push_back(s);
    return it->second;
  };
  // Function and Location ids are the same: 1, 2, ... in order of first use.
  std::map<std::string_view, uint64_t> function_ids;
  std::vector<std::string_view> functions;
  auto function = [&](std::string_view name) -> uint64_t {
    auto [it, added] = function_ids.emplace(name, functions.size() + 1);
    if (added) functions.push_back(name);
    return it->second;
  };

  ProtoWriter profile;
  auto value_type = [&](uint32_t field, std::string_view type, std::string_view unit) {
    ProtoWriter vt;
    vt.Varint(kValueTypeType, str(type));
    vt.Varint(kValueTypeUnit, str(unit));
    profile.Message(field, vt);
  };
  // The count first, by convention (profile.proto, sample_type).
  value_type(kProfileSampleType, "calls", "count");
  value_type(kProfileSampleType, "wall", "nanoseconds");
  for (const StackSample& s : stacks) {
    if (s.frames.empty() || (s.calls == 0 && s.self_ns == 0)) continue;
    std::vector<uint64_t> locations;
    locations.reserve(s.frames.size());
    for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it)  // leaf first
      locations.push_back(function(*it));
    ProtoWriter sample;
    sample.Packed(kSampleLocationId, locations);
    // int64 values, never negative here: the same varints as uint64.
    sample.Packed(kSampleValue, {s.calls, s.self_ns});
    profile.Message(kProfileSample, sample);
  }
  for (size_t i = 0; i < functions.size(); ++i) {
    ProtoWriter line;
    line.Varint(kLineFunctionId, i + 1);
    ProtoWriter location;
    location.Varint(kLocationId, i + 1);
    location.Message(kLocationLine, line);
    profile.Message(kProfileLocation, location);
  }
  for (size_t i = 0; i < functions.size(); ++i) {
    ProtoWriter fn;
    fn.Varint(kFunctionId, i + 1);
    const uint64_t name = str(functions[i]);
    fn.Varint(kFunctionName, name);
    fn.Varint(kFunctionSystemName, name);
    profile.Message(kProfileFunction, fn);
  }
  profile.Varint(kProfileDurationNanos, duration_ns);
  value_type(kProfilePeriodType, "wall", "nanoseconds");
  profile.Varint(kProfilePeriod, 1);  // every nanosecond counted: not sampled
  profile.Varint(kProfileDefaultSampleType, str("wall"));
  // Last, once every string is interned.
  for (std::string_view s : strings) profile.String(kProfileStringTable, s);
  return profile.bytes();
}

bool IsPprofPath(std::string_view path) {
  return EndsWith(path, ".pprof") || EndsWith(path, ".pprof.gz") || EndsWith(path, ".pb.gz") ||
         EndsWith(path, ".pb");
}

bool IsUncompressedPprofPath(std::string_view path) { return EndsWith(path, ".pb"); }

}  // namespace ptsnap::report
