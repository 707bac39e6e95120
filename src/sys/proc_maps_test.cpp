#include "sys/proc_maps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/result_matchers.h"

namespace ptsnap::sys {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;

TEST(ParseProcMaps, TypicalLines) {
  auto maps = ParseProcMaps(
      "55d0c0a00000-55d0c0a21000 r-xp 00002000 fe:01 1835033                    /usr/bin/my prog\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7ffd1b9f0000-7ffd1ba11000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f1000000000-7f1000001000 r--s 00001000 08:11 42 /tmp/x (deleted)\n");
  ASSERT_THAT(maps, HasValue());
  ASSERT_EQ(maps->size(), 4u);
  const MapEntry& e = (*maps)[0];
  EXPECT_EQ(e.start, 0x55d0c0a00000u);
  EXPECT_EQ(e.end, 0x55d0c0a21000u);
  EXPECT_TRUE(e.read && e.exec && !e.write && !e.shared);
  EXPECT_EQ(e.offset, 0x2000u);
  EXPECT_EQ(e.dev_major, 0xfeu);
  EXPECT_EQ(e.dev_minor, 1u);
  EXPECT_EQ(e.inode, 1835033u);
  EXPECT_EQ(e.path, "/usr/bin/my prog");
  EXPECT_EQ((*maps)[1].path, "");
  EXPECT_EQ((*maps)[2].path, "[stack]");
  EXPECT_TRUE((*maps)[3].shared);
  EXPECT_TRUE((*maps)[3].deleted);
  EXPECT_EQ((*maps)[3].path, "/tmp/x");
}

TEST(ParseProcMaps, RejectsGarbageWithLineNumber) {
  EXPECT_THAT(ParseProcMaps("00-10 r-xp 0 0:0 0\nnonsense\n"), HasErrorContaining("line 2"));
  EXPECT_THAT(ParseProcMaps("10-00 r-xp 0 0:0 0\n"), HasErrorContaining("address range"));
  EXPECT_THAT(ParseProcMaps("00-10 rwxq 0 0:0 0\n"), HasErrorContaining("permissions"));
  EXPECT_THAT(ParseProcMaps("00-10 r-xp zz 0:0 0\n"), HasErrorContaining("offset"));
  EXPECT_THAT(ParseProcMaps("00-10 r-xp 0 00 0\n"), HasErrorContaining("device"));
  EXPECT_THAT(ParseProcMaps("00-10 r-xp 0 0:0 x\n"), HasErrorContaining("inode"));
}

TEST(ReadProcMaps, SelfHasOurExecutable) {
  auto maps = ReadProcMaps(base::RootPath(), 0);
  ASSERT_THAT(maps, HasValue());
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  std::string self(exe, static_cast<size_t>(n));
  bool found = false;
  for (const MapEntry& e : *maps) found = found || (e.exec && e.path == self);
  EXPECT_TRUE(found) << "no executable mapping of " << self;
}

}  // namespace
}  // namespace ptsnap::sys
