#include "elf/elf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

extern "C" __attribute__((noinline, used)) int elf_file_test_probe_fn(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x * 5;
}

namespace ptsnap::elf {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::testing::MatchesRegex;

std::string Self() { return *base::ReadFile("/proc/self/exe", size_t{1} << 31); }

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Own binary: the test's own function is in the table with a size, and the
// file and in-memory readers agree.
TEST(ElfFile, ReadsOwnFunctions) {
  auto image = ReadFunctions("/proc/self/exe");
  ASSERT_THAT(image, HasValue());
  const Function* f = FindFunction(*image, "elf_file_test_probe_fn");
  ASSERT_NE(f, nullptr);
  EXPECT_GT(f->size, 0u);
  EXPECT_NE(f->value, 0u);
  EXPECT_EQ(FindFunction(*image, "no_such_function_xyz"), nullptr);
  std::string bytes = Self();
  auto parsed = ParseFunctions(Bytes(bytes));
  ASSERT_THAT(parsed, HasValue());
  EXPECT_EQ(parsed->functions.size(), image->functions.size());
  EXPECT_EQ(parsed->pie, image->pie);
}

TEST(ElfFile, NonElfIsRejectedNamingTheFile) {
  std::string junk = "this is not an ELF file at all";
  EXPECT_THAT(ParseFunctions(Bytes(junk)), HasErrorContaining("not an ELF file"));
  ::ptsnap::testing::TempDir tmp;
  tmp.Write("junk", junk);
  EXPECT_THAT(ReadFunctions(tmp.path() / "junk"),
              HasErrorContaining((tmp.path() / "junk").string() + ": not an ELF file"));
  EXPECT_THAT(ReadFunctions(tmp.path() / "missing"), HasErrorContaining("missing"));
}

// Debian's toolchain always writes a build-id note (sha1: 40 hex digits).
TEST(ElfFile, BuildIdFromBytesAndFromTheFileAgree) {
  std::string bytes = Self();
  const std::string id = ReadBuildId(Bytes(bytes));
  EXPECT_THAT(id, MatchesRegex("[0-9a-f]{40}"));
  EXPECT_EQ(ReadBuildIdOf("/proc/self/exe"), id);
  std::string junk = "not elf";
  EXPECT_EQ(ReadBuildId(Bytes(junk)), "");
  EXPECT_EQ(ReadBuildIdOf("/nonexistent/ptsnap-elf-test"), "");
}

// A stripped file (a Debian package's binary) takes its functions, locals
// included, from its separate debug file: by build-id under a debug
// folder (where -dbgsym packages put it), or by .gnu_debuglink beside it.
TEST(ElfFile, AStrippedFileTakesItsFunctionsFromItsDebugFile) {
  ::ptsnap::testing::TempDir tmp;
  const std::filesystem::path exe = tmp.path() / "prog", dbg = tmp.path() / "prog.debug";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "objcopy --only-keep-debug '" + self + "' '" + dbg.string() +
                          "' && objcopy --strip-all '" + self + "' '" + exe.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::filesystem::path no_dirs[] = {tmp.path() / "no-such-dir"};
  auto stripped = ReadFunctions(exe, no_dirs);
  ASSERT_THAT(stripped, HasValue());
  EXPECT_FALSE(stripped->has_symtab);
  EXPECT_EQ(FindFunction(*stripped, "elf_file_test_probe_fn"), nullptr);  // not exported
  const auto own = ReadFunctions("/proc/self/exe");
  ASSERT_THAT(own, HasValue());
  const uint64_t want = FindFunction(*own, "elf_file_test_probe_fn")->value;

  // By build-id in a debug folder.
  const std::string id = ReadBuildIdOf(exe);
  ASSERT_EQ(id.size(), 40u);
  const std::filesystem::path folder = tmp.path() / "debug";
  std::filesystem::create_directories(folder / ".build-id" / id.substr(0, 2));
  std::filesystem::copy_file(dbg,
                             folder / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug"));
  const std::filesystem::path dirs[] = {folder};
  auto found = ReadFunctions(exe, dirs);
  ASSERT_THAT(found, HasValue());
  EXPECT_TRUE(found->has_symtab);
  EXPECT_EQ(found->pie, own->pie);
  EXPECT_EQ(found->debug_file,
            (folder / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug")).string());
  ASSERT_NE(FindFunction(*found, "elf_file_test_probe_fn"), nullptr);
  EXPECT_EQ(FindFunction(*found, "elf_file_test_probe_fn")->value, want);

  // By .gnu_debuglink, beside the file.
  const std::string link =
      "objcopy --add-gnu-debuglink='" + dbg.string() + "' '" + exe.string() + "'";
  ASSERT_EQ(std::system(link.c_str()), 0) << link;
  found = ReadFunctions(exe, no_dirs);
  ASSERT_THAT(found, HasValue());
  EXPECT_EQ(found->debug_file, dbg.string());
  ASSERT_NE(FindFunction(*found, "elf_file_test_probe_fn"), nullptr);

  // Another build's debug file under that name is not taken: libc's
  // (libc6-dbg, which tools/dev installs), whose build-id differs.
  const std::string libc_id = ReadBuildIdOf("/lib/x86_64-linux-gnu/libc.so.6");
  const std::filesystem::path libc_debug = std::filesystem::path(kSystemDebugDir) / ".build-id" /
                                           libc_id.substr(0, 2) / (libc_id.substr(2) + ".debug");
  ASSERT_TRUE(std::filesystem::is_regular_file(libc_debug))
      << libc_debug << ": install libc6-dbg (tools/dev does)";
  std::filesystem::copy_file(libc_debug, dbg, std::filesystem::copy_options::overwrite_existing);
  found = ReadFunctions(exe, no_dirs);
  ASSERT_THAT(found, HasValue());
  EXPECT_EQ(found->debug_file, "");
  EXPECT_FALSE(found->has_symtab);
  EXPECT_EQ(FindFunction(*found, "elf_file_test_probe_fn"), nullptr);
}

// libc, stripped by Debian, with libc6-dbg's debug file: its static
// functions are named, and every exported one stays (the merge once kept
// views into a vector it then grew).
TEST(ElfFile, DebiansLibcTakesItsStaticFunctionsFromLibc6Dbg) {
  const std::filesystem::path libc = "/lib/x86_64-linux-gnu/libc.so.6";
  const std::filesystem::path nowhere[] = {"/nonexistent-debug-dir"};
  auto exported = ReadFunctions(libc, nowhere);
  ASSERT_THAT(exported, HasValue());
  ASSERT_FALSE(exported->has_symtab) << "Debian's libc is stripped";
  EXPECT_EQ(FindFunction(*exported, "__libc_start_call_main"), nullptr);
  auto all = ReadFunctions(libc);
  ASSERT_THAT(all, HasValue());
  ASSERT_TRUE(all->has_symtab) << "install libc6-dbg (tools/dev does)";
  EXPECT_NE(FindFunction(*all, "__libc_start_call_main"), nullptr);
  EXPECT_GT(all->functions.size(), exported->functions.size());
  for (const Function& f : exported->functions) {
    const bool kept =
        std::any_of(all->functions.begin(), all->functions.end(),
                    [&](const Function& g) { return g.name == f.name && g.value == f.value; });
    EXPECT_TRUE(kept) << f.name;
    if (!kept) break;
  }
}

TEST(ElfFile, DebugFileCandidatesFollowGdbsOrder) {
  const std::filesystem::path dirs[] = {"/d1", "/usr/lib/debug"};
  EXPECT_EQ(DebugFileCandidates("/usr/bin/ls", "abcdef", "ls.debug", dirs),
            (std::vector<std::filesystem::path>{
                "/d1/.build-id/ab/cdef.debug", "/d1/usr/bin/ls.debug", "/d1/ls.debug",
                "/usr/lib/debug/.build-id/ab/cdef.debug", "/usr/lib/debug/usr/bin/ls.debug",
                "/usr/lib/debug/ls.debug", "/usr/bin/ls.debug", "/usr/bin/.debug/ls.debug"}));
  EXPECT_EQ(DebugFileCandidates("/usr/bin/ls", "", "", dirs), std::vector<std::filesystem::path>{});
}

}  // namespace
}  // namespace ptsnap::elf
