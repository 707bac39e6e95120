#include "trace/trace_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/file_util.h"
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

  auto records = r->ReadSideband();
  ASSERT_THAT(records, HasValue());
  ASSERT_EQ(records->records.size(), 2u);
  EXPECT_EQ(records->records[0], start);  // sorted by time
  EXPECT_EQ(records->records[1], comm);
  EXPECT_EQ(records->truncated_tail, 0u);
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
    if (state == State::kInterrupted) {
      ASSERT_THAT(data, HasValue());
      EXPECT_EQ(*data, "LISTED");
    } else {
      ASSERT_FALSE(data.has_value());
      EXPECT_THAT(data.error().message(),
                  ::testing::HasSubstr("has 10 bytes but the manifest says 6"));
    }
  }
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

  tmp.Write("v2/manifest.json", "{\"format\": \"ptsnap-trace\", \"version\": 2}");
  EXPECT_THAT(TraceReader::Open(tmp.path() / "v2"),
              HasErrorContaining("manifest.json: unsupported version 2 (this ptsnap reads 1)"));
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

  // A header whose size (16) cannot hold the trailer, followed by non-zero bytes.
  std::string bad("\x01\0\0\0\0\0\x10\0", 8);
  ASSERT_THAT(base::AppendFile(dir / "sideband.data", bad + std::string(40, '\x01')), HasValue());
  EXPECT_THAT(r->ReadSideband(),
              HasErrorContaining("sideband.data: corrupt perf record at offset 0"));
  fs::remove(dir / "sideband.data");
  EXPECT_THAT(r->ReadSideband(), HasErrorContaining("sideband.data is missing"));
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
