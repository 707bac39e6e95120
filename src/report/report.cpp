#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/string_util.h"
#include "output/summary.h"

namespace ptsnap::report {

namespace {

using Path = std::vector<const std::string*>;

bool Slower(const SlowCall& a, const SlowCall& b) {  // min-heap order
  if (a.duration_ns != b.duration_ns) return a.duration_ns > b.duration_ns;
  return a.begin_ns < b.begin_ns;
}

std::string FoldedName(const std::string& name) {
  std::string out = name;
  std::replace(out.begin(), out.end(), ';', ':');
  return out;
}

void SortTree(TreeNode& n) {
  std::sort(n.children.begin(), n.children.end(), [](const TreeNode& a, const TreeNode& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name < b.name;
  });
  for (TreeNode& c : n.children) SortTree(c);
}

}  // namespace

uint64_t SortValue(const FunctionStats& f, SortKey key) {
  switch (key) {
    case SortKey::kTotal: return f.total_ns;
    case SortKey::kSelf: return f.self_ns;
    case SortKey::kCalls: return f.calls;
    case SortKey::kP99: return f.durations.Quantile(0.99);
    case SortKey::kMax: return f.durations.max();
    case SortKey::kName: return 0;
  }
  return 0;
}

std::optional<SortKey> SortKeyFrom(std::string_view s) {
  if (s == "total") return SortKey::kTotal;
  if (s == "self") return SortKey::kSelf;
  if (s == "calls") return SortKey::kCalls;
  if (s == "p99") return SortKey::kP99;
  if (s == "max") return SortKey::kMax;
  if (s == "name") return SortKey::kName;
  return std::nullopt;
}

bool ReportSink::InWindow(const output::Call& c) const {
  const uint64_t origin = origin_.value_or(c.begin);
  // (Frames whose start was not seen begin before the origin: only a
  // --since leaves them out.)
  if (options_.since_ns != 0 && c.begin < origin + options_.since_ns) return false;
  return !options_.until_ns || c.end <= origin + *options_.until_ns;
}

bool ReportSink::IsNamed(const std::string* name) {
  auto it = is_named_.find(name);
  if (it == is_named_.end()) it = is_named_.emplace(name, MatchesAnyLoosely(*name)).first;
  return it->second;
}

void ReportSink::OnEnter(int32_t tid, const std::string* name, uint64_t ts, size_t depth) {
  if (!origin_) origin_ = ts;
  if (options_.callers || options_.callees) {
    ThreadState& t = threads_[tid];
    t.stack.resize(depth);
    const std::string* caller = depth > 0 ? t.stack[depth - 1] : nullptr;
    if (options_.callees && caller != nullptr && IsNamed(caller)) t.edges[{caller, name}].depth++;
    if (options_.callees && depth == 0) {
      // Its caller is not known yet: what the edges to it hold now, to
      // tell the frames of theirs it will enclose.
      t.root_marks.clear();
      for (const auto& [e, time] : t.edges)
        if (e.second == name) t.root_marks.push_back({e.first, time.segment_total});
    }
    t.stack.push_back(name);
  }
  if (options_.slowest == 0 && !options_.by_mark) return;
  if (IsNamed(name)) {
    ThreadState& t = threads_[tid];
    t.captures.push_back({name, depth, ts, t.mark, {}});
  }
}

void ReportSink::AddEdge(std::unordered_map<Edge, EdgeSum, EdgeHash>& to, const std::string* named,
                         const std::string* other, uint64_t calls, uint64_t ns) {
  if (calls == 0 && ns == 0) return;
  EdgeSum& e = to[{named, other}];
  e.calls += calls;
  e.total_ns += ns;
}

void ReportSink::Adopt(ThreadState& t, const std::string* caller) {
  const bool callees = options_.callees && caller != nullptr && IsNamed(caller);
  if (t.inferred) {
    const PendingInferred& p = *t.inferred;
    if (options_.callers && IsNamed(p.name)) AddEdge(callers_, p.name, caller, p.calls, p.total_ns);
    if (callees) {
      // It began at the segment's start, so it encloses the edge's frames
      // that ended before it: only the rest is new time.
      EdgeTime& e = t.edges[{caller, p.name}];
      uint64_t inside = 0;
      for (const auto& [c, ns] : p.inside)
        if (c == caller) inside = ns;
      const uint64_t later = e.segment_total - std::min(e.segment_total, inside);
      AddEdge(callees_, caller, p.name, p.calls, p.window_ns - std::min(p.window_ns, inside));
      e.segment_total = p.dur + later;
    }
    t.inferred.reset();
  }
  auto of = [caller](const Inside& in) {
    for (const auto& [c, ns] : in)
      if (c == caller) return ns;
    return uint64_t{0};
  };
  for (const auto& [name, o] : t.orphans) {
    if (options_.callers && IsNamed(name)) AddEdge(callers_, name, caller, o.calls, o.total_ns);
    if (callees) {
      // No seen frame encloses them; the edge's frames under them are
      // counted already.
      const uint64_t inside = of(o.inside), window_inside = of(o.window_inside);
      t.edges[{caller, name}].segment_total += o.all_ns - std::min(o.all_ns, inside);
      AddEdge(callees_, caller, name, o.calls, o.window_ns - std::min(o.window_ns, window_inside));
    }
  }
  t.orphans.clear();
}

void ReportSink::Connect(ThreadState& t, const output::Call& c, bool in_window) {
  const uint64_t dur = c.end - c.begin;
  const uint64_t calls = in_window && !c.continued ? 1 : 0;
  if (c.inferred) {
    // The caller of what ended with no seen caller since the last one; its
    // own is the next inferred frame to end.
    Adopt(t, c.name);
    PendingInferred p{c.name, calls, in_window ? c.total_ns : 0, in_window ? dur : 0, dur, {}};
    if (options_.callees)
      for (const auto& [e, time] : t.edges)
        if (e.second == c.name) p.inside.push_back({e.first, time.segment_total});
    t.inferred = std::move(p);
    return;
  }
  // A frame OnEnter pushed is on top of the stack; a complete span is not.
  const bool pushed = t.stack.size() > c.depth && t.stack[c.depth] == c.name;
  const std::string* caller =
      c.depth > 0 && c.depth <= t.stack.size() ? t.stack[c.depth - 1] : nullptr;
  t.stack.resize(std::min(t.stack.size(), c.depth));
  if (caller == nullptr) {
    if (!options_.callees && !IsNamed(c.name)) return;
    Orphans& o = t.orphans[c.name];
    o.calls += calls;
    o.total_ns += in_window ? c.total_ns : 0;
    o.window_ns += in_window ? dur : 0;
    o.all_ns += dur;
    if (options_.callees && pushed) {
      auto add = [](Inside& to, const std::string* caller, uint64_t ns) {
        for (auto& [c, v] : to)
          if (c == caller) {
            v += ns;
            return;
          }
        to.push_back({caller, ns});
      };
      for (const auto& [e, time] : t.edges) {
        if (e.second != c.name) continue;
        uint64_t mark = 0;
        for (const auto& [from, ns] : t.root_marks)
          if (from == e.first) mark = ns;
        const uint64_t inside = time.segment_total - std::min(time.segment_total, mark);
        if (inside == 0) continue;
        add(o.inside, e.first, inside);
        if (in_window) add(o.window_inside, e.first, inside);
      }
    }
    return;
  }
  if (options_.callers && in_window && IsNamed(c.name))
    AddEdge(callers_, c.name, caller, calls, c.total_ns);
  if (options_.callees && IsNamed(caller)) {
    EdgeTime& e = t.edges[{caller, c.name}];
    if (pushed && e.depth > 0) --e.depth;
    const bool outermost = e.depth == 0;  // no frame of the edge encloses it
    if (outermost) e.segment_total += dur;
    if (in_window) AddEdge(callees_, caller, c.name, calls, outermost ? dur : 0);
  }
}

std::vector<Neighbours> ReportSink::NeighboursOf(
    const std::unordered_map<Edge, EdgeSum, EdgeHash>& edges) const {
  std::vector<Neighbours> out;
  const std::vector<FunctionStats> named = Named();  // one per FUNC typed, in order
  for (size_t i = 0; i < named.size(); ++i) {
    const FunctionStats& f = named[i];
    const std::vector<std::string> names = ResolveFunctions(options_.functions[i]);
    Neighbours n;
    n.name = f.name;
    n.total_ns = f.total_ns;
    std::map<std::string, EdgeSum> merged;  // names the decode spelled twice fold
    for (const auto& [e, sum] : edges) {
      if (std::find(names.begin(), names.end(), *e.first) == names.end()) continue;
      EdgeSum& to = merged[e.second != nullptr ? *e.second : std::string("(root)")];
      to.calls += sum.calls;
      to.total_ns += sum.total_ns;
    }
    for (const auto& [name, sum] : merged) n.rows.push_back({name, sum.calls, sum.total_ns});
    std::sort(n.rows.begin(), n.rows.end(), [](const auto& a, const auto& b) {
      if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
      if (a.calls != b.calls) return a.calls > b.calls;
      return a.name < b.name;
    });
    out.push_back(std::move(n));
  }
  return out;
}

void ReportSink::OnMark(int32_t tid, std::string_view text, uint64_t /*ts*/) {
  if (options_.slowest != 0 || options_.by_mark) threads_[tid].mark = text;
}

bool ReportSink::MatchesAnyLoosely(const std::string& name) const {
  // Any kind of match: whether a better one elsewhere in the trace wins is
  // known only at the end (Resolve), so captures may hold a few extra.
  const elf::NamedSymbol one[] = {{"", name, ""}};
  return std::any_of(options_.functions.begin(), options_.functions.end(),
                     [&](const std::string& typed) {
                       return elf::MatchSymbols(typed, one).kind != elf::MatchKind::kNone;
                     });
}

std::vector<elf::NamedSymbol> ReportSink::Names(std::vector<std::string>* shown) const {
  // Sorted, so that matches come in one order: by shown name.
  std::map<std::string_view, const FunctionStats*> seen;
  for (const auto& [k, v] : stats_) seen.emplace(v.name, &v);
  std::vector<elf::NamedSymbol> out;
  out.reserve(seen.size());
  for (const auto& [name, f] : seen) {
    out.push_back({"", f->function, f->dso});
    if (shown != nullptr) shown->emplace_back(name);
  }
  return out;
}

std::vector<std::string> ReportSink::Resolve(const std::string& typed) const {
  std::vector<std::string> shown;
  const std::vector<elf::NamedSymbol> names = Names(&shown);
  std::vector<std::string> out;
  for (size_t i : elf::MatchSymbols(typed, names).indices) out.push_back(shown[i]);
  return out;
}

std::vector<std::string> ReportSink::ResolveFunctions(const std::string& typed) const {
  const std::vector<elf::NamedSymbol> names = Names();
  std::vector<std::string> out;
  for (size_t i : elf::MatchSymbols(typed, names).indices)
    if (std::find(out.begin(), out.end(), names[i].demangled) == out.end())
      out.push_back(names[i].demangled);
  return out;
}

std::string ReportSink::TriggerNamed(const std::string& typed) const {
  const auto names = [](std::string_view a, std::string_view b) {
    return a == b || elf::WithoutParameters(a) == elf::WithoutParameters(b) ||
           (elf::IsGlob(a) && elf::GlobMatch(a, b));
  };
  for (const std::string& t : options_.triggers)
    if (names(t, typed) || names(typed, t)) return t;
  return "";
}

std::vector<std::string> ReportSink::Closest(const std::string& typed) const {
  return elf::ClosestNames(typed, Names());
}

std::vector<const MarkGroup*> ReportSink::ByMark() const {
  std::vector<const MarkGroup*> out;
  for (const std::string& typed : options_.functions)
    for (const std::string& name : ResolveFunctions(typed))
      for (const MarkGroup& g : by_mark_)
        if (g.name == name) out.push_back(&g);
  return out;
}

void ReportSink::Captured(ThreadState& t, const output::Call& c) {
  if (t.captures.empty() || c.inferred) return;
  const Capture& top = t.captures.back();
  if (c.cut) {
    // Its end was not seen: no slow call (nor are the captures below it,
    // which the decode error cuts too).
    if (c.name == top.name && c.depth == top.depth) t.captures.pop_back();
    return;
  }
  if (c.name == top.name && c.depth == top.depth && options_.by_mark) {
    auto [g, added] = by_mark_index_.try_emplace({*c.name, top.mark}, by_mark_.size());
    if (added) by_mark_.push_back({*c.name, top.mark, {}});
    by_mark_[g->second].durations.Add(c.end - c.begin);
  }
  if (options_.slowest == 0) {  // by_mark only: no trees
    if (c.name == top.name && c.depth == top.depth) t.captures.pop_back();
    return;
  }
  if (c.name == top.name && c.depth == top.depth) {
    SlowCall s;
    s.name = *c.name;
    s.pid = c.pid;
    s.tid = c.tid;
    s.begin_ns = c.begin;
    s.duration_ns = c.end - c.begin;
    s.mark = top.mark;
    for (const auto& [path, v] : top.tree) {
      TreeNode* n = &s.tree;
      for (const std::string* p : path) {
        auto child = std::find_if(n->children.begin(), n->children.end(),
                                  [&](const TreeNode& x) { return x.name == *p; });
        if (child == n->children.end()) {
          n->children.push_back({*p, 0, 0, {}});
          child = n->children.end() - 1;
        }
        n = &*child;
      }
      n->calls += v.first;
      n->total_ns += v.second;
    }
    SortTree(s.tree);
    std::vector<SlowCall>& heap = slowest_[s.name];
    heap.push_back(std::move(s));
    std::push_heap(heap.begin(), heap.end(), Slower);
    if (heap.size() > options_.slowest) {
      std::pop_heap(heap.begin(), heap.end(), Slower);
      heap.pop_back();
    }
    t.captures.pop_back();
    // It is also a callee of the captures below it (recursion).
  }
  // A callee of every open capture it lies deep enough in.
  const Path open = OpenFrames(c.tid);
  for (Capture& cap : t.captures) {
    if (c.depth <= cap.depth || c.depth > cap.depth + options_.tree_depth) continue;
    Path path(open.begin() + static_cast<std::ptrdiff_t>(cap.depth) + 1,
              open.begin() + static_cast<std::ptrdiff_t>(std::min(c.depth, open.size())));
    path.push_back(c.name);
    auto& v = cap.tree[path];
    v.first += 1;
    v.second += c.end - c.begin;
  }
}

void ReportSink::Fold(ThreadState& t, const output::Call& c) {
  if (c.inferred) {
    // It encloses everything this segment left without a seen parent:
    // every stack so far, since inferred frames are the lowest.
    std::map<Path, Weight> prefixed;
    for (auto& [path, w] : t.pending) {
      Path p;
      p.reserve(path.size() + 1);
      p.push_back(c.name);
      p.insert(p.end(), path.begin(), path.end());
      Weight& to = prefixed[std::move(p)];
      to.calls += w.calls;
      to.self_ns += w.self_ns;
    }
    t.pending = std::move(prefixed);
    Weight& own = t.pending[Path{c.name}];
    own.calls++;
    own.self_ns += c.self_ns;
    return;
  }
  Path path = OpenFrames(c.tid);
  path.push_back(c.name);
  Weight& w = t.pending[std::move(path)];
  w.calls++;
  w.self_ns += c.self_ns;
}

void ReportSink::OnSegmentEnd(int32_t tid) {
  ThreadState& t = threads_[tid];
  for (const auto& [path, w] : t.pending) {
    std::vector<std::string> names;
    names.reserve(path.size());
    for (const std::string* p : path) names.push_back(*p);
    Weight& to = stacks_[std::move(names)];
    to.calls += w.calls;
    to.self_ns += w.self_ns;
  }
  t.pending.clear();
  t.captures.clear();  // frames never seen ending are not slow calls we can time
  if (options_.callers || options_.callees) {
    Adopt(t, nullptr);  // the segment's outermost frames have no caller
    t.edges.clear();
    t.stack.clear();
  }
}

void ReportSink::OnCall(const output::Call& c) {
  if (!origin_) origin_ = c.begin;
  check_.OnCall(c);
  ThreadState& t = threads_[c.tid];
  const bool in_window = InWindow(c);
  if (options_.callers || options_.callees) Connect(t, c, in_window);
  if (!in_window) {
    ++outside_window_;
    if (!t.captures.empty()) Captured(t, c);  // keep the capture stack in step
    return;
  }
  FunctionStats& f = stats_[{c.name, c.dso, options_.per_thread ? c.tid : 0}];
  if (f.name.empty()) {
    f.name = f.function = *c.name;
    if (c.dso != nullptr) f.dso = std::filesystem::path(*c.dso).filename().string();
    f.tid = options_.per_thread ? c.tid : 0;
  }
  // The rest of a call a decode error cut is that call: its time, no call.
  if (!c.continued) ++f.calls;
  f.self_ns += c.self_ns;
  traced_ns_ += c.self_ns;
  f.total_ns += c.total_ns;  // recursion counted once (Call::total_ns)
  if (c.cut && !c.continued) ++f.cut;
  if (c.inferred && !c.continued) ++f.unseen_start;
  if (!c.inferred && !c.cut) f.durations.Add(c.end - c.begin);
  if (options_.folded) Fold(t, c);
  if (!t.captures.empty()) Captured(t, c);
}

void ReportSink::NameRowsByFile() {
  std::map<std::string_view, std::set<std::string_view>> files;  // function -> its files
  for (const auto& [k, v] : stats_)
    if (!v.dso.empty()) files[v.function].insert(v.dso);
  for (auto& [k, v] : stats_)
    if (!v.dso.empty() && files[v.function].size() > 1) v.name = v.dso + ":" + v.function;
}

Result<void> ReportSink::Finish() {
  EndAllSegments();
  NameRowsByFile();
  if (options_.callers) callers_rows_ = NeighboursOf(callers_);
  if (options_.callees) callees_rows_ = NeighboursOf(callees_);
  return Ok();
}

std::vector<const FunctionStats*> ReportSink::Functions(SortKey key, size_t limit) const {
  std::vector<const FunctionStats*> all;
  all.reserve(stats_.size());
  for (const auto& [k, v] : stats_) all.push_back(&v);
  std::sort(all.begin(), all.end(), [key](const FunctionStats* a, const FunctionStats* b) {
    if (key != SortKey::kName) {
      const uint64_t va = SortValue(*a, key), vb = SortValue(*b, key);
      if (va != vb) return va > vb;
    }
    if (a->name != b->name) return a->name < b->name;
    return a->tid < b->tid;
  });
  if (limit != 0 && all.size() > limit) all.resize(limit);
  return all;
}

std::vector<FunctionStats> ReportSink::Named() const {
  std::vector<FunctionStats> out;
  for (const std::string& typed : options_.functions) {
    // One entry per FUNC typed, over every function it names (several: a
    // name without parameters of overloads, a glob), so that --diff pairs
    // them up; its name says which.
    const std::vector<std::string> names = Resolve(typed);
    FunctionStats merged;
    merged.name = names.empty() ? typed : names.front();
    if (names.size() > 1) merged.name = typed + " [" + base::Join(names, ", ") + "]";
    for (const auto& [k, v] : stats_) {
      if (std::find(names.begin(), names.end(), v.name) == names.end()) continue;
      merged.calls += v.calls;
      merged.total_ns += v.total_ns;
      merged.self_ns += v.self_ns;
      merged.unseen_start += v.unseen_start;
      merged.cut += v.cut;
      merged.durations.Merge(v.durations);
    }
    out.push_back(std::move(merged));
  }
  return out;
}

std::vector<SlowCall> ReportSink::Slowest() const {
  std::vector<SlowCall> out;
  for (const std::string& typed : options_.functions) {
    for (const std::string& name : ResolveFunctions(typed)) {
      auto it = slowest_.find(name);
      if (it == slowest_.end()) continue;
      std::vector<SlowCall> calls = it->second;
      std::sort(calls.begin(), calls.end(), Slower);
      out.insert(out.end(), calls.begin(), calls.end());
    }
  }
  return out;
}

std::map<std::string, uint64_t> ReportSink::FoldedLines() const {
  // Lines, not stacks: names that differ only in ';' and ':' fold together.
  std::map<std::string, uint64_t> lines;
  for (const auto& [stack, w] : stacks_) {
    if (w.self_ns == 0) continue;
    std::string line;
    for (const std::string& p : stack) {
      if (!line.empty()) line += ';';
      line += FoldedName(p);
    }
    lines[line] += w.self_ns;
  }
  return lines;
}

std::string ReportSink::FoldedStacks() const {
  std::string out;
  for (const auto& [line, ns] : FoldedLines()) out += line + " " + std::to_string(ns) + "\n";
  return out;
}

std::vector<StackSample> ReportSink::Stacks() const {
  std::vector<StackSample> out;
  out.reserve(stacks_.size());
  for (const auto& [stack, w] : stacks_) out.push_back({stack, w.calls, w.self_ns});
  return out;
}

namespace {

// Whether the '<' at `i` belongs to an operator's name (operator<,
// operator<<, operator<=, operator<=>), not a template argument list.
bool OperatorLess(std::string_view s, size_t i) {
  constexpr std::string_view kOp = "operator";
  size_t j = i;
  while (j > 0 && s[j - 1] == '<') --j;
  return j >= kOp.size() && s.substr(j - kOp.size(), kOp.size()) == kOp;
}

}  // namespace

std::string ShortName(std::string_view name, size_t width) {
  std::string s(name);
  while (s.size() > width) {
    // The deepest bracketed list not yet "...", the last of them.
    std::vector<size_t> open;
    size_t best_depth = 0, best_open = 0, best_close = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '(' || (c == '<' && !OperatorLess(s, i))) {
        open.push_back(i);
      } else if ((c == ')' || (c == '>' && (i == 0 || s[i - 1] != '-'))) && !open.empty()) {
        const size_t o = open.back();
        if ((s[o] == '(') != (c == ')')) continue;  // '>' of an operator: not a list's end
        open.pop_back();
        const std::string_view inner(s.data() + o + 1, i - o - 1);
        if (inner.size() <= 3) continue;  // "...", or as short: nothing to gain
        if (open.size() + 1 >= best_depth) {
          best_depth = open.size() + 1;
          best_open = o;
          best_close = i;
        }
      }
    }
    if (best_depth == 0) break;
    s.replace(best_open + 1, best_close - best_open - 1, "...");
  }
  if (s.size() > width && width >= 5) {
    const size_t head = (width - 3) / 2, tail = width - 3 - head;
    s = s.substr(0, head) + "..." + s.substr(s.size() - tail);
  }
  return s;
}

namespace {

// `part` as a percentage of `whole`, one decimal ("-" when whole is 0).
std::string Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

// JSON's percentage: two decimals.
double PercentJson(uint64_t part, uint64_t whole) {
  if (whole == 0) return 0;
  return std::round(10000.0 * static_cast<double>(part) / static_cast<double>(whole)) / 100;
}

std::string Row(const FunctionStats& f, bool per_thread, size_t width, bool full_names,
                uint64_t traced_ns) {
  char buf[512];
  const auto& d = f.durations;
  auto dur = [](uint64_t ns) { return output::FormatDuration(ns); };
  // No call of it began and ended in the trace (each began before it, or a
  // decode error cut it): its durations are unknown, not 0 ns.
  auto call = [&d](uint64_t ns) { return d.count() == 0 ? "-" : output::FormatDuration(ns); };
  std::string name = full_names ? f.name : ShortName(f.name, width);
  if (name.size() < width) name.append(width - name.size(), ' ');
  std::string tid = per_thread ? std::to_string(f.tid) : "";
  std::snprintf(buf, sizeof buf, " %8s %9llu %12s %7s %12s %7s %12s %12s %12s %12s %12s\n",
                tid.c_str(), static_cast<unsigned long long>(f.calls), dur(f.total_ns).c_str(),
                Percent(f.total_ns, traced_ns).c_str(), dur(f.self_ns).c_str(),
                Percent(f.self_ns, traced_ns).c_str(), call(d.min()).c_str(),
                call(d.Quantile(0.5)).c_str(), call(d.Quantile(0.9)).c_str(),
                call(d.Quantile(0.99)).c_str(), call(d.max()).c_str());
  return name + buf;
}

std::string Histogram(const FunctionStats& f) {
  std::string out;
  const auto rows = f.durations.Octaves();
  uint64_t peak = 0;
  for (const auto& [k, n] : rows) peak = std::max(peak, n);
  for (const auto& [k, n] : rows) {
    const auto [lo, hi] = DurationHistogram::OctaveRange(k);
    const size_t bar = peak == 0 ? 0 : static_cast<size_t>((n * 50 + peak - 1) / peak);
    char buf[160];
    std::snprintf(buf, sizeof buf, "  [%11s, %11s) %-50s %llu\n",
                  output::FormatDuration(lo).c_str(), output::FormatDuration(hi).c_str(),
                  std::string(bar, '#').c_str(), static_cast<unsigned long long>(n));
    out += buf;
  }
  return out;
}

void Tree(const TreeNode& n, int indent, std::string* out) {
  for (const TreeNode& c : n.children) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%*s%-*s %7llu calls %12s\n", indent, "",
                  std::max(1, 44 - indent), c.name.c_str(),
                  static_cast<unsigned long long>(c.calls),
                  output::FormatDuration(c.total_ns).c_str());
    *out += buf;
    Tree(c, indent + 2, out);
  }
}

nlohmann::json StatsJson(const FunctionStats& f, bool per_thread, uint64_t traced_ns) {
  const auto& d = f.durations;
  nlohmann::json j = {{"name", f.name},
                      {"calls", f.calls},
                      {"total_ns", f.total_ns},
                      {"total_pct", PercentJson(f.total_ns, traced_ns)},
                      {"self_ns", f.self_ns},
                      {"self_pct", PercentJson(f.self_ns, traced_ns)},
                      {"unseen_start", f.unseen_start},
                      {"cut", f.cut},
                      {"min_ns", d.min()},
                      {"p50_ns", d.Quantile(0.5)},
                      {"p90_ns", d.Quantile(0.9)},
                      {"p99_ns", d.Quantile(0.99)},
                      {"max_ns", d.max()}};
  // Unknown, as in the text's dashes: no whole call.
  if (d.count() == 0)
    for (const char* k : {"min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"}) j[k] = nullptr;
  if (per_thread) j["tid"] = f.tid;
  return j;
}

nlohmann::json TreeJson(const TreeNode& n) {
  nlohmann::json children = nlohmann::json::array();
  for (const TreeNode& c : n.children)
    children.push_back({{"name", c.name},
                        {"calls", c.calls},
                        {"total_ns", c.total_ns},
                        {"children", TreeJson(c)}});
  return children;
}

// "Callers of NAME" / "Callees of NAME" tables.
std::string NeighbourText(const std::vector<Neighbours>& all, bool callers, bool full_names) {
  std::string out;
  for (const Neighbours& n : all) {
    out += std::string("\n") + (callers ? "Callers of " : "Callees of ") + n.name + " (total " +
           output::FormatDuration(n.total_ns) + "; share: of that total";
    out += callers
               ? ", a recursive call's time counted with its outermost call's caller):\n"
               : ", a callee's frames inside its own frames under " + n.name + " counted once):\n";
    if (n.rows.empty()) {
      out += callers ? "  (no calls)\n" : "  (no callees)\n";
      continue;
    }
    size_t width = 40;
    if (full_names)
      for (const auto& row : n.rows) width = std::max(width, row.name.size());
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %-*s %9s %12s %7s\n", static_cast<int>(width),
                  callers ? "caller" : "callee", "calls", "total", "share");
    out += buf;
    for (const auto& row : n.rows) {
      const std::string name = full_names ? row.name : ShortName(row.name, width);
      std::snprintf(buf, sizeof buf, "  %-*s %9llu %12s %7s\n", static_cast<int>(width),
                    name.c_str(), static_cast<unsigned long long>(row.calls),
                    output::FormatDuration(row.total_ns).c_str(),
                    Percent(row.total_ns, n.total_ns).c_str());
      out += buf;
    }
  }
  return out;
}

nlohmann::json NeighbourJson(const std::vector<Neighbours>& all, const char* key) {
  nlohmann::json out = nlohmann::json::array();
  for (const Neighbours& n : all) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : n.rows)
      rows.push_back({{"name", row.name},
                      {"calls", row.calls},
                      {"total_ns", row.total_ns},
                      {"share_pct", PercentJson(row.total_ns, n.total_ns)}});
    out.push_back({{"name", n.name}, {"total_ns", n.total_ns}, {key, std::move(rows)}});
  }
  return out;
}

}  // namespace

std::string FormatText(const ReportSink& r, SortKey key, size_t limit, bool full_names) {
  std::string out;
  const uint64_t span = r.last_ns() >= r.first_ns() ? r.last_ns() - r.first_ns() : 0;
  const ReportOptions& o = r.options();
  // A sampled trace's frames are runs of samples: "spans", never "calls".
  const char* calls = o.sampled ? "spans" : "calls";
  out += "Trace span " + output::FormatDuration(span) + ", " + std::to_string(r.threads()) +
         " thread(s), " + std::to_string(r.slices()) + " " + calls;
  if (r.outside_window() != 0)
    out += " (" + std::to_string(r.outside_window()) + " outside --since/--until)";
  out += ". Durations: p50/p90/p99 within 3.1%; total is inclusive, recursion counted once.\n";
  if (!o.clock.empty() && !o.sampled) out += "Clock: " + o.clock + ".\n";
  if (o.sampled)
    out += "Sampled trace" +
           (o.sample_period_ns != 0
                ? " (one sample every " + output::FormatDuration(o.sample_period_ns) + ")"
                : std::string()) +
           ": a span is a run of consecutive samples that show the function on the stack, not "
           "a call (two calls seen in consecutive samples are one span, a call shorter than a "
           "sample may not show); each edge is known to within one sample period, so times "
           "are estimates, on the wall clock (a thread descheduled between two samples adds "
           "that time).\n";
  out += "total% and self%: of " + output::FormatDuration(r.traced_ns()) +
         ", the time some frame was on a thread's stack, summed over the threads (every "
         "function's self time added up).\n\n";
  auto rows = r.Functions(key, limit);
  // The functions FUNC names, when --limit left them out: their rows after
  // the others (a new user expected `report TRACE loop_body` to show it).
  size_t past_limit = rows.size();
  if (limit != 0 && !r.options().functions.empty()) {
    std::set<std::string> named;
    for (const std::string& typed : r.options().functions)
      for (std::string& n : r.Resolve(typed)) named.insert(std::move(n));
    for (const FunctionStats* f : r.Functions(key, 0))
      if (named.count(f->name) != 0 && std::find(rows.begin(), rows.end(), f) == rows.end())
        rows.push_back(f);
  }
  const bool per_thread = r.per_thread();
  size_t width = 40;
  if (full_names)
    for (const FunctionStats* f : rows) width = std::max(width, f->name.size());
  char head[512];
  std::snprintf(head, sizeof head, " %8s %9s %12s %7s %12s %7s %12s %12s %12s %12s %12s\n",
                per_thread ? "thread" : "", calls, "total", "total%", "self", "self%", "min", "p50",
                "p90", "p99", "max");
  out += "function" + std::string(width - 8, ' ') + head;
  bool shortened = false, pseudo = false;
  uint64_t unseen = 0, cut = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const FunctionStats* f = rows[i];
    if (i == past_limit) out += "(past --limit " + std::to_string(limit) + ", named:)\n";
    out += Row(*f, per_thread, width, full_names, r.traced_ns());
    shortened |= !full_names && f->name.size() > width;
    pseudo |= f->function == "[untraced]" || f->function == "[syscall]";
    unseen += f->unseen_start;
    cut += f->cut;
  }
  if (shortened) out += "(names shortened to fit: --full-names prints them whole)\n";
  // Not functions: a new user had to guess (#41's no-docs session).
  if (pseudo) out += std::string("(") + kPseudoFramesNote + ")\n";
  if (unseen != 0)
    out += "(" + std::to_string(unseen) +
           " of these calls began before the trace did: counted in calls, total and self, not in "
           "the durations; '-': no call of the function began and ended in the trace)\n";
  if (cut != 0)
    out += "(" + std::to_string(cut) +
           " of these calls were cut by decode errors (damaged or undecodable PT): counted once "
           "in calls, and in total and self for the time decoded, not in the durations)\n";
  if (const std::string imp = output::FormatImplausible(r.implausible()); !imp.empty())
    out += "\n" + imp;
  for (const FunctionStats& f : r.Named()) {
    out += "\n" + f.name + ": " + std::to_string(f.calls) + " " + calls;
    if (f.calls == 0) {
      if (const std::string t = r.TriggerNamed(f.name); !t.empty()) {
        out += " (not in this trace: --trigger " + t +
               " took a snapshot when it was called, so the trace ends at that call's first "
               "instruction; --slower-than DURATION takes the snapshot when the call returns, "
               "with the call in it)\n";
        continue;
      }
      out += " (not in this trace)\n";
      if (const std::string d = elf::DidYouMean(r.Closest(f.name)); !d.empty())
        out += "  " + d + " (" + std::string(elf::kSpellingsHint) + ")\n";
      continue;
    }
    out += ", durations:\n" + Histogram(f);
  }
  std::string last;
  int rank = 0;
  for (const SlowCall& s : r.Slowest()) {
    if (s.name != last) {
      out += "\nSlowest calls of " + s.name + ":\n";
      last = s.name;
      rank = 0;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "%3d. %s at +%s, thread %d%s\n", ++rank,
                  output::FormatDuration(s.duration_ns).c_str(),
                  output::FormatDuration(s.begin_ns - r.first_ns()).c_str(), s.tid,
                  s.mark.empty() ? "" : (", mark " + s.mark).c_str());
    out += buf;
    Tree(s.tree, 6, &out);
  }
  last.clear();
  for (const MarkGroup* g : r.ByMark()) {
    if (g->name != last) {
      out += "\n" + g->name + " by the mark in force at each call's start:\n";
      out +=
          "  mark                                    calls        p50        p90        p99"
          "        max\n";
      last = g->name;
    }
    const DurationHistogram& d = g->durations;
    char buf[256];
    std::snprintf(
        buf, sizeof buf, "  %-36s %9llu %10s %10s %10s %10s\n",
        g->mark.empty() ? "(before the first mark)" : g->mark.c_str(),
        static_cast<unsigned long long>(d.count()), output::FormatDuration(d.Quantile(0.5)).c_str(),
        output::FormatDuration(d.Quantile(0.9)).c_str(),
        output::FormatDuration(d.Quantile(0.99)).c_str(), output::FormatDuration(d.max()).c_str());
    out += buf;
  }
  out += NeighbourText(r.Callers(), true, full_names);
  out += NeighbourText(r.Callees(), false, full_names);
  return out;
}

std::string FormatJson(const ReportSink& r, SortKey key, size_t limit) {
  nlohmann::json j;
  j["span_ns"] = r.last_ns() >= r.first_ns() ? r.last_ns() - r.first_ns() : 0;
  j["traced_ns"] = r.traced_ns();
  if (!r.options().clock.empty()) j["clock"] = r.options().clock;
  // Sampled: "calls" count spans of consecutive samples (FormatText says so).
  if (r.options().sampled) j["sampled"] = {{"period_ns", r.options().sample_period_ns}};
  j["threads"] = r.threads();
  j["calls"] = r.slices();
  j["outside_window"] = r.outside_window();
  nlohmann::json fns = nlohmann::json::array();
  const auto rows = r.Functions(key, limit);
  const bool per_thread = r.per_thread();
  for (const FunctionStats* f : rows) fns.push_back(StatsJson(*f, per_thread, r.traced_ns()));
  j["functions"] = std::move(fns);
  nlohmann::json slow = nlohmann::json::array();
  for (const SlowCall& s : r.Slowest())
    slow.push_back({{"name", s.name},
                    {"pid", s.pid},
                    {"tid", s.tid},
                    {"begin_ns", s.begin_ns},
                    {"offset_ns", s.begin_ns - r.first_ns()},
                    {"duration_ns", s.duration_ns},
                    {"mark", s.mark.empty() ? nlohmann::json() : nlohmann::json(s.mark)},
                    {"callees", TreeJson(s.tree)}});
  j["slowest"] = std::move(slow);
  nlohmann::json marks = nlohmann::json::array();
  for (const MarkGroup* g : r.ByMark()) {
    const DurationHistogram& d = g->durations;
    marks.push_back({{"name", g->name},
                     {"mark", g->mark.empty() ? nlohmann::json() : nlohmann::json(g->mark)},
                     {"calls", d.count()},
                     {"p50_ns", d.Quantile(0.5)},
                     {"p90_ns", d.Quantile(0.9)},
                     {"p99_ns", d.Quantile(0.99)},
                     {"max_ns", d.max()}});
  }
  if (!marks.empty()) j["by_mark"] = std::move(marks);
  if (!r.Callers().empty()) j["callers"] = NeighbourJson(r.Callers(), "callers");
  if (!r.Callees().empty()) j["callees"] = NeighbourJson(r.Callees(), "callees");
  const output::Implausible imp = r.implausible();
  j["impossible"] = {{"count", imp.count()},
                     {"over_span", imp.over_span},
                     {"first_over_span", imp.first_over_span},
                     {"begun_before_full_trace", imp.inferred},
                     {"first_begun_before_full_trace", imp.first_inferred}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ptsnap::report
