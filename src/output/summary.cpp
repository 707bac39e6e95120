#include "output/summary.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

namespace ptsnap::output {

void SummarySink::OnMark(int32_t tid, std::string_view text, uint64_t /*ts*/) {
  ++marks_;
  last_mark_[tid] = text;
}

std::vector<std::pair<int32_t, std::string>> SummarySink::LastMarks() const {
  return {last_mark_.begin(), last_mark_.end()};
}

void SummarySink::OnCall(const Call& c) {
  constexpr size_t kRecent = 1024;
  if (recent_.empty()) recent_.resize(kRecent);
  const Key key{c.name, c.dso};
  Recent& r = recent_[((reinterpret_cast<uintptr_t>(c.name) >> 4) ^
                       (reinterpret_cast<uintptr_t>(c.dso) >> 4)) %
                      kRecent];
  if (!(r.key == key) || r.f == nullptr) r = {key, &functions_[key]};
  FunctionTime& f = *r.f;
  if (f.name.empty()) f.name = *c.name;
  if (!c.continued) f.calls++;  // the rest of a call a decode error cut is that call
  if (c.cut && !c.continued) f.cut++;
  f.self_ns += c.self_ns;
  f.total_ns += c.total_ns;  // recursion counted once (Call::total_ns)
  check_.OnCall(c);
}

std::vector<FunctionTime> SummarySink::Top(size_t n, bool by_self) const {
  std::vector<FunctionTime> all;
  all.reserve(functions_.size());
  // A name that files of several names define is FILE:NAME (the file's
  // name alone), report's rule (ReportSink::NameRowsByFile).
  auto file = [](const Key& k) { return std::filesystem::path(*k.dso).filename().string(); };
  std::unordered_map<const std::string*, std::set<std::string>> files_of;
  for (const auto& [k, v] : functions_)
    if (k.dso != nullptr) files_of[k.name].insert(file(k));
  for (const auto& [k, v] : functions_) {
    all.push_back(v);
    if (k.dso != nullptr && files_of[k.name].size() > 1) all.back().name = file(k) + ":" + v.name;
  }
  auto key = [by_self](const FunctionTime& f) { return by_self ? f.self_ns : f.total_ns; };
  std::sort(all.begin(), all.end(), [&](const FunctionTime& a, const FunctionTime& b) {
    if (key(a) != key(b)) return key(a) > key(b);
    return a.name < b.name;
  });
  if (all.size() > n) all.resize(n);
  return all;
}

std::string FormatDuration(uint64_t ns) {
  char buf[32];
  if (ns < 1000) {
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  } else if (ns < 1000000) {
    std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 1000000000) {
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

}  // namespace ptsnap::output
