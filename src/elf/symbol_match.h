// Function names as users type them: the one matcher behind `--trigger`,
// `--only-in`, `--filter` and `ptsnap report TRACE FUNC` (docs/recording.md,
// "Naming a function"). Users copy names from `ptsnap report`, perf,
// magic-trace or uftrace, so every spelling those show is accepted:
//
//   risky(int)             the demangled name with its parameters
//   risky, ns::C::method   the demangled name without them
//   _Z5riskyi              the mangled (symbol table) name
//   libc.so.6:malloc       DSO:NAME, the DSO compared by file name (a symbol
//                          whose DSO is unknown matches any)
//   *parse*, std::vector<*>::push_back*
//                          a glob (`*`, `?`, `[...]`; any of `*?[` makes one)
//
// Exact matches win over looser ones: an exact mangled or full demangled
// name, then the name without parameters, then a glob. When nothing
// matches, ClosestNames ranks the nearest names (edit distance) for a "did
// you mean". Pure: no I/O, nothing throws (fuzzed in symbol_match_fuzzer).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.h"

namespace ptsnap::elf {

// One symbol as the matcher sees it.
struct NamedSymbol {
  std::string mangled;    // as in the symbol table; "" when only the shown name is known
  std::string demangled;  // Demangle(mangled), or the name a trace shows
  std::string dso;        // the file holding it (a path or a file name); "" when unknown
};

enum class MatchKind {
  kNone,
  kExact,              // the mangled name or the whole demangled name
  kWithoutParameters,  // the demangled name without its parameter list
  kGlob,               // a glob over either name
};

struct SymbolMatch {
  MatchKind kind = MatchKind::kNone;
  // Indices into the symbols, in their order. Two symbols with the same
  // names are both listed (two static functions, or one function in
  // .symtab and .dynsym): MatchFunctions tells them apart by address.
  std::vector<size_t> indices;
};

// Whether `typed` is a glob (holds `*`, `?` or `[`).
bool IsGlob(std::string_view typed);

// fnmatch-style: `*` any run, `?` one character, `[abc]`, `[a-z]`, `[!a]`.
// An unclosed `[` matches itself.
bool GlobMatch(std::string_view pattern, std::string_view text);

// "ns::C::f(int) const" -> "ns::C::f"; "f(int) [clone .cold]" -> "f"; a
// name without a parameter list is returned whole.
std::string_view WithoutParameters(std::string_view demangled);

// Splits "DSO:NAME" into its two parts; dso is "" when `typed` has no DSO
// part (a `::` is a scope, never a DSO separator).
struct TypedName {
  std::string_view dso;
  std::string_view name;
};
TypedName SplitDso(std::string_view typed);

// The symbols `typed` names, by the rules above: only the best kind found.
SymbolMatch MatchSymbols(std::string_view typed, std::span<const NamedSymbol> symbols);

// How a match is shown: the demangled name, "DSO:NAME" (file name only)
// when the symbol has a DSO and `with_dso`.
std::string DisplayName(const NamedSymbol& s, bool with_dso);

// Up to `limit` distinct shown names nearest to `typed`, nearest first:
// edit distance to the name without parameters or to the mangled name
// (case ignored), a name that contains what was typed counting as close.
// Names too far to be a typo are left out (possibly all of them).
std::vector<std::string> ClosestNames(std::string_view typed, std::span<const NamedSymbol> symbols,
                                      size_t limit = 5);

// "did you mean: a, b, c" or "" for none.
std::string DidYouMean(std::span<const std::string> closest);

// The functions of an ELF image (elf_file.h) as NamedSymbols, demangled,
// one per entry of image.functions (same order), all with `dso`.
std::vector<NamedSymbol> FunctionSymbols(const Image& image, std::string_view dso = "");

// The functions of `image` (the file `dso`, for DSO:NAME) that `typed`
// names, one per address, by address, and when none does the closest names.
struct FunctionMatch {
  MatchKind kind = MatchKind::kNone;
  std::vector<const Function*> functions;
  std::vector<std::string> closest;
};
FunctionMatch MatchFunctions(const Image& image, std::string_view typed, std::string_view dso = "");

// "a(int), b(int)" (at most `limit`, then ", ... (N in all)"): the
// demangled names of matched functions, for messages.
std::string ListFunctions(std::span<const Function* const> functions, size_t limit = 8);

// What the messages say about spellings, e.g. after "check the spelling".
inline constexpr std::string_view kSpellingsHint =
    "names are accepted as report shows them (risky(int)), without parameters (risky), mangled "
    "(_Z5riskyi), as DSO:NAME or as a glob ('*parse*')";

}  // namespace ptsnap::elf
