#include "trace/perf_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"

namespace ptsnap::trace {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::HasSubstr;

std::span<const std::byte> Span(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Hand-built kernel-format bytes (little-endian, as on x86-64), independent
// of the serializer under test.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Raw(&v, 1); }
  Bytes& U16(uint16_t v) { return Raw(&v, 2); }
  Bytes& U32(uint32_t v) { return Raw(&v, 4); }
  Bytes& U64(uint64_t v) { return Raw(&v, 8); }
  Bytes& Str(std::string_view s) {
    s_.append(s);
    return *this;
  }
  Bytes& Zeros(size_t n) {
    s_.append(n, '\0');
    return *this;
  }
  // The 32-byte trailer for sample_type TID|TIME|CPU|IDENTIFIER.
  Bytes& Trailer(uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t id) {
    return U32(pid).U32(tid).U64(time).U32(cpu).U32(0).U64(id);
  }
  [[nodiscard]] const std::string& str() const { return s_; }

 private:
  Bytes& Raw(const void* p, size_t n) {
    s_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string s_;
};

SampleId Sid(uint64_t time, uint64_t id = 7) {
  SampleId s;
  s.pid = 100;
  s.tid = 101;
  s.time = time;
  s.cpu = 3;
  s.id = id;
  return s;
}

Record Make(RecordBody body, uint64_t time = 1000, uint16_t misc = PERF_RECORD_MISC_USER) {
  Record r;
  r.misc = misc;
  r.sample_id = Sid(time);
  r.body = std::move(body);
  return r;
}

Record ParseOne(const std::string& bytes) {
  auto parsed = ParseRecord(Span(bytes));
  EXPECT_THAT(parsed, HasValue());
  if (!parsed) return {};
  EXPECT_EQ(parsed->size, bytes.size());
  return parsed->record;
}

TEST(PerfRecordTest, Mmap2InodeFormMatchesKernelLayout) {
  // header(8) pid tid addr len pgoff (32) maj min ino ino_gen (24) prot flags
  // (8) filename "/bin/ls\0" (8) trailer (32) = 112 bytes.
  Bytes b;
  b.U32(PERF_RECORD_MMAP2).U16(PERF_RECORD_MISC_USER).U16(112);
  b.U32(12).U32(13).U64(0x555555554000).U64(0x1000).U64(0x2000);
  b.U32(8).U32(1).U64(1234).U64(5);
  b.U32(PROT_READ | PROT_EXEC).U32(MAP_PRIVATE);
  b.Str("/bin/ls").U8(0);
  b.Trailer(100, 101, 1000, 3, 7);
  ASSERT_EQ(b.str().size(), 112u);

  Mmap2 m;
  m.pid = 12;
  m.tid = 13;
  m.addr = 0x555555554000;
  m.len = 0x1000;
  m.pgoff = 0x2000;
  m.maj = 8;
  m.min = 1;
  m.ino = 1234;
  m.ino_generation = 5;
  m.prot = PROT_READ | PROT_EXEC;
  m.flags = MAP_PRIVATE;
  m.filename = "/bin/ls";
  Record r = Make(m);
  r.type = PERF_RECORD_MMAP2;

  EXPECT_EQ(SerializeRecord(r), b.str());
  EXPECT_EQ(ParseOne(b.str()), r);
  EXPECT_EQ(DescribeRecord(r),
            "MMAP2 pid 12 tid 13 0x555555554000+0x1000 pgoff 0x2000 r-xp /bin/ls dev 8:1 ino 1234");
}

TEST(PerfRecordTest, Mmap2BuildIdFormMatchesKernelLayout) {
  std::string id(20, '\0');
  for (int i = 0; i < 20; ++i) id[static_cast<size_t>(i)] = static_cast<char>(0xa0 + i);
  // Filename "/usr/lib/libc.so.6" (18) + NUL = 19, padded to 24.
  Bytes b;
  uint16_t misc = PERF_RECORD_MISC_USER | kMiscMmapBuildId;
  b.U32(PERF_RECORD_MMAP2).U16(misc).U16(8 + 64 + 24 + 32);
  b.U32(12).U32(12).U64(0x7f0000000000).U64(0x200000).U64(0);
  b.U8(20).U8(0).U16(0).Str(id);
  b.U32(PROT_READ | PROT_EXEC).U32(MAP_PRIVATE);
  b.Str("/usr/lib/libc.so.6").Zeros(6);
  b.Trailer(100, 101, 1000, 3, 7);

  Mmap2 m;
  m.pid = m.tid = 12;
  m.addr = 0x7f0000000000;
  m.len = 0x200000;
  m.build_id = id;
  m.prot = PROT_READ | PROT_EXEC;
  m.flags = MAP_PRIVATE;
  m.filename = "/usr/lib/libc.so.6";
  Record r = Make(m, 1000, misc);
  r.type = PERF_RECORD_MMAP2;
  EXPECT_EQ(SerializeRecord(r), b.str());
  EXPECT_EQ(ParseOne(b.str()), r);
  EXPECT_THAT(DescribeRecord(r), HasSubstr("build-id a0a1a2a3"));

  // A short build-id (build_id_size 16) keeps only its bytes.
  std::string bytes = b.str();
  bytes[40] = 16;
  Record parsed = ParseOne(bytes);
  EXPECT_EQ(std::get<Mmap2>(parsed.body).build_id, id.substr(0, 16));
}

TEST(PerfRecordTest, CommAndTextPokeLayoutsArePaddedLikeTheKernel) {
  Bytes comm;
  comm.U32(PERF_RECORD_COMM).U16(PERF_RECORD_MISC_USER | kMiscCommExec).U16(56);
  comm.U32(5).U32(6).Str("ls").Zeros(6).Trailer(100, 101, 1000, 3, 7);
  Record c = Make(Comm{.pid = 5, .tid = 6, .comm = "ls", .exec = true}, 1000,
                  PERF_RECORD_MISC_USER | kMiscCommExec);
  c.type = PERF_RECORD_COMM;
  EXPECT_EQ(SerializeRecord(c), comm.str());
  EXPECT_EQ(ParseOne(comm.str()), c);

  // TEXT_POKE: u16 old_len + u16 new_len + 1 + 5 bytes = 10, padded to 16.
  Bytes poke;
  poke.U32(kRecordTextPoke).U16(PERF_RECORD_MISC_KERNEL).U16(8 + 8 + 16 + 32);
  poke.U64(0xffffffff81000000).U16(1).U16(5).Str("\xcc").Str("\xe8\x01\x02\x03\x04").Zeros(6);
  poke.Trailer(100, 101, 1000, 3, 7);
  Record t = Make(
      TextPoke{
          .addr = 0xffffffff81000000, .old_bytes = "\xcc", .new_bytes = "\xe8\x01\x02\x03\x04"},
      1000, PERF_RECORD_MISC_KERNEL);
  t.type = kRecordTextPoke;
  EXPECT_EQ(SerializeRecord(t), poke.str());
  EXPECT_EQ(ParseOne(poke.str()), t);
  EXPECT_EQ(DescribeRecord(t), "TEXT_POKE 0xffffffff81000000 old cc new e801020304");
}

std::vector<Record> AllKinds() {
  std::vector<Record> v;
  auto add = [&](uint32_t type, RecordBody body, uint16_t misc = PERF_RECORD_MISC_USER) {
    Record r = Make(std::move(body), 1000 + v.size(), misc);
    r.type = type;
    v.push_back(std::move(r));
  };
  add(PERF_RECORD_MMAP,
      Mmap{.pid = static_cast<uint32_t>(-1),
           .addr = 0xffffffff81000000,
           .len = 0x1000000,
           .pgoff = 0xffffffff81000000,
           .filename = "[kernel.kallsyms]_text"},
      PERF_RECORD_MISC_KERNEL);
  add(PERF_RECORD_LOST, Lost{.id = 9, .lost = 42});
  add(PERF_RECORD_COMM, Comm{.pid = 1, .tid = 2, .comm = "sixteen-bytes-xx"});
  add(PERF_RECORD_COMM, Comm{.pid = 1, .tid = 1, .comm = "", .exec = true},
      PERF_RECORD_MISC_USER | kMiscCommExec);
  add(PERF_RECORD_EXIT, Task{.exit = true, .pid = 4, .ppid = 3, .tid = 4, .ptid = 3, .time = 77});
  add(PERF_RECORD_FORK, Task{.pid = 4, .ppid = 3, .tid = 5, .ptid = 4, .time = 78});
  Mmap2 m2;
  m2.pid = 1;
  m2.filename = "a";
  add(PERF_RECORD_MMAP2, m2);
  m2.build_id = "\x01\x02\x03";
  add(PERF_RECORD_MMAP2, m2, PERF_RECORD_MISC_USER | kMiscMmapBuildId);
  add(PERF_RECORD_AUX, Aux{.aux_offset = 0x1000, .aux_size = 0x2000, .flags = 3});
  add(PERF_RECORD_ITRACE_START, ItraceStart{.pid = 8, .tid = 9});
  add(PERF_RECORD_SWITCH, Switch{.out = true}, PERF_RECORD_MISC_USER | kMiscSwitchOut);
  add(PERF_RECORD_SWITCH, Switch{});
  add(PERF_RECORD_SWITCH_CPU_WIDE,
      Switch{.out = true, .cpu_wide = true, .next_prev_pid = 10, .next_prev_tid = 11},
      PERF_RECORD_MISC_USER | kMiscSwitchOut);
  add(PERF_RECORD_SWITCH_CPU_WIDE,
      Switch{.cpu_wide = true, .next_prev_pid = 10, .next_prev_tid = 12});
  add(PERF_RECORD_KSYMBOL,
      Ksymbol{.addr = 0xffffffffc0000000, .len = 0x40, .ksym_type = 1, .name = "bpf_prog_x"},
      PERF_RECORD_MISC_KERNEL);
  add(kRecordTextPoke, TextPoke{.addr = 0x10, .old_bytes = "", .new_bytes = std::string(8, 'x')});
  add(PERF_RECORD_LOST_SAMPLES, OtherRecord{.body = std::string("\x05\0\0\0\0\0\0\0", 8)});
  add(21, OtherRecord{.body = std::string(16, '\x7f')});
  return v;
}

TEST(PerfRecordTest, EveryTypeRoundTrips) {
  for (const Record& r : AllKinds()) {
    SCOPED_TRACE(DescribeRecord(r));
    std::string bytes = SerializeRecord(r);
    EXPECT_EQ(bytes.size() % 8, 0u);
    uint16_t size;
    std::memcpy(&size, bytes.data() + 6, 2);
    EXPECT_EQ(size, bytes.size());
    // The trailer is the last 32 bytes.
    SampleId tail;
    std::memcpy(&tail, bytes.data() + bytes.size() - kSampleIdSize, kSampleIdSize);
    EXPECT_EQ(tail, r.sample_id);
    EXPECT_EQ(ParseOne(bytes), r);
  }
}

TEST(PerfRecordTest, StreamRoundTripsFromUnalignedMemory) {
  std::vector<Record> all = AllKinds();
  std::string stream = "x";  // one byte so the records start unaligned
  for (const Record& r : all) stream += SerializeRecord(r);
  auto parsed = ParseRecords(Span(stream).subspan(1));
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(parsed->records, all);
  EXPECT_EQ(parsed->truncated_tail, 0u);
}

TEST(PerfRecordTest, DescriptionsNameEachKind) {
  std::vector<std::string> got;
  for (const Record& r : AllKinds()) got.push_back(DescribeRecord(r));
  EXPECT_EQ(got[0],
            "MMAP pid -1 tid 0 0xffffffff81000000+0x1000000 pgoff 0xffffffff81000000 "
            "[kernel.kallsyms]_text");
  EXPECT_EQ(got[1], "LOST 42 records (id 9)");
  EXPECT_EQ(got[3], "COMM exec pid 1 tid 1 ");
  EXPECT_EQ(got[4], "EXIT pid 4 ppid 3 tid 4 ptid 3");
  EXPECT_EQ(got[8], "AUX offset 0x1000 size 0x2000 TRUNCATED OVERWRITE");
  EXPECT_EQ(got[10], "SWITCH out");
  EXPECT_EQ(got[12], "SWITCH_CPU_WIDE out next pid 10 tid 11");
  EXPECT_EQ(got[13], "SWITCH_CPU_WIDE in prev pid 10 tid 12");
  EXPECT_EQ(got[14], "KSYMBOL 0xffffffffc0000000+0x40 type 1 flags 0 bpf_prog_x");
  EXPECT_EQ(got[16], "LOST_SAMPLES (8 body bytes)");
}

TEST(PerfRecordTest, BodyDecidesTypeAndMiscBits) {
  Record r = Make(Task{.exit = true});
  r.type = PERF_RECORD_FORK;  // contradicts the body: the body wins
  std::string bytes = SerializeRecord(r);
  uint32_t type;
  std::memcpy(&type, bytes.data(), 4);
  EXPECT_EQ(type, PERF_RECORD_EXIT);

  Record c = Make(Comm{.comm = "x", .exec = true}, 5, 0);
  Record parsed = ParseOne(SerializeRecord(c));
  EXPECT_EQ(parsed.misc & kMiscCommExec, kMiscCommExec);
  EXPECT_TRUE(std::get<Comm>(parsed.body).exec);
}

TEST(PerfRecordTest, OversizedStringsAreCutToFitTheU16Size) {
  Mmap2 m;
  m.filename = std::string(70000, 'f');
  std::string bytes = SerializeRecord(Make(m));
  EXPECT_LE(bytes.size(), 0xfff8u);
  EXPECT_EQ(bytes.size() % 8, 0u);
  Record r = ParseOne(bytes);
  EXPECT_GT(std::get<Mmap2>(r.body).filename.size(), 65000u);

  Comm c{.comm = std::string("a\0b", 3)};  // strings end at their first NUL
  EXPECT_EQ(std::get<Comm>(ParseOne(SerializeRecord(Make(c))).body).comm, "a");
}

TEST(PerfRecordTest, TruncatedInputIsAnErrorForOneRecordAndATailForAStream) {
  std::string one = SerializeRecord(AllKinds()[6]);  // MMAP2
  std::string two = one + SerializeRecord(AllKinds()[1]);
  for (size_t cut = 0; cut < one.size(); ++cut) {
    SCOPED_TRACE(cut);
    auto prefix = Span(one).first(cut);
    EXPECT_THAT(ParseRecord(prefix), HasErrorContaining("truncated"));
    auto stream = ParseRecords(prefix);
    ASSERT_THAT(stream, HasValue());
    EXPECT_TRUE(stream->records.empty());
    EXPECT_EQ(stream->truncated_tail, cut);

    if (cut >= two.size() - one.size()) continue;
    auto longer = ParseRecords(Span(two).first(one.size() + cut));
    ASSERT_THAT(longer, HasValue());
    EXPECT_EQ(longer->records.size(), 1u);
    EXPECT_EQ(longer->truncated_tail, cut);
  }
}

TEST(PerfRecordTest, CorruptRecordsAreRejectedWithTheField) {
  std::string good = SerializeRecord(AllKinds()[1]);  // LOST, 56 bytes

  // Size smaller than header + trailer: corrupt, and the stream error says where.
  Bytes tiny;
  tiny.U32(PERF_RECORD_LOST).U16(0).U16(16).Zeros(8);
  EXPECT_THAT(ParseRecord(Span(tiny.str())), HasErrorContaining("LOST: header size 16"));
  EXPECT_THAT(ParseRecords(Span(good + tiny.str())),
              HasErrorContaining("corrupt perf record at offset 56"));
  Bytes zero;
  zero.Zeros(64);
  EXPECT_THAT(ParseRecords(Span(zero.str())), HasErrorContaining("offset 0"));

  // A body too short for its fixed fields.
  Bytes short_aux;
  short_aux.U32(PERF_RECORD_AUX).U16(0).U16(8 + 16 + 32).U64(1).U64(2).Trailer(0, 0, 0, 0, 0);
  EXPECT_THAT(ParseRecord(Span(short_aux.str())), HasErrorContaining("AUX: flags does not fit"));

  // A filename with no NUL inside the record.
  Bytes no_nul;
  no_nul.U32(PERF_RECORD_MMAP).U16(0).U16(8 + 32 + 8 + 32);
  no_nul.U32(1).U32(1).U64(0).U64(0).U64(0).Str("abcdefgh").Trailer(0, 0, 0, 0, 0);
  EXPECT_THAT(ParseRecord(Span(no_nul.str())),
              HasErrorContaining("MMAP: filename is not NUL-terminated"));

  // build_id_size beyond the 20-byte array.
  Mmap2 m;
  m.build_id = "abc";
  std::string bad_id = SerializeRecord(Make(m));
  bad_id[40] = 21;
  EXPECT_THAT(ParseRecord(Span(bad_id)), HasErrorContaining("build_id_size 21 exceeds 20"));

  // TEXT_POKE lengths beyond the record.
  Record poke = Make(TextPoke{.addr = 1, .old_bytes = "ab", .new_bytes = "cd"});
  std::string bad_poke = SerializeRecord(poke);
  uint16_t huge = 500;
  std::memcpy(bad_poke.data() + 16, &huge, 2);
  EXPECT_THAT(ParseRecord(Span(bad_poke)), HasErrorContaining("TEXT_POKE: old bytes does not fit"));
}

}  // namespace
}  // namespace ptsnap::trace
