#include "elf/elf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace ptsnap::elf
