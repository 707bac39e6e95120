#include "elf/symbol_match.h"
#include "elf/symbol_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ptsnap::elf {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Real mangled names (g++ 12) with c++filt's demangling.
const std::vector<NamedSymbol> kSymbols = {
    {"_Z5riskyi", "risky(int)", "/work/thr"},                                 // 0
    {"_Z5riskyd", "risky(double)", "/work/thr"},                              // 1
    {"main", "main", "/work/thr"},                                            // 2
    {"_ZN2ns5Class6methodEv", "ns::Class::method()", "/work/thr"},            // 3
    {"_ZNK2ns5Class5constfEi", "ns::Class::constf(int) const", "/work/thr"},  // 4
    {"_Z10parse_linePKc", "parse_line(char const*)", "/work/thr"},            // 5
    {"_ZNSt6vectorIiSaIiEE9push_backERKi",
     "std::vector<int, std::allocator<int> >::push_back(int const&)", "/work/thr"},  // 6
    {"malloc", "malloc", "/lib/x86_64-linux-gnu/libc.so.6"},                         // 7
    {"malloc", "malloc", "/work/libmy.so"},                                          // 8
    {"risky", "risky", "/work/libc_style.so"},                                       // 9
};

std::vector<size_t> Match(std::string_view typed) { return MatchSymbols(typed, kSymbols).indices; }

TEST(SymbolMatch, DemangledWithParameters) {
  EXPECT_THAT(Match("risky(int)"), ElementsAre(0));
  EXPECT_EQ(MatchSymbols("risky(int)", kSymbols).kind, MatchKind::kExact);
  EXPECT_THAT(Match("ns::Class::constf(int) const"), ElementsAre(4));
}

TEST(SymbolMatch, Mangled) {
  EXPECT_THAT(Match("_Z5riskyi"), ElementsAre(0));
  EXPECT_EQ(MatchSymbols("_Z5riskyi", kSymbols).kind, MatchKind::kExact);
}

// A trace knows only demangled names: a mangled spelling still finds them.
TEST(SymbolMatch, MangledAgainstDemangledOnly) {
  const std::vector<NamedSymbol> shown = {{"", "risky(int)", ""}, {"", "main", ""}};
  EXPECT_THAT(MatchSymbols("_Z5riskyi", shown).indices, ElementsAre(0));
  // Nor does a DSO part rule out a name whose DSO is unknown.
  EXPECT_THAT(MatchSymbols("thr:risky", shown).indices, ElementsAre(0));
}

TEST(SymbolMatch, WithoutParameters) {
  EXPECT_THAT(Match("ns::Class::method"), ElementsAre(3));
  EXPECT_THAT(Match("ns::Class::constf"), ElementsAre(4));
  EXPECT_EQ(MatchSymbols("ns::Class::method", kSymbols).kind, MatchKind::kWithoutParameters);
  // Both overloads when the exact name is no symbol's.
  const std::vector<NamedSymbol> overloads(kSymbols.begin(), kSymbols.begin() + 3);
  EXPECT_THAT(MatchSymbols("risky", overloads).indices, ElementsAre(0, 1));
}

// An exact name beats a parameterless match: `risky` is a C function of
// libc_style.so as well as the overloads' bare name.
TEST(SymbolMatch, ExactWinsOverLooser) {
  EXPECT_THAT(Match("risky"), ElementsAre(9));
  EXPECT_EQ(MatchSymbols("risky", kSymbols).kind, MatchKind::kExact);
  // And a bare name beats a glob that would take more.
  const std::vector<NamedSymbol> s = {{"", "f(int)", ""}, {"", "f*", ""}, {"", "fg", ""}};
  EXPECT_THAT(MatchSymbols("f*", s).indices, ElementsAre(1));
}

TEST(SymbolMatch, DsoPrefix) {
  EXPECT_THAT(Match("libc.so.6:malloc"), ElementsAre(7));
  EXPECT_THAT(Match("/lib/x86_64-linux-gnu/libc.so.6:malloc"), ElementsAre(7));
  EXPECT_THAT(Match("libmy.so:malloc"), ElementsAre(8));
  EXPECT_THAT(Match("malloc"), ElementsAre(7, 8));
  EXPECT_THAT(Match("thr:risky"), ElementsAre(0, 1));
  EXPECT_THAT(Match("libnone.so:malloc"), IsEmpty());
}

TEST(SymbolMatch, ScopeIsNoDso) {
  EXPECT_EQ(SplitDso("ns::Class::method").dso, "");
  EXPECT_EQ(SplitDso("libc.so.6:malloc").dso, "libc.so.6");
  EXPECT_EQ(SplitDso("libc.so.6:malloc").name, "malloc");
  EXPECT_EQ(SplitDso("thr:ns::f").dso, "thr");
  EXPECT_EQ(SplitDso("thr:ns::f").name, "ns::f");
  EXPECT_EQ(SplitDso("std::vector<a:b>").dso, "");
}

TEST(SymbolMatch, Globs) {
  EXPECT_THAT(Match("*parse*"), ElementsAre(5));
  EXPECT_EQ(MatchSymbols("*parse*", kSymbols).kind, MatchKind::kGlob);
  EXPECT_THAT(Match("std::vector<*>::push_back*"), ElementsAre(6));
  EXPECT_THAT(Match("risky(*)"), ElementsAre(0, 1));
  EXPECT_THAT(Match("ris?y"), ElementsAre(0, 1, 9));
  EXPECT_THAT(Match("_Z5risky[id]"), ElementsAre(0, 1));
  EXPECT_THAT(Match("libc.so.6:m*"), ElementsAre(7));
  EXPECT_THAT(Match("*nothing*"), IsEmpty());
}

// Same names, maybe two functions (static ones of two files): both.
TEST(SymbolMatch, SameNamesTwiceAreBothListed) {
  const std::vector<NamedSymbol> s = {{"_Z1fv", "f()", "a"}, {"_Z1fv", "f()", "a"}};
  EXPECT_THAT(MatchSymbols("f", s).indices, ElementsAre(0, 1));
}

TEST(GlobMatch, Basics) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a*c", "abbbc"));
  EXPECT_FALSE(GlobMatch("a*c", "abbb"));
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_TRUE(GlobMatch("[a-c]x", "bx"));
  EXPECT_FALSE(GlobMatch("[!a-c]x", "bx"));
  EXPECT_TRUE(GlobMatch("operator[]*", "operator[]"));  // `[]` is no class: literal
  EXPECT_TRUE(GlobMatch("a[", "a["));                   // unclosed: literal
  EXPECT_TRUE(GlobMatch("*a*b*c*", "xxaxxbxxcxx"));
}

TEST(WithoutParameters, Shapes) {
  EXPECT_EQ(WithoutParameters("risky(int)"), "risky");
  EXPECT_EQ(WithoutParameters("ns::C::f(int) const"), "ns::C::f");
  EXPECT_EQ(WithoutParameters("f(void (*)(int))"), "f");
  EXPECT_EQ(WithoutParameters("f(int) [clone .cold]"), "f");
  EXPECT_EQ(WithoutParameters("std::function<void ()>::operator()() const"),
            "std::function<void ()>::operator()");
  EXPECT_EQ(WithoutParameters("main"), "main");
  EXPECT_EQ(WithoutParameters("S::g() &&"), "S::g");
}

TEST(ClosestNames, Typos) {
  EXPECT_THAT(ClosestNames("risk", kSymbols), ElementsAre("risky", "risky(int)", "risky(double)"));
  EXPECT_THAT(ClosestNames("riksy", kSymbols, 2), ElementsAre("risky", "risky(int)"));
  EXPECT_THAT(ClosestNames("parse", kSymbols), ElementsAre("parse_line(char const*)"));
  EXPECT_THAT(ClosestNames("zzzzzzzzzz", kSymbols), IsEmpty());
  // With several DSOs the file is shown, so the suggestion can be typed.
  EXPECT_THAT(ClosestNames("maloc", kSymbols), ElementsAre("libmy.so:malloc", "libc.so.6:malloc"));
}

TEST(ClosestNames, DidYouMean) {
  EXPECT_EQ(DidYouMean(ClosestNames("mian", kSymbols)), "did you mean: main");
  EXPECT_EQ(DidYouMean({}), "");
}

TEST(MatchFunctions, OnePerAddressByAddress) {
  Image image;
  image.functions = {{"_Z5riskyd", 0x2000, 8}, {"_Z5riskyi", 0x1000, 8}, {"_Z5riskyi", 0x1000, 8}};
  FunctionMatch m = MatchFunctions(image, "risky");
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_EQ(m.functions[0]->value, 0x1000u);
  EXPECT_EQ(m.functions[1]->value, 0x2000u);
  EXPECT_EQ(ListFunctions(m.functions), "risky(int), risky(double)");
  m = MatchFunctions(image, "rsky");
  EXPECT_THAT(m.functions, IsEmpty());
  EXPECT_THAT(m.closest, ElementsAre("risky(int)", "risky(double)"));
}

}  // namespace
}  // namespace ptsnap::elf

namespace ptsnap::elf {
namespace {

// Several names at one address: the one users type names it (sized,
// current version, exported before local, fewest leading underscores,
// global before weak). libc's `printf` is also `_IO_printf`; report and
// --trigger show and take `printf`.
TEST(SymbolTableAliases, TheNameUsersTypeWins) {
  using B = Symbol::Binding;
  SymbolTable t;
  t.Add(Symbol{0x1000, 16, "_IO_printf"});
  t.Add(Symbol{0x1000, 16, "printf"});
  t.Add(Symbol{0x2000, 16, "__GI___libc_write", false, false, B::kLocal});
  t.Add(Symbol{0x2000, 16, "__write", false, false, B::kWeak});
  t.Add(Symbol{0x2000, 16, "write", false, false, B::kWeak});
  t.Add(Symbol{0x3000, 0, "label"});
  t.Add(Symbol{0x3000, 8, "__sized"});
  t.Add(Symbol{0x4000, 8, "cfree", false, false, B::kGlobal, /*old_version=*/true});
  t.Add(Symbol{0x4000, 8, "__libc_free"});
  t.Add(Symbol{0x5000, 8, "weak_one", false, false, B::kWeak});
  t.Add(Symbol{0x5000, 8, "strong_1"});
  t.Finish();
  EXPECT_EQ(t.Find(0x1004)->name, "printf");
  EXPECT_EQ(t.Find(0x2004)->name, "write");
  EXPECT_EQ(t.Find(0x3004)->name, "__sized");
  EXPECT_EQ(t.Find(0x4004)->name, "__libc_free");
  EXPECT_EQ(t.Find(0x5004)->name, "strong_1");
}

TEST(SymbolTableAliases, DebiansLibcNamesPrintfFreeAndWriteAsUsersTypeThem) {
  auto libc = SymbolFile::Open("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(libc) << libc.error().ToString();
  for (const char* name : {"printf", "free", "malloc", "puts", "write"}) {
    const Symbol* by_name = nullptr;
    for (const Symbol& s : libc->symbols().symbols())
      if (s.name == name) by_name = &s;
    ASSERT_NE(by_name, nullptr) << name << " is not the name of its address";
  }
}

}  // namespace
}  // namespace ptsnap::elf
