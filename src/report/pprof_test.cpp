#include "report/pprof.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "report/report.h"

namespace ptsnap::report {
namespace {

using ::testing::ElementsAre;

// A protobuf reader written from the wire-format spec, independent of the
// encoder: every field of a message as (field number, varint or bytes).
struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  uint64_t varint = 0;
  std::string bytes;
};

bool ReadVarint(std::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto b = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

std::vector<Field> Parse(std::string_view in) {
  std::vector<Field> out;
  while (!in.empty()) {
    uint64_t key = 0;
    EXPECT_TRUE(ReadVarint(in, key));
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.type = static_cast<uint32_t>(key & 7);
    if (f.type == 0) {
      EXPECT_TRUE(ReadVarint(in, f.varint));
    } else if (f.type == 2) {
      uint64_t n = 0;
      EXPECT_TRUE(ReadVarint(in, n));
      EXPECT_LE(n, in.size());
      if (n > in.size()) return out;
      f.bytes = std::string(in.substr(0, n));
      in.remove_prefix(n);
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.type;
      return out;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<uint64_t> Packed(std::string_view in) {
  std::vector<uint64_t> out;
  uint64_t v = 0;
  while (!in.empty() && ReadVarint(in, v)) out.push_back(v);
  return out;
}

uint64_t VarintField(const std::vector<Field>& m, uint32_t number) {
  for (const Field& f : m)
    if (f.number == number && f.type == 0) return f.varint;
  return 0;
}

// The profile as pprof would show it: stacks of names, outermost first.
struct Decoded {
  std::vector<std::string> strings;
  std::vector<std::pair<std::string, std::string>> sample_types;
  std::string default_sample_type, period_type;
  uint64_t duration_ns = 0, period = 0;
  std::map<std::vector<std::string>, std::vector<uint64_t>> samples;
};

Decoded Decode(std::string_view bytes) {
  Decoded d;
  const std::vector<Field> profile = Parse(bytes);
  for (const Field& f : profile)
    if (f.number == 6) d.strings.push_back(f.bytes);
  EXPECT_FALSE(d.strings.empty());
  if (d.strings.empty()) return d;
  EXPECT_EQ(d.strings[0], "");
  auto s = [&](uint64_t i) { return i < d.strings.size() ? d.strings[i] : "<bad index>"; };
  std::map<uint64_t, std::string> function_names;  // by function id
  std::map<uint64_t, uint64_t> location_function;  // by location id
  for (const Field& f : profile) {
    if (f.number == 5) {
      auto fn = Parse(f.bytes);
      function_names[VarintField(fn, 1)] = s(VarintField(fn, 2));
      EXPECT_EQ(VarintField(fn, 2), VarintField(fn, 3));  // name == system_name
    } else if (f.number == 4) {
      auto loc = Parse(f.bytes);
      for (const Field& l : loc)
        if (l.number == 4) location_function[VarintField(loc, 1)] = VarintField(Parse(l.bytes), 1);
    }
  }
  for (const Field& f : profile) {
    if (f.number == 1) {
      auto vt = Parse(f.bytes);
      d.sample_types.emplace_back(s(VarintField(vt, 1)), s(VarintField(vt, 2)));
    } else if (f.number == 11) {
      auto vt = Parse(f.bytes);
      d.period_type = s(VarintField(vt, 1)) + "/" + s(VarintField(vt, 2));
    } else if (f.number == 2) {
      std::vector<std::string> stack;
      std::vector<uint64_t> values;
      for (const Field& x : Parse(f.bytes)) {
        if (x.number == 1)
          for (uint64_t id : Packed(x.bytes)) {
            EXPECT_TRUE(location_function.count(id)) << "location " << id;
            stack.insert(stack.begin(), function_names[location_function[id]]);  // leaf first
          }
        if (x.number == 2) values = Packed(x.bytes);
      }
      EXPECT_EQ(values.size(), 2u);
      EXPECT_FALSE(d.samples.count(stack)) << "one sample per stack";
      d.samples[stack] = values;
    }
  }
  d.duration_ns = VarintField(profile, 10);
  d.period = VarintField(profile, 12);
  d.default_sample_type = s(VarintField(profile, 14));
  return d;
}

TEST(Pprof, RoundTripsStacksValuesAndTypes) {
  std::vector<StackSample> stacks = {
      {{"main"}, 1, 10},
      {{"main", "work"}, 3, 700},
      {{"main", "work", "leaf"}, 3, 300},
      {{"main", "idle"}, 0, 0},  // nothing: left out
      {{"main", "a;b"}, 200, 1ull << 40},
  };
  const Decoded d = Decode(EncodePprof(stacks, 123456789));
  EXPECT_THAT(d.sample_types,
              ElementsAre(std::pair<std::string, std::string>("calls", "count"),
                          std::pair<std::string, std::string>("wall", "nanoseconds")));
  EXPECT_EQ(d.default_sample_type, "wall");
  EXPECT_EQ(d.period_type, "wall/nanoseconds");
  EXPECT_EQ(d.period, 1u);
  EXPECT_EQ(d.duration_ns, 123456789u);
  std::map<std::vector<std::string>, std::vector<uint64_t>> want = {
      {{"main"}, {1, 10}},
      {{"main", "work"}, {3, 700}},
      {{"main", "work", "leaf"}, {3, 300}},
      {{"main", "a;b"}, {200, 1ull << 40}},  // names are kept as they are
  };
  EXPECT_EQ(d.samples, want);
  // Every string once.
  std::set<std::string> unique(d.strings.begin(), d.strings.end());
  EXPECT_EQ(unique.size(), d.strings.size());
}

TEST(Pprof, AnEmptyProfileIsStillValid) {
  const Decoded d = Decode(EncodePprof({}, 0));
  EXPECT_TRUE(d.samples.empty());
  EXPECT_EQ(d.sample_types.size(), 2u);
  EXPECT_EQ(d.duration_ns, 0u);
}

TEST(Pprof, OutputNames) {
  for (const char* p : {"t.pprof", "t.pb.gz", "t.pprof.gz", "t.pb"}) EXPECT_TRUE(IsPprofPath(p));
  for (const char* p : {"t.folded", "t.pb.zst", "t.gz", "pprof"}) EXPECT_FALSE(IsPprofPath(p));
  EXPECT_TRUE(IsUncompressedPprofPath("t.pb"));
  EXPECT_FALSE(IsUncompressedPprofPath("t.pb.gz"));
  EXPECT_FALSE(IsUncompressedPprofPath("t.pprof"));
}

// The report's stacks (the same as its folded output) with call counts.
TEST(Pprof, ReportStacksCountCallsAndSelfTimeUnderInferredFrames) {
  ReportOptions o;
  o.folded = true;
  ReportSink r(o);
  std::deque<std::string> names;
  auto name = [&](const std::string& n) -> const std::string* {
    for (const std::string& s : names)
      if (s == n) return &s;
    return &names.emplace_back(n);
  };
  auto slice = [&](model::Slice::Kind k, const std::string& n, uint64_t ts, uint64_t begin,
                   bool inferred) {
    model::Slice s;
    s.kind = k;
    s.pid = s.tid = 1;
    s.ts = ts;
    s.begin_ts = begin;
    s.inferred = inferred;
    s.name = name(n);
    r.OnSlice(s);
  };
  for (uint64_t t : {10, 20}) {  // work { leaf } twice
    slice(model::Slice::kBegin, "work", t, 0, false);
    slice(model::Slice::kBegin, "leaf", t + 1, 0, false);
    slice(model::Slice::kEnd, "leaf", t + 4, t + 1, false);
    slice(model::Slice::kEnd, "work", t + 5, t, false);
  }
  slice(model::Slice::kEnd, "main", 40, 0, true);
  slice(model::Slice::kBegin, "main", 0, 0, true);
  ASSERT_TRUE(r.Finish());
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> got;
  for (const StackSample& s : r.Stacks()) got[s.frames] = {s.calls, s.self_ns};
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> want = {
      {{"main"}, {1, 30}},
      {{"main", "work"}, {2, 4}},
      {{"main", "work", "leaf"}, {2, 6}},
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.FoldedStacks(), "main 30\nmain;work 4\nmain;work;leaf 6\n");
  const Decoded d = Decode(EncodePprof(r.Stacks(), r.span_ns()));
  EXPECT_EQ(d.samples.at({"main", "work", "leaf"}), (std::vector<uint64_t>{2, 6}));
  EXPECT_EQ(d.duration_ns, 40u);
}

}  // namespace
}  // namespace ptsnap::report
