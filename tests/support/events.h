// The one reader of ptsnap's `.events` dumps in tests (docs/decoding.md,
// "The .events format"):
//   <ts> <pid> <tid> B <name>[ inferred] via=<how>[ dso=<dso>][ <power args>]
//   <ts> <pid> <tid> E <name> begin=<ts>[ inferred] via=<how>[ dso=<dso>][ <power args>]
//   <ts> <pid> <tid> X <name> end=<ts> inferred
//   <ts> <pid> <tid> I <name>
// Names may hold spaces, so the optional fields are taken off the end.
// Power args (v3): a "[C-state Cn]" frame's KEY=VALUE fields
// (decode::PowerEntryArgs, PowerExitArgs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/string_util.h"

namespace ptsnap::testing {

struct EventLine {
  uint64_t ts = 0;
  int32_t pid = 0, tid = 0;
  char kind = 0;  // 'B', 'E', 'X', 'I'
  std::string name;
  uint64_t begin = 0;  // E
  uint64_t end = 0;    // X
  bool inferred = false;
  std::string via;  // B, E: "call", "return", ...
  std::string dso;  // B, E of a function; "" for pseudo frames
  // B, E of a "[C-state Cn]" frame: its power args, "c_state=C6 sub_state=0 ...".
  std::string power;
  std::string line;
};

namespace internal {
// Takes " KEY<value>" off the end of `rest` when it is there; the value
// runs to the end.
inline bool TakeSuffix(std::string& rest, std::string_view key, std::string* value) {
  size_t at = rest.rfind(key);
  if (at == std::string::npos) return false;
  *value = rest.substr(at + key.size());
  rest.resize(at);
  return true;
}
}  // namespace internal

// One event line, or false for the version, P and T lines.
inline bool ParseEventLine(std::string_view l, EventLine* e) {
  auto f = base::Split(l, ' ');
  if (f.size() < 5 || f[3].size() != 1 || std::string_view("BEXI").find(f[3][0]) == l.npos) {
    return false;
  }
  auto ts = base::ParseUint(f[0]);
  auto pid = base::ParseInt(f[1]);
  auto tid = base::ParseInt(f[2]);
  if (!ts || !pid || !tid) return false;
  e->ts = *ts;
  e->pid = static_cast<int32_t>(*pid);
  e->tid = static_cast<int32_t>(*tid);
  e->kind = f[3][0];
  e->line = std::string(l);
  std::string rest(l.substr(f[0].size() + f[1].size() + f[2].size() + 5));
  std::string v;
  if (e->kind == 'B' || e->kind == 'E') {
    // A "[C-state Cn]" frame's power args: the fields after via= (it has no dso).
    for (std::string_view first : {" c_state=", " last_c_state="}) {
      if (size_t at = rest.rfind(first); at != std::string::npos && rest.find(" via=") < at) {
        e->power = rest.substr(at + 1);
        rest.resize(at);
      }
    }
    internal::TakeSuffix(rest, " dso=", &e->dso);
    internal::TakeSuffix(rest, " via=", &e->via);
  }
  if (e->kind != 'I' && rest.size() >= 9 && rest.compare(rest.size() - 9, 9, " inferred") == 0) {
    e->inferred = true;
    rest.resize(rest.size() - 9);
  }
  if (e->kind == 'E' && internal::TakeSuffix(rest, " begin=", &v)) e->begin = std::stoull(v);
  if (e->kind == 'X' && internal::TakeSuffix(rest, " end=", &v)) e->end = std::stoull(v);
  e->name = rest;
  return true;
}

inline std::vector<EventLine> ParseEvents(std::string_view text) {
  std::vector<EventLine> out;
  for (auto l : base::Split(text, '\n')) {
    EventLine e;
    if (ParseEventLine(l, &e)) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ptsnap::testing
