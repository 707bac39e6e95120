#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "decode/pt_decoder.h"  // kPowerPwre
#include "decode/symbols.h"
#include "decode/test_stream.h"
#include "output/fxt_reader.h"
#include "output/fxt_writer.h"
#include "output/output_file.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::output {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;

model::Slice S(model::Slice::Kind k, uint64_t ts, const std::string* name, int32_t tid = 11) {
  model::Slice s;
  s.kind = k;
  s.pid = 10;
  s.tid = tid;
  s.ts = ts;
  s.name = name;
  return s;
}

uint64_t WordAt(const std::string& b, size_t i) {
  uint64_t w;
  std::memcpy(&w, b.data() + i * 8, 8);
  return w;
}

// One gzip member inflated (at most `size` bytes); "" when it is not one
// whole member.
std::string Gunzip(std::string gz, size_t size) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return "";
  std::string back(size + 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(back.data());
  z.avail_out = static_cast<uInt>(back.size());
  const int r = inflate(&z, Z_FINISH);
  back.resize(z.total_out);
  inflateEnd(&z);
  return r == Z_STREAM_END && z.avail_in == 0 ? back : "";
}

// Bytes that compress about as a trace does: runs of text and of noise.
std::string TraceLikeBytes(size_t size) {
  std::string data;
  uint64_t x = 88172645463325252ULL;
  while (data.size() < size) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (x % 3 == 0) {
      data += "slice " + std::to_string(x % 5000) + " fib;";
    } else {
      data.append(reinterpret_cast<const char*>(&x), 3);
    }
  }
  data.resize(size);
  return data;
}

std::string FileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// -j 2's compressing thread (OutputFile::Open's compress_threads 1) writes
// the file -j 1 writes, byte for byte, over several of its buffers written
// in pieces of uneven sizes; -j 3's two (and three), compressing in
// blocks, one gzip member that inflates to the same bytes.
TEST(OutputFileTest, CompressingOnThreadsWritesTheSameBytes) {
  ::ptsnap::testing::TempDir tmp;
  const std::string data = TraceLikeBytes(7 << 20);
  std::string file[4];
  for (unsigned threads : {0u, 1u, 2u, 3u}) {
    const auto path = tmp.path() / ("t" + std::to_string(threads) + ".fxt.gz");
    auto f = OutputFile::Open(path, std::nullopt, threads);
    ASSERT_THAT(f, HasValue());
    for (size_t at = 0, piece = 1; at < data.size(); at += piece, piece = piece * 7 % 90001 + 1) {
      (*f)->Write(std::string_view(data).substr(at, piece));
    }
    EXPECT_EQ((*f)->bytes_written(), data.size());
    ASSERT_THAT((*f)->Close(), HasValue());
    file[threads] = FileBytes(path);
    EXPECT_TRUE(Gunzip(file[threads], data.size()) == data)
        << threads << " thread(s): the file is not one gzip member of the bytes written";
  }
  EXPECT_GT(file[0].size(), 1u << 20);
  EXPECT_TRUE(file[0] == file[1]) << "the compressing thread wrote another file";
  // Blocks start with gzdopen's own header (its XFL follows the level).
  EXPECT_EQ(file[2].substr(0, 10), file[0].substr(0, 10));
  // Blocks cost little: each starts with the previous 32 KiB as its dictionary.
  EXPECT_LT(file[2].size(), file[0].size() + file[0].size() / 100);
  // Empty and small files in blocks, too.
  for (size_t size : {size_t{0}, size_t{10}}) {
    const auto path = tmp.path() / "small.gz";
    auto f = OutputFile::Open(path, std::nullopt, 2);
    ASSERT_THAT(f, HasValue());
    (*f)->Write(data.substr(0, size));
    ASSERT_THAT((*f)->Close(), HasValue());
    EXPECT_EQ(Gunzip(FileBytes(path), size), data.substr(0, size)) << size << " bytes";
  }
}

// A write error on a compressing thread (a full disk) is the error Close()
// reports without one, and Close() ends the threads.
TEST(OutputFileTest, DiskFullOnTheCompressingThreadIsReportedOnClose) {
  const std::string data = TraceLikeBytes(6 << 20);
  for (unsigned threads : {0u, 1u, 2u}) {
    auto out = OutputFile::Open("/dev/full", true, threads);
    ASSERT_THAT(out, HasValue());
    for (size_t at = 0; at < data.size(); at += 100000) {
      (*out)->Write(std::string_view(data).substr(at, 100000));
    }
    EXPECT_THAT((*out)->Close(), HasErrorContaining("writing /dev/full: No space left on device"))
        << threads << " thread(s)";
    // Later calls give the same error; nothing more is written.
    EXPECT_THAT((*out)->Close(), HasErrorContaining("No space left on device"));
  }
}

// gzip forced on a name without ".gz" (pprof's .pprof): one gzip member
// (RFC 1952) that inflates back to what was written.
TEST(OutputFileTest, ForcedGzipIsAGzipMemberThatInflatesBack) {
  ::ptsnap::testing::TempDir tmp;
  std::string data(100000, 'x');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>(i);
  const auto path = tmp.path() / "t.pprof";
  {
    auto f = OutputFile::Open(path, true);
    ASSERT_TRUE(f.has_value()) << f.error().ToString();
    (*f)->Write(data);
    ASSERT_TRUE((*f)->Close().has_value());
  }
  std::ifstream in(path, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<uint8_t>(gz[0]), 0x1f);  // RFC 1952 magic
  EXPECT_EQ(static_cast<uint8_t>(gz[1]), 0x8b);
  EXPECT_EQ(Gunzip(gz, data.size()), data);
  // Without the choice, the suffix decides: .pb stays raw.
  {
    auto f = OutputFile::Open(tmp.path() / "t.pb");
    ASSERT_TRUE(f.has_value());
    (*f)->Write("raw");
    ASSERT_TRUE((*f)->Close().has_value());
  }
  std::ifstream raw(tmp.path() / "t.pb", std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>()),
            "raw");
}

TEST(FxtTest, FileAndLineArgsFromDwarf) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  decode::Symbolizer symbolizer;
  uint64_t target = decode::testing::MapSrcline(&symbolizer, 10, PTSNAP_DECODE_SRCLINE);
  ASSERT_NE(target, 0u);
  std::string fn = "srcline_target", other = "other", unknown = "[unknown]", dso = "srcline";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    FxtWriter w(out->get());
    w.SetSourceLookup([&](int32_t pid, uint64_t a) { return symbolizer.SourceLine(pid, a); });
    w.OnProcess(10, "srcline [pid=10]");
    w.OnThread(10, 11, "srcline");
    auto b = S(model::Slice::kBegin, 100, &fn);
    b.address = target;
    b.dso = &dso;
    w.OnSlice(b);
    auto o = S(model::Slice::kBegin, 110, &other);
    o.address = 0x1000;  // not mapped: no location
    w.OnSlice(o);
    w.OnSlice(S(model::Slice::kEnd, 120, &other));
    auto x = S(model::Slice::kComplete, 130, &unknown);  // pseudo frame: no address
    x.end_ts = 135;
    w.OnSlice(x);
    w.OnSlice(S(model::Slice::kEnd, 140, &fn));
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto bytes = ReadMaybeGzip(path);
  ASSERT_THAT(bytes, HasValue());
  auto t = ParseFxt(*bytes);
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->events.size(), 5u);
  const FxtEvent& e = t->events[0];
  EXPECT_EQ(e.name, "srcline_target");
  ASSERT_EQ(e.args.count("file"), 1u);
  EXPECT_EQ(e.args.at("file").type, 6);  // string
  EXPECT_EQ(std::filesystem::path(e.args.at("file").str).filename(), "srcline.c");
  ASSERT_EQ(e.args.count("line"), 1u);
  EXPECT_EQ(e.args.at("line").type, 1);  // int32
  EXPECT_EQ(e.args.at("line").value, 5u);
  ASSERT_EQ(e.args.count("address"), 1u);
  EXPECT_EQ(e.args.at("address").value, target);
  EXPECT_EQ(e.args.at("dso").str, "srcline");
  EXPECT_EQ(t->events[1].name, "other");
  EXPECT_EQ(t->events[1].args.count("file"), 0u);
  EXPECT_EQ(t->events[1].args.count("line"), 0u);
  EXPECT_EQ(t->events[3].args.count("file"), 0u);
}

TEST(FxtTest, RoundTripAndHeaderBits) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  std::string main_name = "main", leaf = "leaf", unknown = "[unknown]",
              marker = "[decode error: x]", dso = "/bin/prog";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    FxtWriter w(out->get());
    w.OnProcess(10, "prog --flag [pid=10]");
    w.OnThread(10, 11, "prog");
    auto b = S(model::Slice::kBegin, 100, &main_name);
    b.address = 0x401000;
    b.dso = &dso;
    w.OnSlice(b);
    w.OnSlice(S(model::Slice::kBegin, 110, &leaf));
    w.OnSlice(S(model::Slice::kEnd, 120, &leaf));
    auto x = S(model::Slice::kComplete, 90, &unknown);
    x.end_ts = 95;
    x.inferred = true;
    w.OnSlice(x);
    w.OnSlice(S(model::Slice::kInstant, 130, &marker));
    w.OnSlice(S(model::Slice::kEnd, 140, &main_name));
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto bytes = ReadMaybeGzip(path);
  ASSERT_THAT(bytes, HasValue());
  // Magic number record: exactly these 8 bytes first (Perfetto's sniffer).
  ASSERT_GE(bytes->size(), 8u);
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x10\x00\x04\x46\x78\x54\x16\x00", 8));
  // Provider info metadata: type 0, metadata type 1, name length 6.
  uint64_t h = WordAt(*bytes, 1);
  EXPECT_EQ(h & 0xf, 0u);
  EXPECT_EQ((h >> 4) & 0xfff, 2u);  // header + "ptsnap" padded to one word
  EXPECT_EQ((h >> 16) & 0xf, 1u);
  EXPECT_EQ((h >> 52) & 0xff, 6u);
  // Provider section, then the initialization record with 1e9 ticks/s.
  EXPECT_EQ(WordAt(*bytes, 3), 0x0000000000020010ull);
  EXPECT_EQ(WordAt(*bytes, 4), 0x0000000000000021ull);
  EXPECT_EQ(WordAt(*bytes, 5), 1000000000ull);
  // The first string record: index 1, "process" (7 bytes, one word).
  h = WordAt(*bytes, 6);
  EXPECT_EQ(h & 0xf, 2u);
  EXPECT_EQ((h >> 4) & 0xfff, 2u);
  EXPECT_EQ((h >> 16) & 0x7fff, 1u);
  EXPECT_EQ((h >> 32) & 0x7fff, 7u);
  EXPECT_EQ(bytes->substr(7 * 8, 7), "process");

  auto t = ParseFxt(*bytes);
  ASSERT_THAT(t, HasValue());
  EXPECT_EQ(t->ticks_per_second, 1000000000u);
  EXPECT_EQ(t->provider, "ptsnap");
  EXPECT_EQ(t->processes.at(10), "prog --flag [pid=10]");
  EXPECT_EQ(t->threads.at(11).pid, 10u);
  EXPECT_EQ(t->threads.at(11).name, "prog");
  ASSERT_EQ(t->events.size(), 6u);
  const FxtEvent& e0 = t->events[0];
  EXPECT_EQ(e0.type, 2);
  EXPECT_EQ(e0.ts, 100u);
  EXPECT_EQ(e0.name, "main");
  EXPECT_EQ(e0.pid, 10u);
  EXPECT_EQ(e0.tid, 11u);
  EXPECT_EQ(e0.args.at("address").type, 7);
  EXPECT_EQ(e0.args.at("address").value, 0x401000u);
  EXPECT_EQ(e0.args.at("dso").str, "/bin/prog");
  EXPECT_EQ(t->events[2].type, 3);
  EXPECT_EQ(t->events[3].type, 4);
  EXPECT_EQ(t->events[3].end_ts, 95u);
  EXPECT_EQ(t->events[3].args.at("inferred_start_time").str, "true");
  EXPECT_EQ(t->events[4].name, "[decode error: x]");
  EXPECT_EQ(t->events[4].ts, t->events[4].end_ts);  // zero-length marker
}

// A counter (the core clock: docs/decoding.md, "Frequency and power") is
// an FXT counter event with one uint64 argument and its counter id; the
// reader stays in step with the records after it.
TEST(FxtTest, ACounterIsACounterEvent) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  std::string clock = "[core clock MHz]", a = "a";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    FxtWriter w(out->get());
    w.OnThread(1, 2, "t");
    auto c = S(model::Slice::kCounter, 50, &clock);
    c.value = 3600;
    w.OnSlice(c);
    w.OnSlice(S(model::Slice::kBegin, 60, &a));
    w.OnSlice(S(model::Slice::kEnd, 70, &a));
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto bytes = ReadMaybeGzip(path);
  ASSERT_THAT(bytes, HasValue());
  auto t = ParseFxt(*bytes);
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->events.size(), 3u);
  EXPECT_EQ(t->events[0].type, 1);
  EXPECT_EQ(t->events[0].name, clock);
  EXPECT_EQ(t->events[0].ts, 50u);
  EXPECT_EQ(t->events[0].args.at("value").value, 3600u);
  EXPECT_EQ(t->events[1].type, 2);
  EXPECT_EQ(t->events[1].name, "a");
  EXPECT_EQ(t->events[2].ts, 70u);
}

// An emulated trace's virtual clock is in its process names (#41): FXT has
// no free-form metadata Perfetto shows.
TEST(FxtTest, AVirtualClockIsInTheProcessNames) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    FxtWriter w(out->get());
    w.SetClockInNames("virtual clock");
    w.OnProcess(10, "prog [pid=10]");
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto bytes = ReadMaybeGzip(path);
  ASSERT_THAT(bytes, HasValue());
  auto t = ParseFxt(*bytes);
  ASSERT_THAT(t, HasValue());
  EXPECT_EQ(t->processes.at(10), "prog [pid=10] (virtual clock)");
}

TEST(FxtTest, StringSlotsAreReusedBeyondTheTable) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt.gz";
  std::vector<std::string> names;
  for (int i = 0; i < 200; ++i) names.push_back("fn" + std::to_string(i));
  {
    auto out = OutputFile::Open(path);
    ASSERT_THAT(out, HasValue());
    FxtWriter w(out->get());
    w.SetStringSlotsForTest(20);
    w.OnThread(1, 1, "t");
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < 200; ++i) {
        w.OnSlice(S(model::Slice::kBegin, static_cast<uint64_t>(i), &names[i], 1));
        w.OnSlice(S(model::Slice::kEnd, static_cast<uint64_t>(i) + 1, &names[i], 1));
      }
    }
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto bytes = ReadMaybeGzip(path);  // gzip output round-trips through zlib
  ASSERT_THAT(bytes, HasValue());
  auto t = ParseFxt(*bytes);
  ASSERT_THAT(t, HasValue());
  EXPECT_LE(t->max_string_index, 20);
  ASSERT_EQ(t->events.size(), 800u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(t->events[static_cast<size_t>(2 * i)].name, names[i]);
  EXPECT_EQ(t->events[400].name, "fn0");
}

TEST(FxtTest, ManyThreadsReuseThreadSlots) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  std::string n = "f";
  {
    auto out = OutputFile::Open(path);
    FxtWriter w(out->get());
    for (int tid = 1; tid <= 600; ++tid) w.OnSlice(S(model::Slice::kInstant, 5, &n, tid));
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto t = ParseFxt(*ReadMaybeGzip(path));
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->events.size(), 600u);
  EXPECT_EQ(t->events[599].tid, 600u);
  EXPECT_EQ(t->events[255].tid, 256u);
}

TEST(FxtTest, ThousandThreadsAndHundredThousandNamesRoundTrip) {
  // Past both tables at once (255 thread slots, 32767 string slots): every
  // event must still read back with its own name and thread.
  constexpr int kThreads = 1000, kNames = 100000;
  std::vector<std::string> names;
  names.reserve(kNames);
  for (int i = 0; i < kNames; ++i) names.push_back("function_" + std::to_string(i));
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt.gz";
  {
    auto out = OutputFile::Open(path);
    FxtWriter w(out->get());
    w.OnProcess(10, "prog [pid=10]");
    for (int t = 0; t < kThreads; ++t) w.OnThread(10, 1000 + t, "worker " + std::to_string(t));
    for (int i = 0; i < kNames; ++i) {
      const int32_t tid = 1000 + i % kThreads;
      w.OnSlice(S(model::Slice::kBegin, 2 * uint64_t(i) + 1, &names[i], tid));
      model::Slice e = S(model::Slice::kEnd, 2 * uint64_t(i) + 2, &names[i], tid);
      e.begin_ts = 2 * uint64_t(i) + 1;
      w.OnSlice(e);
    }
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto t = ParseFxt(*ReadMaybeGzip(path));
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->threads.size(), size_t{kThreads});
  EXPECT_EQ(t->threads[1999].name, "worker 999");
  EXPECT_EQ(t->threads[1999].pid, 10u);
  ASSERT_EQ(t->events.size(), size_t{2 * kNames});
  int wrong = 0;
  for (int i = 0; i < kNames; ++i) {
    const FxtEvent& b = t->events[2 * i];
    const FxtEvent& e = t->events[2 * i + 1];
    const uint64_t tid = 1000 + i % kThreads;
    wrong += b.type != 2 || b.name != names[i] || b.tid != tid || b.ts != 2 * uint64_t(i) + 1 ||
             e.type != 3 || e.tid != tid || e.ts != 2 * uint64_t(i) + 2;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(t->string_records, uint64_t{kNames});  // every name written, slots reused
  EXPECT_EQ(t->max_string_index, kFxtMaxStringIndex);
}

TEST(FxtTest, InlineFramesCarryTheInlinedArg) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  std::string caller = "loop_caller", inlined = "inl_step (inlined)";
  {
    auto out = OutputFile::Open(path);
    FxtWriter w(out->get());
    w.OnSlice(S(model::Slice::kBegin, 1, &caller));
    model::Slice b = S(model::Slice::kBegin, 2, &inlined);
    b.inlined = true;
    b.address = 0x11af;
    w.OnSlice(b);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto t = ParseFxt(*ReadMaybeGzip(path));
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->events.size(), 2u);
  EXPECT_EQ(t->events[0].args.count("inlined"), 0u);
  ASSERT_EQ(t->events[1].args.count("inlined"), 1u);
  EXPECT_EQ(t->events[1].args.at("inlined").str, "true");
  EXPECT_EQ(t->events[1].args.at("address").value, 0x11afu);
}

// A "[C-state Cn]" frame (docs/decoding.md, "Frequency and power"): its
// begin carries the entry's state (PWRE C6, sub-state 1, hardware-
// initiated), its end the PWRX's (Perfetto adds an end's args to the
// slice): last and deepest core C-state and the wake reasons.
TEST(FxtTest, ACStateFrameCarriesItsStatesAsArgs) {
  ::ptsnap::testing::TempDir dir;
  auto path = dir.path() / "t.fxt";
  std::string idle = "[C-state C6]";
  {
    auto out = OutputFile::Open(path);
    FxtWriter w(out->get());
    w.SetStringSlotsForTest(16);  // the args' strings are interned and evicted like names
    model::Slice b = S(model::Slice::kBegin, 10, &idle);
    b.idle = true;
    b.value = decode::kPowerPwre | 5 | 1 << 8 | 1 << 16;
    w.OnSlice(b);
    model::Slice e = S(model::Slice::kEnd, 20, &idle);
    e.idle = true;
    e.value = b.value;
    e.power_exit = model::kPowerExitSeen | 1 | 5 << 8 | 1 << 16 | 1 << 18;
    w.OnSlice(e);
    // A frame the thread's next event ended (no PWRX): no exit args.
    model::Slice b2 = S(model::Slice::kBegin, 30, &idle);
    b2.idle = true;
    b2.value = 0x20;  // MWAIT's hint: C3, sub-state 0
    w.OnSlice(b2);
    model::Slice e2 = S(model::Slice::kEnd, 40, &idle);
    e2.idle = true;
    e2.value = b2.value;
    w.OnSlice(e2);
    ASSERT_THAT(w.Finish(), HasValue());
  }
  auto t = ParseFxt(*ReadMaybeGzip(path));
  ASSERT_THAT(t, HasValue());
  ASSERT_EQ(t->events.size(), 4u);
  auto args = [&](size_t i) {
    std::vector<std::string> out;
    for (const auto& [name, a] : t->events[i].args) out.push_back(name + "=" + a.str);
    return out;
  };
  EXPECT_THAT(args(0),
              ::testing::ElementsAre("c_state=C6", "hardware_initiated=true", "sub_state=1"));
  EXPECT_EQ(t->events[1].type, 3);
  EXPECT_THAT(args(1), ::testing::ElementsAre("deepest_c_state=C6", "last_c_state=C2",
                                              "wake=interrupt,hardware"));
  EXPECT_THAT(args(2), ::testing::ElementsAre("c_state=C3", "sub_state=0"));
  EXPECT_THAT(args(3), ::testing::ElementsAre());
}

TEST(FxtTest, ReaderRejectsBrokenFiles) {
  EXPECT_THAT(ParseFxt("not fxt at all"), HasErrorContaining("magic"));
  std::string magic("\x10\x00\x04\x46\x78\x54\x16\x00", 8);
  // An event record (size 2) referring to undefined thread 3.
  uint64_t ev = 4 | (2 << 4) | (uint64_t{3} << 24);
  std::string rec(reinterpret_cast<const char*>(&ev), 8);
  rec += std::string(8, '\0');
  EXPECT_THAT(ParseFxt(magic + rec), HasErrorContaining("thread ref 3"));
  // A record claiming more words than the file has.
  uint64_t big = 4 | (100 << 4);
  EXPECT_THAT(ParseFxt(magic + std::string(reinterpret_cast<const char*>(&big), 8)),
              HasErrorContaining("past the end"));
}

TEST(FxtTest, UnwritableOutputIsAClearError) {
  EXPECT_THAT(OutputFile::Open("/nonexistent-dir/out.fxt"),
              HasErrorContaining("opening /nonexistent-dir/out.fxt for writing"));
}

TEST(FxtTest, DiskFullIsReportedOnClose) {
  auto out = OutputFile::Open("/dev/full");
  ASSERT_THAT(out, HasValue());
  (*out)->Write(std::string(3 << 20, 'x'));
  EXPECT_THAT((*out)->Close(), HasErrorContaining("writing /dev/full: No space left on device"));
}

TEST(FxtTest, FormatFromPath) {
  EXPECT_EQ(FormatFromPath("a/trace.fxt.gz"), "fxt");
  EXPECT_EQ(FormatFromPath("t.json"), "json");
  EXPECT_EQ(FormatFromPath("t.events.gz"), "events");
  EXPECT_EQ(FormatFromPath("t.txt"), "");
}

}  // namespace
}  // namespace ptsnap::output
