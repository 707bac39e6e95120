#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "base/check.h"
#include "base/file_util.h"
#include "base/mapped_region.h"
#include "base/root_path.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "ptsnap/result.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::base {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

Result<int> Half(int v) {
  if (v % 2 != 0) return Error("odd value " + std::to_string(v));
  return v / 2;
}

Result<int> Quarter(int v) {
  PTSNAP_ASSIGN_OR_RETURN(int h, Half(v));
  PTSNAP_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Result<void> QuarterWithContext(int v) {
  PTSNAP_TRY_CTX(Quarter(v), "quartering " + std::to_string(v));
  return Ok();
}

TEST(ResultTest, PropagatesValuesAndErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ToString(), "odd value 3");
  EXPECT_EQ(Quarter(7).value_or(-1), -1);
}

TEST(ResultTest, ContextChainReadsOutermostFirst) {
  auto r = QuarterWithContext(6);
  ASSERT_FALSE(r);
  r.error().AddContext("outer");
  EXPECT_EQ(r.error().ToString(), "outer: quartering 6: odd value 3");
  EXPECT_THAT(QuarterWithContext(8), HasValue());
}

TEST(ResultTest, ErrnoIsRenderedWithStrerror) {
  Error e = Error::FromErrno("perf_event_open", EACCES);
  EXPECT_EQ(e.errnum(), EACCES);
  EXPECT_EQ(e.ToString(), "perf_event_open: Permission denied");
}

TEST(UniqueFdTest, ClosesOnResetAndMoves) {
  int raw = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(raw, 0);
  {
    UniqueFd a(raw);
    UniqueFd b = std::move(a);
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
  }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);  // closed by b's destructor
  UniqueFd c(::open("/dev/null", O_RDONLY));
  int kept = c.release();
  EXPECT_FALSE(c.valid());
  EXPECT_NE(::fcntl(kept, F_GETFD), -1);  // release did not close
  ::close(kept);
}

TEST(MappedRegionTest, AnonymousIsWritableAndMovable) {
  auto r = MappedRegion::Anonymous(8192);
  ASSERT_THAT(r, HasValue());
  MappedRegion m = std::move(*r);
  m.data()[8191] = std::byte{7};
  MappedRegion n = std::move(m);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(n.size(), 8192u);
  EXPECT_EQ(n.bytes()[8191], std::byte{7});
}

TEST(MappedRegionTest, BadFdReportsErrno) {
  auto r = MappedRegion::Map(4096, PROT_READ, MAP_SHARED, -1, 0);
  EXPECT_THAT(r, HasErrorContaining("mmap of 4096 bytes"));
}

TEST(RootPathTest, ResolvesIntoRoot) {
  EXPECT_EQ(RootPath().Resolve("/proc/kcore"), "/proc/kcore");
  EXPECT_TRUE(RootPath().IsLive());
  RootPath fake("/tmp/tree");
  EXPECT_EQ(fake.Resolve("/sys/bus/x"), "/tmp/tree/sys/bus/x");
  EXPECT_FALSE(fake.IsLive());
}

// Regular files are read at their size, in one piece; files whose size says
// nothing (/proc), pipes and a file read from the middle are read to their end.
TEST(FileUtilTest, ReadFdReadsWholeFilesOfEverySize) {
  TempDir dir;
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 251);
  dir.Write("big", big);
  EXPECT_EQ(*ReadFile(dir.path() / "big"), big);
  EXPECT_EQ(*ReadFile(dir.path() / "big", big.size()), big);
  EXPECT_THAT(ReadFile(dir.path() / "big", big.size() - 1), HasErrorContaining("larger than"));
  dir.Write("empty", "");
  EXPECT_EQ(*ReadFile(dir.path() / "empty"), "");
  EXPECT_THAT(ReadFile("/proc/self/status"), HasValue());
  EXPECT_NE(ReadFile("/proc/self/status")->find("Pid:"), std::string::npos);
  UniqueFd fd(::open((dir.path() / "big").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::lseek(fd.get(), 1000, SEEK_SET), 1000);
  EXPECT_EQ(*ReadFd(fd.get(), big.size(), "big"), big.substr(1000));
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  ASSERT_EQ(::write(w.get(), "abc", 3), 3);
  w.reset();
  EXPECT_EQ(*ReadFd(r.get(), 10, "pipe"), "abc");
}

TEST(FileUtilTest, ReadTrimmedAndAtomicWrite) {
  TempDir dir;
  dir.Write("a/type", "8\n");
  EXPECT_EQ(*ReadFileTrimmed(dir.path() / "a/type"), "8");
  EXPECT_THAT(ReadFile(dir.path() / "missing"), HasErrorContaining("No such file"));
  ASSERT_THAT(WriteFileAtomic(dir.path() / "m.json", "{}", 0600), HasValue());
  EXPECT_EQ(*ReadFile(dir.path() / "m.json"), "{}");
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "m.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A link planted at the temporary name is not written through.
  dir.Write("victim", "keep");
  const auto planted = dir.path() / ("m.json.tmp." + std::to_string(::getpid()));
  std::filesystem::create_symlink(dir.path() / "victim", planted);
  ASSERT_THAT(WriteFileAtomic(dir.path() / "m.json", "{\"a\":1}", 0600), HasValue());
  EXPECT_EQ(*ReadFile(dir.path() / "victim"), "keep");
  EXPECT_EQ(*ReadFile(dir.path() / "m.json"), "{\"a\":1}");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(planted)));
  ASSERT_THAT(AppendFile(dir.path() / "log", "x"), HasValue());
  ASSERT_THAT(AppendFile(dir.path() / "log", "y"), HasValue());
  EXPECT_EQ(*ReadFile(dir.path() / "log"), "xy");
  EXPECT_THAT(ReadFile(dir.path() / "log", 1), HasErrorContaining("larger than 1 bytes"));
  EXPECT_EQ(*ReadFileHead(dir.path() / "log", 1), "x");
  EXPECT_EQ(*ReadFileHead(dir.path() / "log", 64), "xy");
  EXPECT_THAT(ReadFileHead(dir.path() / "missing", 4), HasErrorContaining("No such file"));
  // PATH search as execvp does it: directories and non-executables are
  // passed over.
  dir.Write("a/tool", "#!/bin/sh\n");
  dir.Write("b/tool/x", "");
  dir.Write("c/tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((dir.path() / "c/tool").c_str(), 0755), 0);
  const std::string dirs = (dir.path() / "a").string() + ":" + (dir.path() / "b").string() + ":" +
                           (dir.path() / "c").string();
  EXPECT_EQ(FindInPath(dirs, "tool"), dir.path() / "c/tool");
  EXPECT_EQ(FindInPath(dirs, "missing"), std::nullopt);
}

TEST(FileUtilTest, SudoOwnerNeedsTwoDecimalIdsAndIsNeverRoot) {
  const auto o = ParseSudoOwner("1000", "1001");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->uid, 1000U);
  EXPECT_EQ(o->gid, 1001U);
  EXPECT_FALSE(ParseSudoOwner(nullptr, "1"));
  EXPECT_FALSE(ParseSudoOwner("1", nullptr));
  EXPECT_FALSE(ParseSudoOwner("", "1"));
  EXPECT_FALSE(ParseSudoOwner("0", "0"));  // sudo as root: nothing to give
  EXPECT_FALSE(ParseSudoOwner("-1", "1"));
  EXPECT_FALSE(ParseSudoOwner("12a", "1"));
  EXPECT_FALSE(ParseSudoOwner("4294967295", "1"));  // (uid_t)-1: chown's "unchanged"
  EXPECT_FALSE(ParseSudoOwner("99999999999999999999", "1"));
}

TEST(StringsTest, ParsesStrictly) {
  EXPECT_EQ(ParseUint("42\n"), 42u);
  EXPECT_EQ(ParseUint("0x1f", 0), 31u);
  EXPECT_EQ(ParseUint("1f", 16), 31u);
  EXPECT_FALSE(ParseUint("4 2"));
  EXPECT_FALSE(ParseUint(""));
  EXPECT_FALSE(ParseUint("99999999999999999999999"));
  EXPECT_EQ(ParseInt("-1"), -1);
  EXPECT_FALSE(ParseInt("-"));
  EXPECT_EQ(Split("a::b", ':').size(), 3u);
  auto w = SplitWhitespace("  a \t b  ");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1], "b");
  EXPECT_EQ(Hex(255), "0xff");
  EXPECT_EQ(HexBytes(std::string("\x00\x7f\xab\xff", 4)), "007fabff");
  EXPECT_EQ(HexBytes(""), "");
}

}  // namespace
TEST(StringUtil, FormatDuration) {
  EXPECT_EQ(FormatDuration(640), "640 ns");
  EXPECT_EQ(FormatDuration(812'000), "812.000 us");
  EXPECT_EQ(FormatDuration(5'123'456), "5.123 ms");
  EXPECT_EQ(FormatDuration(2'500'000'000), "2.500 s");
}

TEST(StringUtil, JoinAndSizes) {
  EXPECT_EQ(Join({}), "");
  EXPECT_EQ(Join({"a", "b", "c"}), "a b c");
  EXPECT_EQ(Join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(ExactSize(4u << 20), "4 MiB");
  EXPECT_EQ(ExactSize(3ull << 30), "3 GiB");
  EXPECT_EQ(ExactSize(12 << 10), "12 KiB");
  EXPECT_EQ(ExactSize(12345), "12345 bytes");
  EXPECT_EQ(ApproxSize(12), "12 bytes");
  EXPECT_EQ(ApproxSize(1536), "1536 bytes (1.5 KiB)");
  EXPECT_EQ(ApproxSize(5ull << 30), "5368709120 bytes (5.0 GiB)");
}

// A broken invariant aborts naming where and what; a kept one costs nothing.
TEST(CheckDeathTest, AFailedCheckAbortsWithWhereAndWhat) {
  int calls = 0;
  auto ok = [&] {
    ++calls;
    return 0;
  };
  PTSNAP_CHECK(calls == 0) << "not reached";
  PTSNAP_CHECK_OK(ok());
  EXPECT_EQ(calls, 1);  // the call runs once
  EXPECT_DEATH(PTSNAP_CHECK(calls == 2) << "calls " << calls,
               "base_test.cpp:[0-9]+: check failed: calls == 2: calls 1 \\(a bug in ptsnap");
  EXPECT_DEATH(PTSNAP_CHECK_OK(-7), "check failed: -7 >= 0: status -7");
}

}  // namespace ptsnap::base

namespace ptsnap::base {
namespace {
TEST(ParseDurationNs, UnitsAndFractions) {
  EXPECT_EQ(ParseDurationNs("800ns"), 800u);
  EXPECT_EQ(ParseDurationNs("2.5us"), 2500u);
  EXPECT_EQ(ParseDurationNs("1 ms"), 1000000u);
  EXPECT_EQ(ParseDurationNs("1.5s"), 1500000000u);
  EXPECT_EQ(ParseDurationNs("2m"), 120000000000u);
  EXPECT_EQ(ParseDurationNs("1h"), 3600000000000u);
  EXPECT_EQ(ParseDurationNs("3\xc2\xb5s"), 3000u);
  EXPECT_EQ(ParseDurationNs("0ms"), 0u);
  EXPECT_EQ(ParseDurationNs(" 3 MS "), 3000000u);
  EXPECT_EQ(ParseDurationNs("1.0000000004s"), 1000000000u);   // 9 decimals kept
  EXPECT_EQ(ParseDurationNs("1.5ns"), 2u);                    // to the nearest ns
  EXPECT_EQ(ParseDurationNs("0.123456789h"), 444444440400u);  // exact above a second
  EXPECT_EQ(ParseDurationNs("5", "s"), 5000000000u);          // --duration's bare seconds
  EXPECT_EQ(ParseDurationNs("2.5", "s"), 2500000000u);
  EXPECT_EQ(ParseDurationNs("2ms", "s"), 2000000u);
  for (const char* bad : {"", "5", "ms", "1.2.3ms", "1 parsec", "-1ms", ".ms", "1.ms", "1e3ms",
                          "99999999999h", "99999999999999999999999ms"})
    EXPECT_FALSE(ParseDurationNs(bad)) << bad;
}
// A pipe whose reader is gone (QEMU killed by the Ctrl-C that also reached
// ptsnap): the write fails with EPIPE, and SIGPIPE, whose default action
// would end the process before it wrote its recording, is neither delivered
// nor left pending.
TEST(WriteToPipeTest, AReaderGoneIsEpipeNotSigpipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  struct sigaction dfl = {};
  struct sigaction old = {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
  errno = 0;
  EXPECT_EQ(WriteToPipe(fds[1], "g", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  ::sigaction(SIGPIPE, &old, nullptr);
  ::close(fds[1]);
}
}  // namespace
}  // namespace ptsnap::base
