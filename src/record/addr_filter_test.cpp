#include "record/addr_filter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ptsnap::record {
namespace {

using ::testing::HasSubstr;

AddrFilter Sym(AddrFilterAction a, std::string sym, uint64_t size = 0, std::string file = "",
               uint32_t index = 0) {
  AddrFilter f;
  f.action = a;
  f.symbol = std::move(sym);
  f.size = size;
  f.file = std::move(file);
  f.index = index;
  return f;
}
AddrFilter Off(AddrFilterAction a, uint64_t offset, uint64_t size, std::string file = "") {
  AddrFilter f;
  f.action = a;
  f.offset = offset;
  f.size = size;
  f.file = std::move(file);
  return f;
}

constexpr auto kFilter = AddrFilterAction::kFilter;
constexpr auto kTraceStop = AddrFilterAction::kTraceStop;

TEST(ParseAddrFilters, ShortFormIsAFilterOfThatFunctionInTheProgram) {
  auto f = ParseAddrFilters("work_a");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, std::vector{Sym(kFilter, "work_a")});
  f = ParseAddrFilters("  handle#2 ");
  ASSERT_TRUE(f);
  EXPECT_EQ(*f, std::vector{Sym(kFilter, "handle", 0, "", 2)});
}

TEST(ParseAddrFilters, PerfSyntaxWithSpacesOrNoneAroundSlashAndAt) {
  auto f = ParseAddrFilters("filter main @ /bin/ls");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, std::vector{Sym(kFilter, "main", 0, "/bin/ls")});
  f = ParseAddrFilters("filter 0x1139/0x2a@/usr/bin/prog");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, std::vector{Off(kFilter, 0x1139, 0x2a, "/usr/bin/prog")});
  f = ParseAddrFilters("filter 4096 / 64 @ ./prog");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, std::vector{Off(kFilter, 4096, 64, "./prog")});
  f = ParseAddrFilters("tracestop work_b/16");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, std::vector{Sym(kTraceStop, "work_b", 16)});
}

TEST(ParseAddrFilters, SeveralSeparatedByCommasOrSpaces) {
  auto f = ParseAddrFilters("filter work_a, tracestop work_b @/x/y");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f, (std::vector{Sym(kFilter, "work_a"), Sym(kTraceStop, "work_b", 0, "/x/y")}));
  f = ParseAddrFilters("filter a filter b,,start c stop 0x10/1");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(*f,
            (std::vector{Sym(kFilter, "a"), Sym(kFilter, "b"), Sym(AddrFilterAction::kStart, "c"),
                         Off(AddrFilterAction::kStop, 0x10, 1)}));
}

TEST(ParseAddrFilters, ErrorsNameTheTextAndTheForm) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"", "it is empty"},
      {"   ", "it is empty"},
      {"trace main", "unknown action 'trace'"},
      {"filter", "needs a function or an offset"},
      {"filter main/", "must be a number"},
      {"filter main/abc", "must be a number, not 'abc'"},
      {"filter main/0", "must not be 0"},
      {"filter main @", "'@' needs a file"},
      {"filter 0x1000", "needs a size"},
      {"0x1000", "a bare number needs an action"},
      {"filter 0x1zz/4", "not a number"},
      {"filter main#0", "SYMBOL#N takes N >= 1"},
      {"main#x", "SYMBOL#N takes N >= 1"},
      {"@/bin/ls", "expected an action"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    auto f = ParseAddrFilters(c.spec);
    ASSERT_FALSE(f);
    EXPECT_THAT(f.error().ToString(), HasSubstr(c.says));
    EXPECT_THAT(f.error().ToString(), HasSubstr("expected ACTION START[/SIZE][@FILE]"));
    EXPECT_EQ(f.error().kind(), ErrorKind::kUsage);
  }
}

// A non-PIE program: text at 0x401000 from file offset 0x1000.
struct FakeObject {
  elf::Image image;
  std::vector<elf::Segment> load;
  FakeObject() {
    image.functions = {{"work_a", 0x401136, 0x40}, {"work_b", 0x401176, 0x30},
                       {"dup", 0x401200, 0x10},    {"dup", 0x401100, 0x8},
                       {"work_a", 0x401136, 0x40},  // .dynsym's copy
                       {"label", 0x401300, 0}};
    load = {{0x400000, 0, 0x600, 0x600, false}, {0x401000, 0x1000, 0x400, 0x400, true}};
  }
  AddrFilterObject Obj() { return {"/p/prog", &image, load}; }
};

TEST(ResolveAddrFilter, SymbolBecomesItsFileOffsetAndSize) {
  FakeObject o;
  auto r = ResolveAddrFilter(Sym(kFilter, "work_a"), o.Obj());
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->path, "/p/prog");
  EXPECT_EQ(r->offset, 0x1136u);
  EXPECT_EQ(r->size, 0x40u);
  EXPECT_EQ(r->what, "work_a");
  r = ResolveAddrFilter(Sym(kTraceStop, "work_b", 8), o.Obj());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size, 8u);
  EXPECT_EQ(r->action, kTraceStop);
  r = ResolveAddrFilter(Off(kFilter, 0x1000, 0x20), o.Obj());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->offset, 0x1000u);
  EXPECT_EQ(r->what, "0x1000/0x20");
}

TEST(ResolveAddrFilter, UnknownSymbolNamesTheFileAndTheFix) {
  FakeObject o;
  auto r = ResolveAddrFilter(Sym(kFilter, "work_c"), o.Obj());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().ToString(), HasSubstr("no function named 'work_c' in /p/prog"));
  EXPECT_THAT(r.error().ToString(), HasSubstr("nm -C /p/prog"));
  // A typo gets the nearest names.
  EXPECT_THAT(ResolveAddrFilter(Sym(kFilter, "work_x"), o.Obj()).error().ToString(),
              HasSubstr("; did you mean: work_a, work_b (check the spelling"));
  AddrFilterObject stripped{"/p/stripped", nullptr, o.load};
  EXPECT_FALSE(ResolveAddrFilter(Sym(kFilter, "work_a"), stripped));
}

TEST(ResolveAddrFilter, AmbiguousSymbolListsTheCandidatesInAddressOrder) {
  FakeObject o;
  auto r = ResolveAddrFilter(Sym(kFilter, "dup"), o.Obj());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().ToString(),
              HasSubstr("'dup' is ambiguous: /p/prog has 2 functions of that name (dup#1 dup at "
                        "0x401100, dup#2 dup at 0x401200); pick one with dup#N"));
  auto second = ResolveAddrFilter(Sym(kFilter, "dup", 0, "", 2), o.Obj());
  ASSERT_TRUE(second) << second.error().ToString();
  EXPECT_EQ(second->offset, 0x1200u);
  EXPECT_EQ(second->what, "dup#2");
  auto third = ResolveAddrFilter(Sym(kFilter, "dup", 0, "", 3), o.Obj());
  ASSERT_FALSE(third);
  EXPECT_THAT(third.error().ToString(), HasSubstr("has only 2 function(s) named 'dup'"));
  // The same function in .symtab and .dynsym is one.
  EXPECT_TRUE(ResolveAddrFilter(Sym(kFilter, "work_a"), o.Obj()));
}

// C++ names as users type them (elf/symbol_match.h); overloads named
// without parameters are told apart with #N like any same-named functions.
TEST(ResolveAddrFilter, CppNamesAsUsersTypeThem) {
  FakeObject o;
  o.image.functions.push_back({"_Z5riskyi", 0x401320, 0x10});
  o.image.functions.push_back({"_Z5riskyd", 0x401340, 0x10});
  for (const char* spelling : {"risky(int)", "_Z5riskyi", "prog:risky(int)"}) {
    auto r = ResolveAddrFilter(Sym(kFilter, spelling), o.Obj());
    ASSERT_TRUE(r) << spelling << ": " << r.error().ToString();
    EXPECT_EQ(r->offset, 0x1320u) << spelling;
  }
  auto both = ResolveAddrFilter(Sym(kFilter, "risky"), o.Obj());
  ASSERT_FALSE(both);
  EXPECT_THAT(both.error().ToString(),
              HasSubstr("(risky#1 risky(int) at 0x401320, risky#2 risky(double) at 0x401340)"));
  auto second = ResolveAddrFilter(Sym(kFilter, "risky", 0, "", 2), o.Obj());
  ASSERT_TRUE(second);
  EXPECT_EQ(second->offset, 0x1340u);
}

TEST(ResolveAddrFilter, SizelessSymbolNeedsASize) {
  FakeObject o;
  auto r = ResolveAddrFilter(Sym(kFilter, "label"), o.Obj());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().ToString(), HasSubstr("'filter label/0x100'"));
  EXPECT_TRUE(ResolveAddrFilter(Sym(kFilter, "label", 16), o.Obj()));
}

ResolvedAddrFilter Range(AddrFilterAction a, uint64_t off, uint64_t size,
                         std::string path = "/p/prog") {
  return {a, std::move(path), off, size, "x"};
}

sys::PmuInfo Pmu(uint64_t ip_filtering, std::optional<uint32_t> nr) {
  sys::PmuInfo p;
  p.present = true;
  p.caps["ip_filtering"] = ip_filtering;
  p.nr_addr_filters = nr;
  return p;
}

TEST(CheckAddrFilterSupport, NeedsIpFilteringAndEnoughRanges) {
  std::vector<ResolvedAddrFilter> two = {Range(kFilter, 0x1000, 0x10),
                                         Range(kTraceStop, 0x2000, 0x10)};
  EXPECT_TRUE(CheckAddrFilterSupport(two, Pmu(1, 2)));
  EXPECT_TRUE(CheckAddrFilterSupport({}, Pmu(0, 0)));  // no filter: nothing to check

  auto none = CheckAddrFilterSupport(two, Pmu(0, 0));
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().ToString(), HasSubstr("caps/ip_filtering is 0 or missing"));
  EXPECT_THAT(none.error().ToString(), HasSubstr("--emulate"));

  auto few = CheckAddrFilterSupport(two, Pmu(1, 1));
  ASSERT_FALSE(few);
  EXPECT_THAT(few.error().ToString(),
              HasSubstr("2 address ranges, but this CPU's Intel PT takes at most 1"));
  EXPECT_THAT(few.error().ToString(), HasSubstr("nr_addr_filters"));

  // Without nr_addr_filters the caps' num_address_ranges counts.
  sys::PmuInfo caps = Pmu(1, std::nullopt);
  caps.caps["num_address_ranges"] = 2;
  EXPECT_TRUE(CheckAddrFilterSupport(two, caps));
}

TEST(CheckAddrFilterSupport, StartAndStopAreRefusedWithTheAlternatives) {
  std::vector<ResolvedAddrFilter> start = {Range(AddrFilterAction::kStart, 0x1000, 1)};
  auto r = CheckAddrFilterSupport(start, Pmu(1, 2));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().ToString(), HasSubstr("Intel PT has no start/stop addresses"));
  EXPECT_THAT(r.error().ToString(), HasSubstr("'tracestop x'"));
  std::vector<ResolvedAddrFilter> stop = {Range(AddrFilterAction::kStop, 0x1000, 1)};
  EXPECT_FALSE(CheckAddrFilterSupport(stop, Pmu(1, 2)));
}

TEST(FormatKernelAddrFilters, KernelSyntaxWithTracestopAsStop) {
  std::vector<ResolvedAddrFilter> f = {Range(kFilter, 0x1136, 0x40),
                                       Range(kTraceStop, 0x2000, 0x10, "/usr/lib/libc.so.6")};
  auto s = FormatKernelAddrFilters(f);
  ASSERT_TRUE(s) << s.error().ToString();
  EXPECT_EQ(*s, "filter 0x1136/0x40@/p/prog,stop 0x2000/0x10@/usr/lib/libc.so.6");
  std::vector<ResolvedAddrFilter> bad = {Range(kFilter, 0, 1, "/a b/prog")};
  EXPECT_FALSE(FormatKernelAddrFilters(bad));
}

}  // namespace
}  // namespace ptsnap::record
