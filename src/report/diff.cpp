#include "report/diff.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "output/plausibility.h"
#include "output/summary.h"

namespace ptsnap::report {

namespace {

// The value of the `key` column of one side (0: the trace has no row).
uint64_t Value(const FunctionStats* f, SortKey key) {
  return f == nullptr ? 0 : SortValue(*f, key);
}

uint64_t AbsChange(const DiffRow& r, SortKey key) {
  const uint64_t a = Value(r.a, key), b = Value(r.b, key);
  return a > b ? a - b : b - a;
}

std::string Signed(int64_t ns) {
  if (ns == 0) return "0 ns";
  const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return (ns < 0 ? "-" : "+") + output::FormatDuration(mag);
}

// The change of total as a percentage of A's: "new"/"gone" where one side
// has no row, "-" where A's total is 0 (no percentage of nothing).
std::string Percent(const DiffRow& r) {
  if (r.a == nullptr) return "new";
  if (r.b == nullptr) return "gone";
  if (r.a->total_ns == 0) return "-";
  char buf[32];
  std::snprintf(
      buf, sizeof buf, "%+.1f%%",
      100.0 * static_cast<double>(r.total_change_ns()) / static_cast<double>(r.a->total_ns));
  return buf;
}

std::string TraceLine(const char* label, const DiffTrace& t) {
  const ReportSink& r = *t.sink;
  std::string out = std::string(label) + t.path + ": span " + output::FormatDuration(r.span_ns()) +
                    ", " + std::to_string(r.threads()) + " thread(s), " +
                    std::to_string(r.slices()) + " calls";
  if (r.outside_window() != 0)
    out += " (" + std::to_string(r.outside_window()) + " outside --since/--until)";
  if (!r.options().clock.empty()) out += "; " + r.options().clock;
  return out + "\n";
}

// Times on two different clocks (an --emulate-waits recording beside a
// plain --emulate one, virtual beside hardware) do not compare: a wait is
// time in one and none in the other.
std::string ClockWarning(const DiffTrace& a, const DiffTrace& b) {
  const std::string &ca = a.sink->options().clock, &cb = b.sink->options().clock;
  if (ca.empty() || cb.empty() || ca == cb) return "";
  return "warning: A and B were timed on different clocks (above): their times do not compare "
         "(a thread's sleeping, I/O and waiting count in one and not in the other); record both "
         "the same way\n";
}

// Two histograms side by side, bars on one scale.
std::string Histograms(const FunctionStats& a, const FunctionStats& b) {
  std::map<int, std::pair<uint64_t, uint64_t>> rows;
  for (const auto& [k, n] : a.durations.Octaves()) rows[k].first = n;
  for (const auto& [k, n] : b.durations.Octaves()) rows[k].second = n;
  uint64_t peak = 0;
  for (const auto& [k, n] : rows) peak = std::max({peak, n.first, n.second});
  auto bar = [peak](uint64_t n) {
    return std::string(peak == 0 ? 0 : static_cast<size_t>((n * 25 + peak - 1) / peak), '#');
  };
  std::string out = std::string(29, ' ') + "A" + std::string(34, ' ') + "B\n";
  for (const auto& [k, n] : rows) {
    const auto [lo, hi] = DurationHistogram::OctaveRange(k);
    char buf[200];
    std::snprintf(buf, sizeof buf, "  [%11s, %11s) %-25s %8llu %-25s %8llu\n",
                  output::FormatDuration(lo).c_str(), output::FormatDuration(hi).c_str(),
                  bar(n.first).c_str(), static_cast<unsigned long long>(n.first),
                  bar(n.second).c_str(), static_cast<unsigned long long>(n.second));
    out += buf;
  }
  return out;
}

nlohmann::json SideJson(const FunctionStats* f) {
  if (f == nullptr) return nullptr;
  const DurationHistogram& d = f->durations;
  nlohmann::json j = {{"calls", f->calls},
                      {"total_ns", f->total_ns},
                      {"self_ns", f->self_ns},
                      {"p50_ns", d.Quantile(0.5)},
                      {"p99_ns", d.Quantile(0.99)}};
  if (d.count() == 0) j["p50_ns"] = j["p99_ns"] = nullptr;
  return j;
}

nlohmann::json TraceJson(const DiffTrace& t) {
  nlohmann::json j = {{"path", t.path},
                      {"span_ns", t.sink->span_ns()},
                      {"threads", t.sink->threads()},
                      {"calls", t.sink->slices()},
                      {"outside_window", t.sink->outside_window()}};
  if (!t.sink->options().clock.empty()) j["clock"] = t.sink->options().clock;
  return j;
}

}  // namespace

int64_t DiffRow::total_change_ns() const {
  const uint64_t ta = a ? a->total_ns : 0, tb = b ? b->total_ns : 0;
  return tb >= ta ? static_cast<int64_t>(tb - ta) : -static_cast<int64_t>(ta - tb);
}

std::vector<DiffRow> DiffFunctions(const ReportSink& a, const ReportSink& b, SortKey key,
                                   size_t limit) {
  std::map<std::string, DiffRow> by_name;
  for (const FunctionStats* f : a.Functions(SortKey::kName, 0)) {
    DiffRow& r = by_name[f->name];
    r.name = f->name;
    r.a = f;
  }
  for (const FunctionStats* f : b.Functions(SortKey::kName, 0)) {
    DiffRow& r = by_name[f->name];
    r.name = f->name;
    r.b = f;
  }
  std::vector<DiffRow> rows;
  rows.reserve(by_name.size());
  for (auto& [name, r] : by_name) rows.push_back(std::move(r));
  if (key != SortKey::kName)  // by_name is by name already
    std::stable_sort(rows.begin(), rows.end(), [key](const DiffRow& x, const DiffRow& y) {
      return AbsChange(x, key) > AbsChange(y, key);
    });
  if (limit != 0 && rows.size() > limit) rows.resize(limit);
  return rows;
}

std::string FormatDiffText(const DiffTrace& a, const DiffTrace& b, SortKey key, size_t limit,
                           bool full_names) {
  std::string out = TraceLine("A (baseline) ", a) + TraceLine("B            ", b);
  out += ClockWarning(a, b);
  out +=
      "change: B - A, and as a percentage of A (new: only in B, gone: only in A). Durations: "
      "p50/p99 within 3.1%; total is inclusive, recursion counted once.\n\n";
  const auto rows = DiffFunctions(*a.sink, *b.sink, key, limit);
  size_t width = 40;
  if (full_names)
    for (const DiffRow& r : rows) width = std::max(width, r.name.size());
  char buf[512];
  std::snprintf(buf, sizeof buf, " %9s %9s %12s %12s %13s %8s %12s %12s %11s %11s %11s %11s\n",
                "calls A", "calls B", "total A", "total B", "change", "%", "self A", "self B",
                "p50 A", "p50 B", "p99 A", "p99 B");
  out += "function" + std::string(width - 8, ' ') + buf;
  bool shortened = false, dash = false;
  for (const DiffRow& r : rows) {
    auto num = [&dash](const FunctionStats* f, uint64_t v) {
      if (f == nullptr) dash = true;
      return f == nullptr ? std::string("-") : std::to_string(v);
    };
    auto dur = [&dash](const FunctionStats* f, uint64_t ns) {
      if (f == nullptr) dash = true;
      return f == nullptr ? std::string("-") : output::FormatDuration(ns);
    };
    // No call began and ended in that trace: its durations are unknown.
    auto call = [&dash](const FunctionStats* f, double q) {
      if (f == nullptr || f->durations.count() == 0) {
        dash = true;
        return std::string("-");
      }
      return output::FormatDuration(f->durations.Quantile(q));
    };
    std::string name = full_names ? r.name : ShortName(r.name, width);
    shortened |= name != r.name;
    if (name.size() < width) name.append(width - name.size(), ' ');
    std::snprintf(buf, sizeof buf, " %9s %9s %12s %12s %13s %8s %12s %12s %11s %11s %11s %11s\n",
                  num(r.a, r.a ? r.a->calls : 0).c_str(), num(r.b, r.b ? r.b->calls : 0).c_str(),
                  dur(r.a, r.a ? r.a->total_ns : 0).c_str(),
                  dur(r.b, r.b ? r.b->total_ns : 0).c_str(), Signed(r.total_change_ns()).c_str(),
                  Percent(r).c_str(), dur(r.a, r.a ? r.a->self_ns : 0).c_str(),
                  dur(r.b, r.b ? r.b->self_ns : 0).c_str(), call(r.a, 0.5).c_str(),
                  call(r.b, 0.5).c_str(), call(r.a, 0.99).c_str(), call(r.b, 0.99).c_str());
    out += name + buf;
  }
  if (shortened) out += "(names shortened to fit: --full-names prints them whole)\n";
  if (dash)
    out +=
        "('-': the function is not in that trace, or, for p50 and p99, none of its calls there "
        "began and ended in the trace)\n";
  for (const auto& [label, t] : {std::pair{"A", &a}, std::pair{"B", &b}})
    if (const std::string imp = output::FormatImplausible(t->sink->implausible()); !imp.empty())
      out += "\nIn " + std::string(label) + " (" + t->path + "):\n" + imp;
  const std::vector<FunctionStats> named_a = a.sink->Named(), named_b = b.sink->Named();
  for (size_t i = 0; i < named_a.size() && i < named_b.size(); ++i) {
    const FunctionStats &fa = named_a[i], &fb = named_b[i];
    out += "\n" + fa.name + ": " + std::to_string(fa.calls) + " calls in A, " +
           std::to_string(fb.calls) + " in B";
    if (fa.durations.count() == 0 && fb.durations.count() == 0) {
      out += fa.calls == 0 && fb.calls == 0 ? " (in neither trace)\n"
                                            : " (no call began and ended in either trace)\n";
      continue;
    }
    out += ", durations:\n" + Histograms(fa, fb);
  }
  return out;
}

std::string FormatDiffJson(const DiffTrace& a, const DiffTrace& b, SortKey key, size_t limit) {
  nlohmann::json j;
  j["a"] = TraceJson(a);
  j["b"] = TraceJson(b);
  nlohmann::json fns = nlohmann::json::array();
  for (const DiffRow& r : DiffFunctions(*a.sink, *b.sink, key, limit))
    fns.push_back({{"name", r.name},
                   {"a", SideJson(r.a)},
                   {"b", SideJson(r.b)},
                   {"total_change_ns", r.total_change_ns()}});
  j["functions"] = std::move(fns);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string DiffFolded(const ReportSink& a, const ReportSink& b) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> lines;
  for (const auto& [line, ns] : a.FoldedLines()) lines[line].first = ns;
  for (const auto& [line, ns] : b.FoldedLines()) lines[line].second = ns;
  std::string out;
  for (const auto& [line, n] : lines)
    out += line + " " + std::to_string(n.first) + " " + std::to_string(n.second) + "\n";
  return out;
}

}  // namespace ptsnap::report
