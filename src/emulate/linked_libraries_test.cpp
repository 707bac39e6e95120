#include "emulate/linked_libraries.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "emulate/plugin_protocol.h"

namespace ptsnap::emulate {
namespace {

using ::testing::ElementsAre;

// What Debian 12's ld.so --list prints for ls, with a library missing and
// a path with a space added.
TEST(LinkedLibraries, ParsesTheLoadersList) {
  const char* out =
      "\tlinux-vdso.so.1 (0x00007fd64b2c5000)\n"
      "\tlibselinux.so.1 => /lib/x86_64-linux-gnu/libselinux.so.1 (0x00007fd64b25b000)\n"
      "\tlibgone.so.2 => not found\n"
      "\tlibc.so.6 => /opt/my libs/libc.so.6 (0x00007fd64b079000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007fd64b2c7000)\n"
      "\tstatically linked\n";
  EXPECT_THAT(ParseLdList(out),
              ElementsAre("/lib/x86_64-linux-gnu/libselinux.so.1", "/opt/my libs/libc.so.6",
                          "/lib64/ld-linux-x86-64.so.2"));
  EXPECT_TRUE(ParseLdList("").empty());
}

TEST(LinkedLibraries, FileOffsetOfALinkTimeAddress) {
  const elf::Segment l[] = {
      {.vaddr = 0, .offset = 0, .filesz = 0x1000, .memsz = 0x1000},
      {.vaddr = 0x2000, .offset = 0x1000, .filesz = 0x800, .memsz = 0x2000, .exec = true}};
  EXPECT_EQ(FileOffsetOf(l, 0x10), 0x10u);
  EXPECT_EQ(FileOffsetOf(l, 0x2010), 0x1010u);
  EXPECT_EQ(FileOffsetOf(l, 0x2900), std::nullopt);  // .bss: no bytes in the file
  EXPECT_EQ(FileOffsetOf(l, 0x1800), std::nullopt);
}

// This test binary links libc: a function only libc defines is found there,
// by name and as FILE:NAME, with its file offset. (Not malloc: in the ASan
// build libasan comes first in the loader's order and defines it, and the
// search rightly names libasan's, the one the program calls.)
TEST(LinkedLibraries, FindsATriggerInTheLibrariesAProgramLinks) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  for (const std::string name : {"gnu_get_libc_version", "libc.so.6:gnu_get_libc_version"}) {
    auto t = FindTriggerInLibraries(self, name, 4);
    ASSERT_TRUE(t) << t.error().ToString();
    ASSERT_TRUE(t->has_value()) << name;
    EXPECT_EQ(std::filesystem::path((*t)->path).filename(), "libc.so.6");
    ASSERT_EQ((*t)->functions.size(), 1u);
    EXPECT_EQ((*t)->functions[0].name, "gnu_get_libc_version");
    EXPECT_NE((*t)->functions[0].offset, 0u);
  }
  auto none = FindTriggerInLibraries(self, "no_such_function_anywhere", 4);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

// A loader that refuses (here /bin/false in its place) is an error naming
// the command and its status (docs/errors.md).
TEST(LinkedLibraries, ALoaderThatFailsIsAnError) {
  auto r = ListLinkedLibraries("/usr/bin/ls", "/bin/false");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "/bin/false --list /usr/bin/ls failed (exit status 1)");
  auto listed = ListLinkedLibraries("/usr/bin/ls", "/lib64/ld-linux-x86-64.so.2");
  ASSERT_TRUE(listed) << listed.error().ToString();
  EXPECT_THAT(*listed, ::testing::Contains(::testing::EndsWith("/libc.so.6")));
}

TEST(LinkedLibraries, LibTriggerArgumentRoundTrips) {
  const FileOffset f{0x2a0f0, "/usr/lib/x86_64-linux-gnu/lib:odd.so"};
  EXPECT_EQ(FormatFileOffsetArg(f), "172272:/usr/lib/x86_64-linux-gnu/lib:odd.so");
  EXPECT_EQ(ParseFileOffsetArg(FormatFileOffsetArg(f)), f);
  EXPECT_EQ(ParseFileOffsetArg("12:"), std::nullopt);
  EXPECT_EQ(ParseFileOffsetArg("x:/lib"), std::nullopt);
  EXPECT_EQ(ParseFileOffsetArg("/lib"), std::nullopt);
}

}  // namespace
}  // namespace ptsnap::emulate
