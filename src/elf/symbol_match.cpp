#include "elf/symbol_match.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "elf/symbol_file.h"

namespace ptsnap::elf {

bool IsGlob(std::string_view typed) { return typed.find_first_of("*?[") != std::string_view::npos; }

namespace {

// A `[...]` class at pattern[p] (p at '['): whether `c` is in it; `end`
// gets the index after ']'. False with end = npos when it is not closed.
bool ClassMatch(std::string_view pattern, size_t p, char c, size_t* end) {
  size_t i = p + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool in = false;
  bool first = true;
  for (; i < pattern.size(); ++i) {
    if (pattern[i] == ']' && !first) {
      *end = i + 1;
      return in != negate;
    }
    first = false;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      if (c >= pattern[i] && c <= pattern[i + 2]) in = true;
      i += 2;
    } else if (pattern[i] == c) {
      in = true;
    }
  }
  *end = std::string_view::npos;
  return false;
}

// The trailing " const", " &", " [clone .cold]"... after a parameter list.
std::string_view TrimQualifiers(std::string_view s) {
  static constexpr std::string_view kSuffixes[] = {" const", " volatile", " &&",
                                                   " &",     " noexcept", " transaction_safe"};
  for (bool again = true; again;) {
    again = false;
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    if (!s.empty() && s.back() == ']') {
      const size_t open = s.rfind(" [");
      if (open != std::string_view::npos) {
        s = s.substr(0, open);
        again = true;
        continue;
      }
    }
    for (std::string_view suffix : kSuffixes) {
      if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
        s.remove_suffix(suffix.size());
        again = true;
      }
    }
  }
  return s;
}

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Levenshtein distance, case ignored, stopping early past `bound`.
size_t EditDistance(std::string_view a, std::string_view b, size_t bound) {
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > bound) return bound + 1;
  std::vector<size_t> row(a.size() + 1);
  for (size_t i = 0; i <= a.size(); ++i) row[i] = i;
  for (size_t j = 1; j <= b.size(); ++j) {
    size_t diag = row[0];
    row[0] = j;
    size_t best = row[0];
    for (size_t i = 1; i <= a.size(); ++i) {
      const size_t up = row[i];
      row[i] = std::min({row[i] + 1, row[i - 1] + 1, diag + (Lower(a[i - 1]) != Lower(b[j - 1]))});
      diag = up;
      best = std::min(best, row[i]);
    }
    if (best > bound) return bound + 1;
  }
  return row[a.size()];
}

bool ContainsIgnoringCase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return false;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                     [](char x, char y) { return Lower(x) == Lower(y); }) != hay.end();
}

std::string_view FileName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative with one backtrack point for the last '*' (as fnmatch without
  // flags; no '/' special case).
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        star = p++;
        star_t = t;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pc == '[') {
        size_t end = 0;
        const bool in = ClassMatch(pattern, p, text[t], &end);
        if (end == std::string_view::npos) {
          if (text[t] == '[') {
            ++p;
            ++t;
            continue;
          }
        } else if (in) {
          p = end;
          ++t;
          continue;
        }
      } else if (pc == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    p = star + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string_view WithoutParameters(std::string_view demangled) {
  const std::string_view s = TrimQualifiers(demangled);
  if (s.empty() || s.back() != ')') return s;
  // The '(' that opens the last parameter list: walk back over nested
  // parentheses ("f(void (*)(int))").
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') {
      ++depth;
    } else if (s[i] == '(' && --depth == 0) {
      return i == 0 ? s : s.substr(0, i);
    }
  }
  return s;
}

TypedName SplitDso(std::string_view typed) {
  for (size_t i = 0; i < typed.size(); ++i) {
    const char c = typed[i];
    if (c == '(' || c == '<' || c == ' ') break;  // past where a file name could end
    if (c != ':') continue;
    if (i + 1 < typed.size() && typed[i + 1] == ':') break;  // a scope: no DSO
    if (i == 0) break;
    return {typed.substr(0, i), typed.substr(i + 1)};
  }
  return {{}, typed};
}

SymbolMatch MatchSymbols(std::string_view typed, std::span<const NamedSymbol> symbols) {
  SymbolMatch out;
  if (typed.empty()) return out;
  const TypedName t = SplitDso(typed);
  const std::string_view name = t.name;
  const std::string typed_demangled = name.substr(0, 2) == "_Z" ? Demangle(name) : std::string();
  const bool glob = IsGlob(name);
  // Best kind first; the first kind with a match is the answer.
  std::vector<size_t> exact, bare, globbed;
  for (size_t i = 0; i < symbols.size(); ++i) {
    const NamedSymbol& s = symbols[i];
    // A symbol whose DSO is unknown (a trace's names) is not ruled out by one.
    if (!t.dso.empty() && !s.dso.empty() && FileName(s.dso) != FileName(t.dso)) continue;
    if (s.mangled == name || s.demangled == name ||
        (!typed_demangled.empty() && typed_demangled != name && s.demangled == typed_demangled)) {
      exact.push_back(i);
    } else if (exact.empty() && WithoutParameters(s.demangled) == name) {
      bare.push_back(i);
    } else if (glob && exact.empty() && bare.empty() &&
               (GlobMatch(name, s.demangled) || GlobMatch(name, WithoutParameters(s.demangled)) ||
                (!s.mangled.empty() && GlobMatch(name, s.mangled)))) {
      globbed.push_back(i);
    }
  }
  std::vector<size_t>* best = !exact.empty() ? &exact : !bare.empty() ? &bare : &globbed;
  out.kind = !exact.empty()     ? MatchKind::kExact
             : !bare.empty()    ? MatchKind::kWithoutParameters
             : !globbed.empty() ? MatchKind::kGlob
                                : MatchKind::kNone;
  out.indices = std::move(*best);
  return out;
}

std::string DisplayName(const NamedSymbol& s, bool with_dso) {
  const std::string& name = s.demangled.empty() ? s.mangled : s.demangled;
  if (!with_dso || s.dso.empty()) return name;
  return std::string(FileName(s.dso)) + ":" + name;
}

std::vector<std::string> ClosestNames(std::string_view typed, std::span<const NamedSymbol> symbols,
                                      size_t limit) {
  const TypedName t = SplitDso(typed);
  std::string_view name = t.name;
  // A glob's literal part is what was meant ("*prase*" -> "prase").
  std::string literal;
  for (char c : name)
    if (c != '*' && c != '?') literal += c;
  name = literal;
  if (name.empty() || limit == 0) return {};
  // A typo is a few edits: about one per three characters typed.
  const size_t bound = std::max<size_t>(2, name.size() / 3);
  // A name in more than one DSO is shown as DSO:NAME, so that what is
  // suggested names one of them.
  std::map<std::string_view, std::string_view> dso_of;
  std::map<std::string_view, bool> in_several;
  for (const NamedSymbol& s : symbols) {
    auto [it, added] = dso_of.emplace(s.demangled, s.dso);
    if (!added && FileName(it->second) != FileName(s.dso)) in_several[s.demangled] = true;
  }
  // Score per shown name: the best over its symbols.
  std::map<std::string, size_t> scores;
  for (const NamedSymbol& s : symbols) {
    const std::string_view bare = WithoutParameters(s.demangled);
    // Leave out names far longer than what was typed before the O(n*m) work.
    size_t d = bound + 1;
    if (ContainsIgnoringCase(bare, name)) {
      d = bare.size() == name.size() ? 0 : 1;
    } else {
      d = std::min(EditDistance(name, bare, bound), d);
      if (!s.mangled.empty()) d = std::min(EditDistance(name, s.mangled, bound), d);
      if (d == 0) d = 1;  // equal but for case
    }
    if (d > bound) continue;
    const std::string shown = DisplayName(s, in_several.count(s.demangled) != 0);
    auto [it, added] = scores.emplace(shown, d);
    if (!added) it->second = std::min(it->second, d);
  }
  std::vector<std::pair<size_t, std::string>> ranked;
  ranked.reserve(scores.size());
  for (auto& [shown, d] : scores) ranked.emplace_back(d, shown);
  // Nearest first, then shorter names, then by name (a stable answer).
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second.size() != b.second.size()) return a.second.size() < b.second.size();
    return a.second < b.second;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < limit; ++i) out.push_back(ranked[i].second);
  return out;
}

std::string DidYouMean(std::span<const std::string> closest) {
  if (closest.empty()) return "";
  std::string out = "did you mean: ";
  for (size_t i = 0; i < closest.size(); ++i) out += (i ? ", " : "") + closest[i];
  return out;
}

std::vector<NamedSymbol> FunctionSymbols(const Image& image, std::string_view dso) {
  std::vector<NamedSymbol> out;
  out.reserve(image.functions.size());
  for (const Function& f : image.functions)
    out.push_back({f.name, Demangle(f.name), std::string(dso)});
  return out;
}

FunctionMatch MatchFunctions(const Image& image, std::string_view typed, std::string_view dso) {
  FunctionMatch out;
  const std::vector<NamedSymbol> symbols = FunctionSymbols(image, dso);
  const SymbolMatch m = MatchSymbols(typed, symbols);
  out.kind = m.kind;
  for (size_t i : m.indices) {
    const Function* f = &image.functions[i];
    // One per address: .symtab and .dynsym (or an alias) name it twice.
    if (std::none_of(out.functions.begin(), out.functions.end(),
                     [&](const Function* g) { return g->value == f->value; }))
      out.functions.push_back(f);
  }
  std::sort(out.functions.begin(), out.functions.end(),
            [](const Function* a, const Function* b) { return a->value < b->value; });
  if (out.functions.empty()) out.closest = ClosestNames(typed, symbols);
  return out;
}

std::string ListFunctions(std::span<const Function* const> functions, size_t limit) {
  std::string out;
  for (size_t i = 0; i < functions.size() && i < limit; ++i)
    out += (i ? ", " : "") + Demangle(functions[i]->name);
  if (functions.size() > limit) out += ", ... (" + std::to_string(functions.size()) + " in all)";
  return out;
}

}  // namespace ptsnap::elf
