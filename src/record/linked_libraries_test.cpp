#include "record/linked_libraries.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "elf/elf_file.h"
#include "record/elf_symbols.h"
#include "tests/support/result_matchers.h"

// A function of this program's own, for the "did you mean" across the
// program and its libraries.
extern "C" [[gnu::noinline, gnu::used]] int linked_libraries_test_own_fn(int x) { return x + 1; }

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `n` bytes of `path` from file offset `offset`.
std::string FileBytes(const std::string& path, uint64_t offset, size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(n, '\0');
  in.read(out.data(), static_cast<std::streamsize>(n));
  return in ? out : "";
}

// The bytes this process runs at libc's gnu_get_libc_version.
std::string RunningBytes(size_t n) {
  const void* fn = ::dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
  return fn != nullptr ? std::string(static_cast<const char*>(fn), n) : "";
}

std::filesystem::path Self() { return std::filesystem::read_symlink("/proc/self/exe"); }

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

// `run` before the program starts (natively and under --emulate): a name
// the program does not define is found in the libraries it links, at the
// file offset whose bytes are the function's code (what the process runs
// once the loader maps it); a name the program defines stays the
// program's (nullopt).
TEST(LinkedLibraries, RunFindsALibraryFunctionAtItsFileOffset) {
  auto image = elf::ReadFunctions(Self());
  ASSERT_THAT(image, HasValue());
  for (const std::string name : {"gnu_get_libc_version", "libc.so.6:gnu_get_libc_version"}) {
    SCOPED_TRACE(name);
    auto t = FindTriggerInLinkedLibraries(*image, Self(), name, 4);
    ASSERT_THAT(t, HasValue());
    ASSERT_TRUE(t->has_value());
    EXPECT_EQ(std::filesystem::path((*t)->path).filename(), "libc.so.6");
    EXPECT_TRUE(std::filesystem::path((*t)->path).is_absolute());
    ASSERT_EQ((*t)->functions.size(), 1u);
    EXPECT_EQ((*t)->functions[0].symbol, "gnu_get_libc_version");
    const std::string code = RunningBytes(16);
    ASSERT_EQ(code.size(), 16u);
    EXPECT_EQ(FileBytes((*t)->path, (*t)->functions[0].offset, 16), code);
  }
  auto own = FindTriggerInLinkedLibraries(*image, Self(), "linked_libraries_test_own_fn", 4);
  ASSERT_THAT(own, HasValue());
  EXPECT_FALSE(own->has_value());
}

// A name nothing defines: one error naming the program and the libraries
// searched, with the closest names of all of them (a library's and the
// program's typos alike).
TEST(LinkedLibraries, AnUnknownNameListsTheClosestAcrossTheProgramAndItsLibraries) {
  auto image = elf::ReadFunctions(Self());
  ASSERT_THAT(image, HasValue());
  auto lib_typo = FindTriggerInLinkedLibraries(*image, Self(), "gnu_get_libc_versoin", 4);
  ASSERT_FALSE(lib_typo);
  EXPECT_EQ(lib_typo.error().kind(), ErrorKind::kTrigger);
  EXPECT_THAT(lib_typo.error().message(),
              HasSubstr("trigger symbol 'gnu_get_libc_versoin' not found: no function of that "
                        "name in " +
                        Self().string() + " nor in the "));
  EXPECT_THAT(lib_typo.error().message(),
              ::testing::ContainsRegex("shared librar(y|ies) it links \\([^)]*libc\\.so\\.6"));
  EXPECT_THAT(lib_typo.error().message(), HasSubstr("did you mean: gnu_get_libc_version"));
  EXPECT_THAT(lib_typo.error().message(), HasSubstr("`--trigger ?` lists the functions"));
  EXPECT_THAT(FindTriggerInLinkedLibraries(*image, Self(), "linked_libraries_test_own_fm", 4),
              HasErrorContaining("did you mean: linked_libraries_test_own_fn"));
  // The check `run` makes before starting the program says the same.
  EXPECT_THAT(CheckTriggerInFile("gnu_get_libc_versoin", Self()),
              HasErrorContaining("did you mean: gnu_get_libc_version"));
}

// Where the trigger goes: `run` (kLinked) arms a library's function at its
// file (address 0: the library is not mapped when the program is stopped
// at its first instruction, so only a uprobe can catch it); attach
// (kMapped) also gets the runtime address, where the process has it.
TEST(LinkedLibraries, ResolveTriggerGivesALibraryFunctionsFileAndOffset) {
  EXPECT_THAT(CheckTriggerInFile("gnu_get_libc_version", Self()), HasValue());
  auto linked = ResolveTrigger("gnu_get_libc_version", ::getpid(), 4, TriggerLibraries::kLinked);
  ASSERT_THAT(linked, HasValue());
  ASSERT_EQ(linked->size(), 1u);
  const TriggerPoint& p = (*linked)[0];
  EXPECT_EQ(p.address, 0u);
  EXPECT_EQ(p.symbol, "gnu_get_libc_version");
  EXPECT_EQ(std::filesystem::path(p.file).filename(), "libc.so.6");
  EXPECT_EQ(FileBytes(p.file, p.file_offset, 16), RunningBytes(16));
  EXPECT_THAT(p.description,
              ::testing::MatchesRegex("gnu_get_libc_version @ libc\\.so\\.6\\+0x[0-9a-f]+ "
                                      "\\(file offset; an entry uprobe\\)"));
  auto mapped = ResolveTrigger("gnu_get_libc_version", ::getpid(), 4, TriggerLibraries::kMapped);
  ASSERT_THAT(mapped, HasValue());
  ASSERT_EQ(mapped->size(), 1u);
  EXPECT_EQ((*mapped)[0].address,
            reinterpret_cast<uint64_t>(::dlsym(RTLD_DEFAULT, "gnu_get_libc_version")));
  EXPECT_EQ((*mapped)[0].file, p.file);
  EXPECT_EQ((*mapped)[0].file_offset, p.file_offset);
  // The executable alone (kNone) does not define it.
  EXPECT_THAT(ResolveTrigger("gnu_get_libc_version", ::getpid()),
              HasErrorContaining("trigger symbol 'gnu_get_libc_version' not found"));
  EXPECT_THAT(ResolveTrigger("gnu_get_libc_versoin", ::getpid(), 4, TriggerLibraries::kMapped),
              HasErrorContaining("shared libraries it maps"));
}

}  // namespace
}  // namespace ptsnap::record
