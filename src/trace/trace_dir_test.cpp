#include "trace/trace_dir.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "base/file_util.h"
#include "base/mapped_region.h"
#include "base/unique_fd.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::trace {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

std::span<const std::byte> Span(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

Record At(uint64_t time, uint64_t id, RecordBody body) {
  Record r;
  r.sample_id.time = time;
  r.sample_id.id = id;
  r.body = std::move(body);
  r.type = std::holds_alternative<Comm>(r.body) ? PERF_RECORD_COMM : PERF_RECORD_ITRACE_START;
  return r;
}

Manifest Initial() {
  Manifest m;
  m.source = Source::kEmulated;
  m.command = {"/bin/true"};
  m.pids = {42};
  return m;
}

// A complete trace at `dir` with streams 0 ("abcd") and 1 ("efgh").
void WriteTwoStreams(const fs::path& dir) {
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  ASSERT_THAT(w->AddStream(Stream{}, Span("abcd")), HasValue());
  ASSERT_THAT(w->AddStream(Stream{}, Span("efgh")), HasValue());
  ASSERT_THAT(w->Finish(), HasValue());
}

mode_t ModeOf(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST(TraceDirTest, UnlistedStreamsAreListedByTheSnapshotThatFollows) {
  // A snapshot's streams, then one manifest write (AddSnapshot) for all.
  TempDir tmp;
  fs::path dir = tmp.path() / "trace";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  ASSERT_THAT(w->AddStreamUnlisted(Stream{.tid = 1, .snapshot = 1}, Span("abcd")), HasValue());
  auto id = w->AddStreamUnlisted(Stream{.tid = 2, .snapshot = 1}, Span("efgh"));
  ASSERT_THAT(id, HasValue());
  EXPECT_EQ(*id, 1u);
  {
    // Written, not yet listed: a crash now leaves a manifest without them.
    EXPECT_TRUE(fs::exists(dir / "pt" / "1.pt"));
    auto r = TraceReader::Open(dir);
    ASSERT_THAT(r, HasValue());
    EXPECT_TRUE(r->manifest().streams.empty());
  }
  ASSERT_THAT(w->AddSnapshot(Snapshot{.seq = 1, .reason = SnapshotReason::kSignal}), HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  ASSERT_EQ(r->manifest().streams.size(), 2u);
  EXPECT_EQ(r->manifest().streams[1].tid, 2);
  EXPECT_EQ(r->manifest().streams[1].size, 4u);
  EXPECT_EQ(r->manifest().snapshots.size(), 1u);
}

TEST(TraceDirTest, WritesAndReadsBackACompleteTrace) {
  TempDir tmp;
  fs::path dir = tmp.path() / "nested" / "trace";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir / "manifest.json"), 0600u);
  {
    // Readable as soon as it is created, in state "recording".
    auto r = TraceReader::Open(dir);
    ASSERT_THAT(r, HasValue());
    EXPECT_EQ(r->manifest().state, State::kRecording);
    EXPECT_TRUE(r->manifest().streams.empty());
  }

  Record comm = At(5, 1, Comm{.pid = 42, .tid = 42, .comm = "true"});
  Record start = At(3, 1, ItraceStart{.pid = 42, .tid = 42});
  std::string sb = SerializeRecord(comm) + SerializeRecord(start);
  ASSERT_THAT(w->AppendSideband(Span(sb)), HasValue());

  std::string pt0(1000, '\x02'), pt1 = "\x82\x02";
  auto id0 = w->AddStream(Stream{.pid = 42, .tid = 42, .snapshot = 1, .wrapped = true}, Span(pt0));
  ASSERT_THAT(id0, HasValue());
  auto id1 = w->AddStream(Stream{.pid = 42, .tid = 43, .snapshot = 1}, Span(pt1));
  ASSERT_THAT(id1, HasValue());
  EXPECT_EQ(*id0, 0u);
  EXPECT_EQ(*id1, 1u);
  ASSERT_THAT(
      w->AddSnapshot(Snapshot{.seq = 1, .reason = SnapshotReason::kExit, .time = 9, .tid = 42}),
      HasValue());
  w->manifest().lost_records = 3;
  ASSERT_THAT(w->Finish(), HasValue());

  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  const Manifest& m = r->manifest();
  EXPECT_EQ(m.state, State::kComplete);
  EXPECT_EQ(m.source, Source::kEmulated);
  EXPECT_EQ(m.lost_records, 3u);
  ASSERT_EQ(m.snapshots.size(), 1u);
  EXPECT_EQ(m.snapshots[0].reason, SnapshotReason::kExit);
  ASSERT_EQ(m.streams.size(), 2u);
  EXPECT_EQ(m.streams[0].file, "pt/0.pt");
  EXPECT_EQ(m.streams[0].size, 1000u);
  EXPECT_TRUE(m.streams[0].wrapped);
  EXPECT_EQ(m.streams[1].file, "pt/1.pt");
  EXPECT_EQ(m.streams[1].tid, 43);
  EXPECT_EQ(ModeOf(dir / "pt/0.pt"), 0600u);

  auto s0 = r->ReadStream(m.streams[0]);
  ASSERT_THAT(s0, HasValue());
  EXPECT_EQ(*s0, pt0);
  auto s1 = r->ReadStream(m.streams[1]);
  ASSERT_THAT(s1, HasValue());
  EXPECT_EQ(*s1, pt1);
  // Mapped for decoding: the same bytes, not copied.
  auto m0 = r->MapStream(m.streams[0]);
  ASSERT_THAT(m0, HasValue());
  EXPECT_TRUE(m0->mapped());
  EXPECT_EQ(m0->view(), pt0);
  auto m1 = r->MapStream(m.streams[1]);
  ASSERT_THAT(m1, HasValue());
  EXPECT_EQ(m1->view(), pt1);
  trace::StreamBytes moved = std::move(*m0);
  EXPECT_EQ(moved.view(), pt0);

  auto records = r->ReadSideband();
  ASSERT_THAT(records, HasValue());
  ASSERT_EQ(records->records.size(), 2u);
  EXPECT_EQ(records->records[0], start);  // sorted by time
  EXPECT_EQ(records->records[1], comm);
  EXPECT_EQ(records->truncated_tail, 0u);
}

// DropBefore (the decode, behind it): a mapping's pages go and read back
// the file's bytes; bytes held in memory are left alone (dropping those
// pages would zero them).
TEST(TraceDirTest, DroppedPagesOfAStreamReadBackTheSameBytes) {
  std::string bytes(5 * 4096 + 100, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  const trace::StreamBytes held(bytes);
  held.DropBefore(3 * 4096);
  EXPECT_EQ(held.view(), bytes);

  TempDir tmp;
  const std::filesystem::path file = tmp.path() / "stream";
  ASSERT_THAT(base::WriteFileAtomic(file, bytes), HasValue());
  base::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  auto region = base::MappedRegion::Map(bytes.size(), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  ASSERT_THAT(region, HasValue());
  const trace::StreamBytes mapped(std::move(*region), bytes.size());
  ASSERT_EQ(mapped.view(), bytes);
  mapped.DropBefore(3 * 4096 + 10);
  mapped.DropBefore(bytes.size() + 4096);  // past the end: up to it
  EXPECT_EQ(mapped.view(), bytes);
}

TEST(TraceDirTest, RefusesToOverwriteAnExistingTrace) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    ASSERT_THAT(w->AppendSideband(Span(SerializeRecord(At(1, 1, ItraceStart{})))), HasValue());
    ASSERT_THAT(w->Finish(), HasValue());
  }
  auto before = base::ReadFile(dir / "manifest.json");
  ASSERT_THAT(before, HasValue());
  EXPECT_THAT(TraceWriter::Create(dir, Initial()),
              HasErrorContaining("already holds a trace (manifest.json exists)"));
  auto after = base::ReadFile(dir / "manifest.json");
  ASSERT_THAT(after, HasValue());
  EXPECT_EQ(*after, *before);
  // The old sideband is untouched too.
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  auto sb = r->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  EXPECT_EQ(sb->records.size(), 1u);
}

TEST(TraceDirTest, ExistingEmptyDirectoryIsUsedAndTightened) {
  TempDir tmp;
  fs::path dir = tmp.Mkdir("out");
  ::chmod(dir.c_str(), 0755);
  ASSERT_THAT(TraceWriter::Create(dir, Initial()), HasValue());
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(TraceDirTest, CreateFailsClearlyWhenThePathIsAFile) {
  TempDir tmp;
  fs::path file = tmp.Write("plain", "x");
  EXPECT_THAT(TraceWriter::Create(file, Initial()),
              HasErrorContaining("plain exists and is not a directory"));
  EXPECT_THAT(
      TraceWriter::Create(file / "sub", Initial()),
      HasErrorContaining("create directory " + (file / "sub").string() + ": Not a directory"));
}

TEST(TraceDirTest, LeftoverSidebandWithoutManifestIsReplaced) {
  TempDir tmp;
  tmp.Write("t/sideband.data", "junk from an attempt that never wrote a manifest", 0644);
  auto w = TraceWriter::Create(tmp.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  EXPECT_EQ(ModeOf(tmp.path() / "t/sideband.data"), 0600u);
  auto r = TraceReader::Open(tmp.path() / "t");
  ASSERT_THAT(r, HasValue());
  auto sb = r->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  EXPECT_TRUE(sb->records.empty());
  EXPECT_EQ(sb->truncated_tail, 0u);
}

// A recording stopped by an error (a full disk) ends "interrupted" and may
// have bytes past the listed size, as a killed one does: only the listed
// bytes are read. A complete trace with extra bytes was changed: refused.
TEST(TraceDirTest, AnInterruptedStreamIsReadUpToItsListedSize) {
  for (State state : {State::kInterrupted, State::kComplete}) {
    TempDir tmp;
    fs::path dir = tmp.path() / "t";
    {
      auto w = TraceWriter::Create(dir, Initial());
      ASSERT_THAT(w, HasValue());
      auto id = w->BeginStream(Stream{.tid = 1});
      ASSERT_THAT(id, HasValue());
      ASSERT_THAT(w->AppendStream(*id, Span("LISTED")), HasValue());
      ASSERT_THAT(w->Finish(state, "write pt/0.pt: No space left on device"), HasValue());
    }
    ASSERT_THAT(base::AppendFile(dir / "pt/0.pt", "torn"), HasValue());
    auto r = TraceReader::Open(dir);
    ASSERT_THAT(r, HasValue());
    auto data = r->ReadStream(r->manifest().streams[0]);
    auto mapped = r->MapStream(r->manifest().streams[0]);
    if (state == State::kInterrupted) {
      ASSERT_THAT(data, HasValue());
      EXPECT_EQ(*data, "LISTED");
      ASSERT_THAT(mapped, HasValue());
      EXPECT_EQ(mapped->view(), "LISTED");
    } else {
      ASSERT_FALSE(data.has_value());
      EXPECT_THAT(data.error().message(),
                  ::testing::HasSubstr("has 10 bytes but the manifest says 6"));
      EXPECT_THAT(mapped, HasErrorContaining("has 10 bytes but the manifest says 6"));
    }
  }
}

// An empty stream (a thread that ran no traced code) has nothing to map.
TEST(TraceDirTest, AnEmptyStreamMapsToNoBytes) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    ASSERT_THAT(w->AddStream(Stream{.tid = 1}, Span("")), HasValue());
    ASSERT_THAT(w->Finish(State::kComplete, ""), HasValue());
  }
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  ASSERT_EQ(r->manifest().streams.size(), 1u);
  auto mapped = r->MapStream(r->manifest().streams[0]);
  ASSERT_THAT(mapped, HasValue());
  EXPECT_FALSE(mapped->mapped());
  EXPECT_TRUE(mapped->view().empty());
}

// A stream that fills whole pages is mapped with a page of zeros after it,
// as a string has its terminator: reading a byte past the end (which no
// decoder should) cannot fault.
TEST(TraceDirTest, AMappedStreamOfWholePagesEndsInReadableZeros) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string bytes(2 * page, '\x55');
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    ASSERT_THAT(w->AddStream(Stream{.tid = 1}, Span(bytes)), HasValue());
    ASSERT_THAT(w->Finish(State::kComplete, ""), HasValue());
  }
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  auto mapped = r->MapStream(r->manifest().streams[0]);
  ASSERT_THAT(mapped, HasValue());
  EXPECT_TRUE(mapped->mapped());
  EXPECT_EQ(mapped->view(), bytes);
  const volatile char* after = mapped->view().data() + bytes.size();
  EXPECT_EQ(after[0], 0);
  EXPECT_EQ(after[page - 1], 0);
}

TEST(TraceDirTest, CrashedRecordingIsReadableWithATornSidebandTail) {
  TempDir tmp;
  fs::path dir = tmp.path() / "crashed";
  std::string first = SerializeRecord(At(20, 1, ItraceStart{.pid = 1, .tid = 1}));
  std::string second = SerializeRecord(At(10, 1, Comm{.pid = 1, .tid = 1, .comm = "a.out"}));
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    ASSERT_THAT(w->AddStream(Stream{.tid = 1}, Span("PTDATA")), HasValue());
    ASSERT_THAT(w->AppendSideband(Span(first + second)), HasValue());
    // The process dies mid-write: half a record, and no Finish().
    ASSERT_THAT(w->AppendSideband(Span(first.substr(0, 21))), HasValue());
  }
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->manifest().state, State::kRecording);
  ASSERT_EQ(r->manifest().streams.size(), 1u);
  auto data = r->ReadStream(r->manifest().streams[0]);
  ASSERT_THAT(data, HasValue());
  EXPECT_EQ(*data, "PTDATA");
  auto sb = r->ReadSideband();
  ASSERT_THAT(sb, HasValue());
  ASSERT_EQ(sb->records.size(), 2u);
  EXPECT_EQ(sb->records[0].sample_id.time, 10u);
  EXPECT_EQ(sb->truncated_tail, 21u);

  // A power loss can leave zero-filled blocks at the end instead.
  ASSERT_THAT(base::WriteFileAtomic(dir / "sideband.data", first + second + std::string(64, '\0')),
              HasValue());
  auto zeroed = r->ReadSideband();
  ASSERT_THAT(zeroed, HasValue());
  EXPECT_EQ(zeroed->records.size(), 2u);
  EXPECT_EQ(zeroed->truncated_tail, 64u);
}

TEST(TraceDirTest, SidebandSortIsStableForEqualTimes) {
  TempDir tmp;
  auto w = TraceWriter::Create(tmp.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  std::string sb;
  for (uint64_t id : {1, 2, 3, 4}) {
    sb += SerializeRecord(At(id == 3 ? 5 : 7, id, ItraceStart{}));
  }
  ASSERT_THAT(w->AppendSideband(Span(sb)), HasValue());
  auto r = TraceReader::Open(w->dir());
  ASSERT_THAT(r, HasValue());
  auto records = r->ReadSideband();
  ASSERT_THAT(records, HasValue());
  std::vector<uint64_t> ids;
  for (const Record& rec : records->records) ids.push_back(rec.sample_id.id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{3, 1, 2, 4}));
}

TEST(TraceDirTest, ReaderErrorsSayWhatIsWrong) {
  TempDir tmp;
  EXPECT_THAT(TraceReader::Open(tmp.path() / "nope"), HasErrorContaining("nope does not exist"));
  tmp.Mkdir("empty");
  EXPECT_THAT(TraceReader::Open(tmp.path() / "empty"),
              HasErrorContaining("empty is not a ptsnap trace directory (no manifest.json)"));
  tmp.Write("file", "x");
  EXPECT_THAT(TraceReader::Open(tmp.path() / "file"),
              HasErrorContaining("is not a ptsnap trace directory"));

  tmp.Write("v3/manifest.json", "{\"format\": \"ptsnap-trace\", \"version\": 3}");
  EXPECT_THAT(
      TraceReader::Open(tmp.path() / "v3"),
      HasErrorContaining("manifest.json: unsupported version 3 (this ptsnap reads 1 and 2)"));
  tmp.Write("junk/manifest.json", "not json");
  EXPECT_THAT(TraceReader::Open(tmp.path() / "junk"),
              HasErrorContaining("manifest.json: not valid JSON"));
}

TEST(TraceDirTest, StreamAndSidebandProblemsNameTheFile) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "t";
  ASSERT_NO_FATAL_FAILURE(WriteTwoStreams(dir));
  fs::remove(dir / "pt/0.pt");
  ASSERT_THAT(base::AppendFile(dir / "pt/1.pt", "more"), HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_THAT(r->ReadStream(r->manifest().streams[0]),
              HasErrorContaining("stream 0 (pt/0.pt) is missing"));
  EXPECT_THAT(r->ReadStream(r->manifest().streams[1]),
              HasErrorContaining("stream 1 (pt/1.pt) has 8 bytes but the manifest says 4"));
  EXPECT_THAT(r->MapStream(r->manifest().streams[0]),
              HasErrorContaining("stream 0 (pt/0.pt) is missing"));
  EXPECT_THAT(r->MapStream(r->manifest().streams[1]),
              HasErrorContaining("stream 1 (pt/1.pt) has 8 bytes but the manifest says 4"));

  // A header whose size (16) cannot hold the trailer, followed by non-zero bytes.
  std::string bad("\x01\0\0\0\0\0\x10\0", 8);
  ASSERT_THAT(base::AppendFile(dir / "sideband.data", bad + std::string(40, '\x01')), HasValue());
  EXPECT_THAT(r->ReadSideband(),
              HasErrorContaining("sideband.data: corrupt perf record at offset 0"));
  fs::remove(dir / "sideband.data");
  EXPECT_THAT(r->ReadSideband(), HasErrorContaining("sideband.data is missing"));
}

// One ring's snapshots stored incrementally (Stream::follows): a ring of
// 8 bytes that was "abcdef" at snapshot 1, "abcdefgh" at 2 (nothing new
// dropped), "cdefghij" at 3 and "ghijklmn" at 4 (the ring wrapped past
// what snapshot 3 stored, but kept everything since). Files: "abcdef",
// "gh", "ij", "klmn". Each stream reads back as the whole ring it saw;
// another thread's whole ring between them is untouched.
void WriteChain(const fs::path& dir, State state = State::kComplete) {
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  ASSERT_THAT(w->AddStream(Stream{.pid = 42, .tid = 1, .snapshot = 1}, Span("abcdef")), HasValue());
  ASSERT_THAT(w->AddStream(Stream{.pid = 42, .tid = 2, .snapshot = 1}, Span("other")), HasValue());
  ASSERT_THAT(
      w->AddStream(Stream{.pid = 42, .tid = 1, .snapshot = 2, .follows = 0, .ring_bytes = 8},
                   Span("gh")),
      HasValue());
  ASSERT_THAT(
      w->AddStream(Stream{.pid = 42, .tid = 1, .snapshot = 3, .follows = 2, .ring_bytes = 8},
                   Span("ij")),
      HasValue());
  ASSERT_THAT(
      w->AddStream(Stream{.pid = 42, .tid = 1, .snapshot = 4, .follows = 3, .ring_bytes = 8},
                   Span("klmn")),
      HasValue());
  ASSERT_THAT(w->Finish(state), HasValue());
}

TEST(TraceDirTest, AStreamThatFollowsAnotherReadsBackAsTheWholeRing) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "t";
  ASSERT_NO_FATAL_FAILURE(WriteChain(dir));
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  const Manifest& m = r->manifest();
  EXPECT_EQ(m.version, kManifestVersionFollows);
  ASSERT_EQ(m.streams.size(), 5u);
  EXPECT_EQ(m.streams[3].follows, std::optional<uint32_t>(2));
  EXPECT_EQ(m.streams[3].size, 2u);
  EXPECT_EQ(ViewedBytes(m.streams[3]), 8u);
  const std::vector<std::string> want = {"abcdef", "other", "abcdefgh", "cdefghij", "ghijklmn"};
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE(k);
    auto read = r->ReadStream(m.streams[k]);
    ASSERT_THAT(read, HasValue());
    EXPECT_EQ(*read, want[k]);
    auto mapped = r->MapStream(m.streams[k], ShortStream::kKeepWhatIsThere);
    ASSERT_THAT(mapped, HasValue());
    EXPECT_EQ(mapped->view(), want[k]);
    EXPECT_EQ(mapped->missing(), 0u);
  }
  // A trace without `follows` stays version 1.
  const fs::path whole = tmp.path() / "whole";
  ASSERT_NO_FATAL_FAILURE(WriteTwoStreams(whole));
  auto plain = TraceReader::Open(whole);
  ASSERT_THAT(plain, HasValue());
  EXPECT_EQ(plain->manifest().version, kManifestVersion);
}

// A piece of a chain gone or changed: the streams that need it fail with
// both names; those that do not (its bytes left their ring) still read.
// The stream's own file cut short decodes up to the cut, as any stream.
TEST(TraceDirTest, ABrokenChainNamesThePieceThatIsGone) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "t";
  ASSERT_NO_FATAL_FAILURE(WriteChain(dir));
  fs::remove(dir / "pt/0.pt");
  ASSERT_THAT(base::WriteFileAtomic(dir / "pt/3.pt", "i", 0600), HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  const Manifest& m = r->manifest();
  EXPECT_THAT(r->ReadStream(m.streams[0]), HasErrorContaining("stream 0 (pt/0.pt) is missing"));
  EXPECT_THAT(r->ReadStream(m.streams[1]), HasValue());
  EXPECT_THAT(r->ReadStream(m.streams[2]),
              HasErrorContaining("stream 2 (pt/2.pt) continues stream 0's bytes: stream 0 "
                                 "(pt/0.pt) is missing: "));
  EXPECT_THAT(r->ReadStream(m.streams[4]),
              HasErrorContaining("stream 4 (pt/4.pt) continues stream 3's bytes: stream 3 "
                                 "(pt/3.pt) has 1 bytes but the manifest says 2"));
  // Only the stream's own file may be cut (its bytes are the view's last).
  EXPECT_THAT(r->MapStream(m.streams[4], ShortStream::kKeepWhatIsThere),
              HasErrorContaining("stream 4 (pt/4.pt) continues stream 3's bytes"));

  // Stream 4 no longer needs stream 0's bytes (its ring dropped them); its
  // own file cut short reads up to the cut, the rest counted missing.
  const fs::path cut = tmp.path() / "cut";
  ASSERT_NO_FATAL_FAILURE(WriteChain(cut));
  fs::remove(cut / "pt/0.pt");
  ASSERT_THAT(base::WriteFileAtomic(cut / "pt/4.pt", "k", 0600), HasValue());
  auto rc = TraceReader::Open(cut);
  ASSERT_THAT(rc, HasValue());
  auto kept = rc->MapStream(rc->manifest().streams[4], ShortStream::kKeepWhatIsThere);
  ASSERT_THAT(kept, HasValue());
  EXPECT_EQ(kept->view(), "ghijk");
  EXPECT_EQ(kept->missing(), 3u);
  EXPECT_THAT(rc->ReadStream(rc->manifest().streams[4]),
              HasErrorContaining("stream 4 (pt/4.pt) has 1 bytes but the manifest says 4"));
}

// A manifest whose ring_bytes reach past the start of the chain is
// inconsistent: an error, not a read before the first file.
TEST(TraceDirTest, AChainShorterThanItsRingIsAnError) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "t";
  ASSERT_NO_FATAL_FAILURE(WriteChain(dir));
  auto text = base::ReadFile(dir / "manifest.json");
  ASSERT_THAT(text, HasValue());
  auto m = ParseManifest(*text);
  ASSERT_THAT(m, HasValue());
  m->streams[2].ring_bytes = 9;
  ASSERT_THAT(base::WriteFileAtomic(dir / "manifest.json", SerializeManifest(*m), 0600),
              HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_THAT(r->ReadStream(r->manifest().streams[2]),
              HasErrorContaining("stream 2 (pt/2.pt): the ring held 9 bytes (ring_bytes), but "
                                 "the streams it continues hold only 8 (the manifest is "
                                 "inconsistent)"));
}

// Traces come from other hosts and users: a stream, sideband or manifest
// that is a symbolic link (to /etc/passwd, or a `pt/` linked elsewhere) is
// refused, not read; a FIFO where a stream belongs is refused at once
// rather than blocking the reader.
TEST(TraceDirTest, LinksAndSpecialFilesInATraceAreRefused) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "t";
  ASSERT_NO_FATAL_FAILURE(WriteTwoStreams(dir));
  ASSERT_THAT(base::WriteFileAtomic(tmp.path() / "secret", "abcd"), HasValue());
  fs::remove(dir / "pt/0.pt");
  fs::create_symlink(tmp.path() / "secret", dir / "pt/0.pt");
  fs::remove(dir / "pt/1.pt");
  ASSERT_EQ(::mkfifo((dir / "pt/1.pt").c_str(), 0600), 0);
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_THAT(r->ReadStream(r->manifest().streams[0]),
              HasErrorContaining("stream 0 (pt/0.pt): " + (dir / "pt/0.pt").string() +
                                 " is a symbolic link: ptsnap reads only a trace directory's "
                                 "own files"));
  EXPECT_THAT(r->ReadStream(r->manifest().streams[1]),
              HasErrorContaining("pt/1.pt is not a regular file"));
  EXPECT_THAT(r->MapStream(r->manifest().streams[0]),
              HasErrorContaining(" is a symbolic link: ptsnap reads only a trace directory's"));
  EXPECT_THAT(r->MapStream(r->manifest().streams[1]),
              HasErrorContaining("pt/1.pt is not a regular file"));

  // The stream directory itself linked elsewhere.
  fs::create_directory(tmp.path() / "elsewhere");
  ASSERT_THAT(base::WriteFileAtomic(tmp.path() / "elsewhere/0.pt", "abcd"), HasValue());
  fs::rename(dir / "pt", dir / "pt.old");
  fs::create_directory_symlink(tmp.path() / "elsewhere", dir / "pt");
  EXPECT_THAT(r->ReadStream(r->manifest().streams[0]),
              HasErrorContaining((dir / "pt").string() + " is a symbolic link"));

  fs::rename(dir / "sideband.data", tmp.path() / "sb");
  fs::create_symlink(tmp.path() / "sb", dir / "sideband.data");
  EXPECT_THAT(r->ReadSideband(), HasErrorContaining("sideband.data is a symbolic link"));

  fs::rename(dir / "manifest.json", tmp.path() / "m.json");
  fs::create_symlink(tmp.path() / "m.json", dir / "manifest.json");
  EXPECT_THAT(TraceReader::Open(dir), HasErrorContaining("manifest.json is a symbolic link"));
  // The directory given by the user may itself be a link: followed.
  fs::remove(dir / "manifest.json");
  fs::rename(tmp.path() / "m.json", dir / "manifest.json");
  fs::create_directory_symlink(dir, tmp.path() / "link");
  EXPECT_THAT(TraceReader::Open(tmp.path() / "link"), HasValue());
}

TEST(TraceDirTest, StreamsGrowAsTheyAreAppendedAndSurviveACrash) {
  TempDir tmp;
  fs::path dir = tmp.path() / "full";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    auto id = w->BeginStream(Stream{.cpu = 2});
    ASSERT_THAT(id, HasValue());
    EXPECT_EQ(ModeOf(dir / "pt/0.pt"), 0600u);
    ASSERT_THAT(w->AppendStream(*id, Span("abc")), HasValue());
    ASSERT_THAT(w->AppendStream(*id, Span("def")), HasValue());
    EXPECT_THAT(w->AppendStream(7, Span("x")), HasErrorContaining("stream 7 is not open"));
    ASSERT_THAT(w->Flush(), HasValue());
    // Appended after the last manifest rewrite, then the recorder dies.
    ASSERT_THAT(w->AppendStream(*id, Span("ghi")), HasValue());
  }
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  ASSERT_EQ(r->manifest().streams.size(), 1u);
  EXPECT_EQ(r->manifest().streams[0].size, 6u);
  EXPECT_EQ(r->manifest().streams[0].cpu, 2);
  auto data = r->ReadStream(r->manifest().streams[0]);
  ASSERT_THAT(data, HasValue());
  EXPECT_EQ(*data, "abcdef");  // what the manifest lists, nothing more
}

// ---- manifest.journal ------------------------------------------------------

// A recording of `snapshots` snapshots of `per_snapshot` streams each.
void RecordSnapshots(TraceWriter& w, uint32_t snapshots, uint32_t per_snapshot) {
  const uint32_t first = w.snapshot_count() + 1;
  for (uint32_t seq = first; seq < first + snapshots; ++seq) {
    for (uint32_t i = 0; i < per_snapshot; ++i) {
      ASSERT_THAT(w.AddStreamUnlisted(
                      Stream{.pid = 42, .tid = static_cast<int32_t>(100 + i), .snapshot = seq},
                      Span("PTDATA")),
                  HasValue());
    }
    ASSERT_THAT(w.AddSnapshot(Snapshot{.seq = seq, .reason = SnapshotReason::kSignal}), HasValue());
  }
}

// Bytes written to manifest.json and manifest.journal by one snapshot of 10
// streams after `listed` + 10 streams (`listed` in the initial manifest, to
// keep the test quick: no files behind them; then a snapshot of 10).
uint64_t SnapshotBytes(const fs::path& dir, uint32_t listed, uint64_t* whole_manifest) {
  Manifest initial = Initial();
  for (uint32_t id = 0; id < listed; ++id) {
    initial.streams.push_back(Stream{.id = id,
                                     .file = "pt/" + std::to_string(id) + ".pt",
                                     .pid = 42,
                                     .tid = static_cast<int32_t>(id),
                                     .snapshot = 1,
                                     .size = 6});
  }
  auto w = TraceWriter::Create(dir, std::move(initial));
  EXPECT_THAT(w, HasValue());
  if (!w) return 0;
  RecordSnapshots(*w, 1, 10);  // the snapshots before: past Create's first manifest
  const uint64_t before = w->manifest_bytes_written();
  RecordSnapshots(*w, 1, 10);
  // What one snapshot cost before the journal: the whole manifest, rewritten.
  // (The writer keeps the lists on disk: read them back.)
  auto r = TraceReader::Open(dir);
  EXPECT_THAT(r, HasValue());
  if (!r) return 0;
  *whole_manifest = SerializeManifest(r->manifest()).size();
  return w->manifest_bytes_written() - before;
}

TEST(TraceDirTest, SnapshotCostDoesNotGrowWithTheStreamsListedBefore) {
  TempDir tmp;
  uint64_t whole_small = 0, whole_large = 0;
  const uint64_t small = SnapshotBytes(tmp.path() / "small", 0, &whole_small);
  const uint64_t large = SnapshotBytes(tmp.path() / "large", 4'990, &whole_large);
  std::printf(
      "bytes written by a snapshot of 10 streams: %llu after 10 streams, %llu after "
      "5,000 (a whole-manifest rewrite: %llu and %llu)\n",
      static_cast<unsigned long long>(small), static_cast<unsigned long long>(large),
      static_cast<unsigned long long>(whole_small), static_cast<unsigned long long>(whole_large));
  EXPECT_GT(small, 0u);
  EXPECT_LT(small, 4096u);
  // The ids have more digits; nothing else differs.
  EXPECT_LE(large, small + 200);
  EXPECT_GT(whole_large, 100 * large);  // what the journal saves
}

TEST(TraceDirTest, CompactionsKeepTheAverageSnapshotCostConstant) {
  // The journal fills and is compacted into manifest.json on the way; the
  // bytes written stay a constant factor of the lines' (a rewrite per
  // snapshot would cost the whole manifest each time). 2,000 streams listed
  // at the start and snapshots with a long detail fill the journal quickly
  // without thousands of stream files to sync.
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  Manifest initial = Initial();
  for (uint32_t id = 0; id < 2'000; ++id)
    initial.streams.push_back(
        Stream{.id = id, .file = "pt/" + std::to_string(id) + ".pt", .tid = 1, .size = 6});
  auto w = TraceWriter::Create(dir, std::move(initial));
  ASSERT_THAT(w, HasValue());
  const uint64_t start = w->manifest_bytes_written();
  const fs::path journal = dir / "manifest.journal";
  uint64_t line_bytes = 0, journal_max = 0, last = 0;
  int compactions = 0;
  constexpr uint32_t kSnapshots = 80;
  for (uint32_t seq = 1; seq <= kSnapshots; ++seq) {
    ASSERT_THAT(w->AddStreamUnlisted(Stream{.tid = 1, .snapshot = seq}, Span("PTDATA")),
                HasValue());
    Snapshot snap{
        .seq = seq, .reason = SnapshotReason::kTrigger, .detail = std::string(16 << 10, 'x')};
    line_bytes += SerializeManifestChange(
                      {.seq = 1, .snapshots = {snap}, .streams = {w->manifest().streams.back()}})
                      .size();
    ASSERT_THAT(w->AddSnapshot(std::move(snap)), HasValue());
    const uint64_t size = fs::exists(journal) ? fs::file_size(journal) : 0;
    if (size < last) ++compactions;
    last = size;
    journal_max = std::max(journal_max, size);
  }
  const uint64_t written = w->manifest_bytes_written() - start;
  const uint64_t manifest = SerializeManifest(w->manifest()).size();
  std::printf(
      "%u snapshots: %llu bytes written per snapshot on average, lines %llu (the "
      "manifest is now %llu), %d compactions\n",
      kSnapshots, static_cast<unsigned long long>(written / kSnapshots),
      static_cast<unsigned long long>(line_bytes / kSnapshots),
      static_cast<unsigned long long>(manifest), compactions);
  EXPECT_GE(compactions, 1);
  EXPECT_LT(written, 4 * line_bytes);
  EXPECT_LT(written / kSnapshots * 10, manifest);
  // The journal never outgrows manifest.json by more than a line.
  EXPECT_LT(journal_max, fs::file_size(dir / "manifest.json") + (20 << 10));
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->manifest().snapshots.size(), kSnapshots);
  EXPECT_EQ(r->manifest().streams.size(), 2'000u + kSnapshots);
}

TEST(TraceDirTest, AKilledRecorderLeavesEverySnapshotReadable) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    RecordSnapshots(*w, 30, 3);
    w->manifest().lost_records = 7;
    ASSERT_THAT(w->Flush(), HasValue());
    // SIGKILL: no Finish. The last changes are only in the journal.
  }
  ASSERT_TRUE(fs::exists(dir / "manifest.journal"));
  auto alone = ParseManifest(*base::ReadFile(dir / "manifest.json"));
  ASSERT_THAT(alone, HasValue());
  EXPECT_LT(alone->snapshots.size(), 30u);
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  const Manifest& m = r->manifest();
  EXPECT_EQ(m.state, State::kRecording);
  ASSERT_EQ(m.snapshots.size(), 30u);
  EXPECT_EQ(m.snapshots[29].seq, 30u);
  ASSERT_EQ(m.streams.size(), 90u);
  EXPECT_EQ(m.streams[89].snapshot, 30u);
  EXPECT_EQ(m.lost_records, 7u);
  for (const Stream& s : m.streams) EXPECT_THAT(r->ReadStream(s), HasValue()) << s.file;
}

TEST(TraceDirTest, FinishLeavesOneCompactManifestAndNoJournal) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  RecordSnapshots(*w, 5, 2);
  ASSERT_TRUE(fs::exists(dir / "manifest.journal"));
  ASSERT_THAT(w->Finish(), HasValue());
  EXPECT_FALSE(fs::exists(dir / "manifest.journal"));
  EXPECT_FALSE(fs::exists(dir / ".reserve"));
  // manifest.json alone says everything (what an older reader reads).
  auto m = ParseManifest(*base::ReadFile(dir / "manifest.json"));
  ASSERT_THAT(m, HasValue());
  EXPECT_EQ(m->state, State::kComplete);
  EXPECT_EQ(m->snapshots.size(), 5u);
  EXPECT_EQ(m->streams.size(), 10u);
  EXPECT_GT(m->journal_seq, 5u);  // Create, five snapshots, Finish
}

TEST(TraceDirTest, CompactionListsEachStreamOnceInOrderWithItsLatestFigures) {
  // The writer keeps only the streams that may grow (full-execution ones)
  // in memory; compacting reads the others back from manifest.json and the
  // journal, and writes the growing ones with their figures of now.
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  Manifest initial = Initial();
  initial.streams.push_back(Stream{.id = 0, .file = "pt/0.pt", .cpu = 0});  // in manifest.json
  auto w = TraceWriter::Create(dir, std::move(initial));
  ASSERT_THAT(w, HasValue());
  ASSERT_THAT(base::WriteFileAtomic(dir / "pt/0.pt", "xyz"), HasValue());
  auto grown = w->BeginStream(Stream{.cpu = 1});  // listed by a journal line
  ASSERT_THAT(grown, HasValue());
  ASSERT_THAT(w->AppendStream(*grown, Span("abc")), HasValue());
  RecordSnapshots(*w, 2, 2);  // streams 2-5, then on disk only
  EXPECT_EQ(w->FindStream(2), nullptr);
  EXPECT_EQ(w->stream_count(), 6u);
  EXPECT_EQ(w->snapshot_count(), 2u);
  ASSERT_THAT(w->AppendStream(*grown, Span("def")), HasValue());
  Stream* first = w->FindStream(0);
  ASSERT_NE(first, nullptr);
  first->size = 3;
  first->truncated = 1;
  first->lost_bytes = 5;
  ASSERT_THAT(w->Finish(), HasValue());
  auto m = ParseManifest(*base::ReadFile(dir / "manifest.json"));
  ASSERT_THAT(m, HasValue());
  ASSERT_EQ(m->streams.size(), 6u);
  for (uint32_t k = 0; k < 6; ++k) EXPECT_EQ(m->streams[k].id, k);
  EXPECT_EQ(m->streams[0].size, 3u);
  EXPECT_EQ(m->streams[0].truncated, 1u);
  EXPECT_EQ(m->streams[0].lost_bytes, 5u);
  EXPECT_EQ(m->streams[1].size, 6u);
  EXPECT_EQ(m->streams[1].cpu, 1);
  EXPECT_EQ(m->streams[5].snapshot, 2u);
  ASSERT_EQ(m->snapshots.size(), 2u);
  EXPECT_EQ(m->snapshots[1].seq, 2u);
  // The text is SerializeManifest's, as if it had been written whole.
  EXPECT_EQ(*base::ReadFile(dir / "manifest.json"), SerializeManifest(*m));
}

TEST(TraceDirTest, JournalLeftByACompactionIsNotCountedTwice) {
  // The compaction renamed the new manifest into place, then the power went
  // before the journal was emptied: its lines are in manifest.json already.
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  RecordSnapshots(*w, 5, 2);
  auto journal = base::ReadFile(dir / "manifest.journal");
  ASSERT_THAT(journal, HasValue());
  ASSERT_THAT(w->Finish(), HasValue());
  ASSERT_THAT(base::WriteFileAtomic(dir / "manifest.journal", *journal), HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->manifest().snapshots.size(), 5u);
  EXPECT_EQ(r->manifest().streams.size(), 10u);
}

TEST(TraceDirTest, ATornLastJournalLineIsIgnored) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    RecordSnapshots(*w, 4, 1);
  }
  const fs::path journal = dir / "manifest.journal";
  auto whole = base::ReadFile(journal);
  ASSERT_THAT(whole, HasValue());
  // Killed mid-append: the next line, without its end.
  const std::string torn = R"({"seq":99,"snapshots":[{"seq":5,"reason":"sig)";
  ASSERT_THAT(base::WriteFileAtomic(journal, *whole + torn), HasValue());
  auto r = TraceReader::Open(dir);
  ASSERT_THAT(r, HasValue());
  EXPECT_EQ(r->manifest().snapshots.size(), 4u);
  EXPECT_EQ(r->manifest().streams.size(), 4u);
  // Zero-filled blocks a power loss left, ended by a newline: as torn.
  ASSERT_THAT(base::WriteFileAtomic(journal, *whole + std::string(100, '\0') + "\n"), HasValue());
  EXPECT_THAT(TraceReader::Open(dir), HasValue());
  // A bad line with lines after it is damage, not a crash: an error naming
  // the file and the line.
  const size_t lines = static_cast<size_t>(std::count(whole->begin(), whole->end(), '\n'));
  ASSERT_THAT(base::WriteFileAtomic(journal, *whole + torn + "\n" + *whole), HasValue());
  EXPECT_THAT(TraceReader::Open(dir),
              HasErrorContaining("manifest.journal: line " + std::to_string(lines + 1) +
                                 ": not valid JSON"));
}

TEST(TraceDirTest, HostileJournalLinesAreRefusedLikeManifestEntries) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  {
    auto w = TraceWriter::Create(dir, Initial());
    ASSERT_THAT(w, HasValue());
    ASSERT_THAT(w->AddStream(Stream{.tid = 1}, Span("abcd")), HasValue());
    ASSERT_THAT(w->Finish(), HasValue());
  }
  auto m = ParseManifest(*base::ReadFile(dir / "manifest.json"));
  ASSERT_THAT(m, HasValue());
  const std::string next = std::to_string(m->journal_seq + 1);
  auto open_with = [&](const std::string& line) {
    EXPECT_THAT(base::WriteFileAtomic(dir / "manifest.journal", line + "\n"), HasValue());
    return TraceReader::Open(dir);
  };
  EXPECT_THAT(
      open_with(R"({"seq":)" + next +
                R"(,"streams":[{"id":5,"file":"../../etc/passwd","size":1}]})"),
      HasErrorContaining("manifest.journal: line 1: field 'streams[0].file': must be a path "
                         "inside the trace directory"));
  EXPECT_THAT(
      open_with(R"({"seq":)" + next + R"(,"streams":[{"id":0,"file":"pt/9.pt","size":1}]})"),
      HasErrorContaining("manifest.journal: line 1: field 'streams[0].id': duplicate "
                         "stream id 0 (streams[0] has it)"));
  EXPECT_THAT(
      open_with(R"({"seq":)" + next + R"(,"streams":[{"id":3,"file":"pt/0.pt","size":1}]})"),
      HasErrorContaining("field 'streams[0].file': file pt/0.pt is listed twice"));
  EXPECT_THAT(open_with(R"({"seq":)" + next + R"(,"sizes":[{"id":8,"size":1}]})"),
              HasErrorContaining("line 1: field 'sizes[0].id': no stream 8 is listed"));
  EXPECT_THAT(open_with(R"({"seq":)" + next + R"(,"set":{"sideband":"/etc/shadow"}})"),
              HasErrorContaining("line 1: set: field 'sideband': must be a path inside"));
  EXPECT_THAT(open_with(R"({"seq":)" + next + R"(,"set":{"streams":[]}})"),
              HasErrorContaining("line 1: field 'set.streams': cannot be set"));
  EXPECT_THAT(
      open_with(R"({"seq":)" + std::to_string(m->journal_seq + 2) + "}"),
      HasErrorContaining("line 1: seq " + std::to_string(m->journal_seq + 2) + " does not follow " +
                         std::to_string(m->journal_seq) + " (a line is missing)"));
  // A size beyond the file is caught where a manifest's is: reading it.
  auto r = open_with(R"({"seq":)" + next + R"(,"sizes":[{"id":0,"size":99}]})");
  ASSERT_THAT(r, HasValue());
  EXPECT_THAT(r->ReadStream(r->manifest().streams[0]),
              HasErrorContaining("has 4 bytes but the manifest says 99"));
}

// JIT maps travel with the trace: the traced processes' /tmp/perf-PID.map
// files as they were when recording ended, under DIR/jit/, owner-only.
TEST(TraceDirTest, CopiesTheJitMapsOfTracedProcesses) {
  TempDir tmp;
  fs::path from = tmp.Mkdir("host-tmp");
  tmp.Write("host-tmp/perf-42.map", "7f0000001000 20 jitted_a\n", 0644);
  tmp.Write("host-tmp/perf-7.map", "7f0000002000 20 not_traced\n", 0644);
  fs::path dir = tmp.path() / "t";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  const int32_t pids[] = {42, 43};  // 43 has no map: skipped
  ASSERT_THAT(w->CopyPerfMaps(pids, from), HasValue());
  ASSERT_THAT(w->Finish(), HasValue());

  EXPECT_EQ(PerfMapPath(dir, 42), dir / "jit" / "perf-42.map");
  auto copy = base::ReadFile(PerfMapPath(dir, 42));
  ASSERT_THAT(copy, HasValue());
  EXPECT_EQ(*copy, "7f0000001000 20 jitted_a\n");
  EXPECT_EQ(ModeOf(dir / "jit"), 0700u);
  EXPECT_EQ(ModeOf(PerfMapPath(dir, 42)), 0600u);
  EXPECT_FALSE(fs::exists(PerfMapPath(dir, 43)));
  EXPECT_FALSE(fs::exists(PerfMapPath(dir, 7)));
  // A copy: later changes on the host do not reach the trace.
  tmp.Write("host-tmp/perf-42.map", "changed\n");
  EXPECT_EQ(*base::ReadFile(PerfMapPath(dir, 42)), "7f0000001000 20 jitted_a\n");
}

TEST(TraceDirTest, NoJitMapsLeaveNoJitDirectory) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  auto w = TraceWriter::Create(dir, Initial());
  ASSERT_THAT(w, HasValue());
  const int32_t pids[] = {42};
  ASSERT_THAT(w->CopyPerfMaps(pids, tmp.Mkdir("empty")), HasValue());
  ASSERT_THAT(w->CopyPerfMaps({}, tmp.path() / "does-not-exist"), HasValue());
  EXPECT_FALSE(fs::exists(dir / "jit"));
}

TEST(TraceDirTest, AnUnreadableJitMapIsAnErrorNamingIt) {
  TempDir tmp;
  tmp.Mkdir("host-tmp/perf-42.map");  // a directory: opens, but read(2) fails
  auto w = TraceWriter::Create(tmp.path() / "t", Initial());
  ASSERT_THAT(w, HasValue());
  const int32_t pids[] = {42};
  EXPECT_THAT(w->CopyPerfMaps(pids, tmp.path() / "host-tmp"), HasErrorContaining("perf-42.map"));
}

}  // namespace
}  // namespace ptsnap::trace
